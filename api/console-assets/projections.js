// The projections view: each read model's state, checkpoint and lag, marked LAGGING when the admin
// API judges it so (docs/operations.md, "Health"), and a rebuild whose progress moves until the
// rebuilt copies are live (GET /admin/v1/projections, POST …/{name}/rebuild); the Rebuild buttons
// show only to a role that may rebuild. What it says of a rebuild follows the rebuild: "Rebuilding"
// while it runs, then that it ended, and every panel reads again when it does.
import { useEffect, useState } from 'preact/hooks';
import { admin, announceChange, can, html, number, Trouble, time } from './admin.js';

export const POLL_MS = 1000;

/** A build's time left, roughly (`eta_seconds`, docs/operations.md, "Projections"): none at the end or before a rate. */
const left = (s) => (!s ? '' : s < 90 ? `${Math.ceil(s)} s left` : `about ${Math.round(s / 60)} min left`);

/**
 * One projection's row. While the projections cannot be read (`stale`), its state and lag are blank
 * and it is not marked LAGGING: the last ones read may no longer hold (docs/operations.md, "The console").
 */
function ProjectionRow({ projection, stale, onRebuild }) {
  const p = projection;
  const rebuilding = p.state === 'rebuilding';
  // Another projector holds the read store's lease and writes these read models: it rebuilds them.
  const standby = p.state === 'standby';
  const percent = p.progress ? Math.round(p.progress.percent) : null;
  // The last rebuild failed, and none has succeeded since (one an upgrade asked for is tried again).
  const failure = p.rebuild_failure
    ? html`<span class="error">last rebuild failed at ${time(p.rebuild_failure.at)}: ${p.rebuild_failure.error}</span>`
    : '';
  return html`
    <tr data-projection=${p.name} data-status=${stale ? undefined : p.status}
      class=${!stale && p.status === 'lagging' ? 'lagging' : undefined}>
      <th scope="row">${p.name}</th>
      <td data-label="State">${
        stale
          ? ''
          : html`<span class=${`state state-${p.state}`}>${p.state}</span>${p.error ? html` <span class="error">${p.error}</span>` : ''}
        <${Trouble} judged=${p} mark="LAGGING" />`
      }</td>
      <td class="num" data-label="Checkpoint">${number(p.checkpoint)}</td>
      <td class="num" data-label="Lag (events)">${stale ? '' : number(p.lag_events)}</td>
      <td class="num" data-label="Lag (time)">${stale ? '' : `${p.lag_seconds.toFixed(1)} s`}</td>
      <td data-label="Rebuild">
        ${
          percent === null
            ? failure || html`<span class="muted">none</span>`
            : html`<progress max="100" value=${percent} aria-label=${`${p.name} ${p.state === 'starting' ? 'build' : 'rebuild'} progress`}></progress>
              <span class="percent">${percent}%</span> <span class="left">${left(p.progress.eta_seconds)}</span> ${failure}`
        }
      </td>
      ${
        onRebuild &&
        html`<td data-label="Actions">
          <button type="button" disabled=${rebuilding || standby} onClick=${() => onRebuild(p.name)}
            title=${standby ? 'This projector stands by: the one holding the lease rebuilds' : undefined}
            aria-label=${`Rebuild ${p.name}`}>${rebuilding ? 'Rebuilding…' : 'Rebuild'}</button>
        </td>`
      }
    </tr>`;
}

/**
 * What to say of the rebuild asked for here, from the projections as they are now: running until the
 * projection shows a rebuild newer than the one before it was asked (its progress) and is no longer
 * rebuilding, then how it ended. A rebuild that stops with no progress and no failure (its projector
 * lost the lease and stands by, or it was aborted) ended too: once the projection has been seen
 * rebuilding (`asked.seen`), or stands by, and is no longer rebuilding, that is said with its state.
 * One can also start and end between two polls, never seen rebuilding (its projector lost the lease
 * and took it back): a projection neither rebuilding nor with progress, on a read started a poll's
 * interval after the request was answered (`readAt`, `asked.answeredAt`), ended too. Not sooner: the
 * projector says `rebuilding` only once it has made the fresh copies, after the request is answered.
 * `asked.before` is the projection as it was when asked.
 */
function rebuildNews(asked, projections, readAt) {
  if (!asked) return null;
  if (asked.failed) return `Could not rebuild ${asked.name}: ${asked.failed}`;
  const p = projections?.find((x) => x.name === asked.name);
  const failedSince = p?.rebuild_failure && p.rebuild_failure.at !== asked.before?.rebuild_failure?.at;
  if (failedSince) return `The rebuild of ${asked.name} failed: ${p.rebuild_failure.error}`;
  const newer = p?.progress && p.progress.started_at !== asked.before?.progress?.started_at;
  if (p && p.state !== 'rebuilding' && newer) return `${asked.name} is rebuilt: the rebuilt copies are live.`;
  const lateRead = readAt !== null && readAt >= asked.answeredAt + POLL_MS;
  if (p && p.state !== 'rebuilding' && (asked.seen || p.state === 'standby' || (lateRead && !p.progress)))
    return `The rebuild of ${asked.name} ended without finishing: its state is ${p.state}.`;
  return `Rebuilding ${asked.name}: its progress shows below.`;
}

/** The projections table; `read` is the overview's read of GET /admin/v1/projections. */
export function Projections({ session, read }) {
  const projections = read.value?.projections ?? null;
  const [asked, setAsked] = useState(null);
  const rebuilds = can(session, 'projections.rebuild');
  const rebuild = async (name) => {
    const before = projections?.find((p) => p.name === name);
    try {
      await admin(session, 'POST', `/projections/${encodeURIComponent(name)}/rebuild`);
      setAsked({ name, before, answeredAt: Date.now() });
      await read.refresh();
      announceChange();
    } catch (e) {
      setAsked({ name, before, failed: e.message });
    }
  };
  // Whether the projection asked for has been seen rebuilding since: what tells a rebuild that ended
  // without progress from one not started yet.
  const rebuildingNow = asked && projections?.find((p) => p.name === asked.name)?.state === 'rebuilding';
  useEffect(() => {
    if (rebuildingNow) setAsked((a) => (a && !a.seen ? { ...a, seen: true } : a));
  }, [rebuildingNow]);
  const message = rebuildNews(asked, projections, read.readAt);
  // Once the rebuild has ended, every panel reads what it rebuilt at once.
  const ended = asked && !asked.failed && !message.startsWith('Rebuilding');
  useEffect(() => {
    if (ended) announceChange();
  }, [ended]);
  return html`
    <section aria-labelledby="projections-title">
      <h2 id="projections-title">Projections</h2>
      <p class="hint">Each read model, how far it has applied the event log${rebuilds ? ', and a rebuild into fresh copies while the live ones serve' : ''}. Updated every second.</p>
      <p class="status" role="status">${message ?? ''}</p>
      ${read.error && html`<p class="error" role="alert">Could not read the projections: ${read.error}</p>`}
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
                ${projections.map((p) => html`<${ProjectionRow} key=${p.name} projection=${p} stale=${Boolean(read.error)} onRebuild=${rebuilds ? rebuild : undefined} />`)}
              </tbody>
            </table>
          </div>`
      }
    </section>`;
}
