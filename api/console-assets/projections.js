// The projections view: each read model's state, checkpoint and lag, and a rebuild whose progress
// moves until the rebuilt copies are live (GET /admin/v1/projections, POST …/{name}/rebuild; rebuilds
// are shown to operators and admins only).
import { useState } from 'preact/hooks';
import { admin, html, number, useAdminRead, useMay } from './admin.js';

const POLL_MS = 1000;

function ProjectionRow({ projection, onRebuild, rebuilds }) {
  const p = projection;
  const rebuilding = p.state === 'rebuilding';
  // Another projector holds the read store's lease and writes these read models: it rebuilds them.
  const standby = p.state === 'standby';
  const percent = p.progress ? Math.round(p.progress.percent) : null;
  // The last rebuild failed, and none has succeeded since (one an upgrade asked for is tried again).
  const failure = p.rebuild_failure
    ? html`<span class="error">last rebuild failed at ${new Date(p.rebuild_failure.at).toLocaleString()}: ${p.rebuild_failure.error}</span>`
    : '';
  return html`
    <tr data-projection=${p.name}>
      <th scope="row">${p.name}</th>
      <td><span class=${`state state-${p.state}`}>${p.state}</span>${p.error ? html` <span class="error">${p.error}</span>` : ''}</td>
      <td class="num">${number(p.checkpoint)}</td>
      <td class="num">${number(p.lag_events)}</td>
      <td class="num">${p.lag_seconds.toFixed(1)} s</td>
      <td>
        ${
          percent === null
            ? failure || html`<span class="muted">none</span>`
            : html`<progress max="100" value=${percent} aria-label=${`${p.name} rebuild progress`}></progress>
              <span class="percent">${percent}%</span> ${failure}`
        }
      </td>
      ${
        rebuilds &&
        html`<td>
        <button type="button" disabled=${rebuilding || standby} onClick=${() => onRebuild(p.name)}
          title=${standby ? 'This projector stands by: the one holding the lease rebuilds' : undefined}
          aria-label=${`Rebuild ${p.name}`}>${rebuilding ? 'Rebuilding…' : 'Rebuild'}</button>
      </td>`
      }
    </tr>`;
}

export function Projections({ token, onUnauthorized }) {
  const rebuilds = useMay('operator');
  const read = useAdminRead(token, '/projections', 'projections', onUnauthorized, POLL_MS);
  const projections = read.value;
  const [message, setMessage] = useState(null);
  const rebuild = async (name) => {
    try {
      await admin(token, 'POST', `/projections/${encodeURIComponent(name)}/rebuild`);
      setMessage(`Rebuilding ${name}: its progress shows below.`);
      await read.refresh();
    } catch (e) {
      setMessage(`Could not rebuild ${name}: ${e.message}`);
    }
  };
  return html`
    <section aria-labelledby="projections-title">
      <h2 id="projections-title">Projections</h2>
      <p class="hint">Each read model, how far it has applied the event log, and a rebuild into fresh copies
        while the live ones serve. Updated every second.</p>
      <p class="status" role="status">${message ?? (read.error ? `Could not read the projections: ${read.error}` : '')}</p>
      ${
        projections === null
          ? html`<p>Loading…</p>`
          : html`
          <div class="table-scroll">
            <table class="projections">
              <thead>
                <tr><th scope="col">Projection</th><th scope="col">State</th><th scope="col">Checkpoint</th>
                  <th scope="col">Lag (events)</th><th scope="col">Lag (time)</th><th scope="col">Rebuild</th>
                  ${rebuilds && html`<th scope="col"><span class="visually-hidden">Actions</span></th>`}</tr>
              </thead>
              <tbody>
                ${projections.map((p) => html`<${ProjectionRow} key=${p.name} projection=${p} onRebuild=${rebuild} rebuilds=${rebuilds} />`)}
              </tbody>
            </table>
          </div>`
      }
    </section>`;
}
