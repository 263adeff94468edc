// The operator console (api/console.ts; README, "Operator console"): Preact and htm as ES modules, no
// build. The operator token stays in this tab's sessionStorage and goes out only in the Authorization
// header of calls to /admin/v1: the console has no authority of its own.

import htm from 'htm';
import { h, render } from 'preact';
import { useCallback, useEffect, useState } from 'preact/hooks';

const html = htm.bind(h);
const TOKEN_KEY = 'pds.operator-token';
const POLL_MS = 1000;

/** A call to the admin API; a refusal throws with the problem's detail and status. */
async function admin(token, method, path) {
  const res = await fetch(`/admin/v1${path}`, { method, headers: { authorization: `Bearer ${token}` } });
  const text = await res.text();
  const body = text ? JSON.parse(text) : null;
  if (!res.ok) {
    const error = new Error(body?.detail ?? `${res.status} ${res.statusText}`);
    error.status = res.status;
    throw error;
  }
  return body;
}

function SignIn({ onSignedIn }) {
  const [token, setToken] = useState('');
  const [error, setError] = useState(null);
  const [checking, setChecking] = useState(false);
  const submit = async (event) => {
    event.preventDefault();
    setChecking(true);
    setError(null);
    try {
      await admin(token, 'GET', '/projections');
      sessionStorage.setItem(TOKEN_KEY, token);
      onSignedIn(token);
    } catch (e) {
      setError(e.status === 401 ? 'That token was refused. Check it and try again.' : e.message);
    } finally {
      setChecking(false);
    }
  };
  return html`
    <main class="sign-in">
      <h1>Partner Data Service console</h1>
      <form onSubmit=${submit}>
        <label for="token">Operator token</label>
        <input id="token" name="token" type="password" autocomplete="off" required
          value=${token} onInput=${(e) => setToken(e.currentTarget.value)} />
        <p class="hint">Kept in this browser tab only, until you sign out or close it.</p>
        <button type="submit" disabled=${checking}>${checking ? 'Checking…' : 'Sign in'}</button>
        ${error && html`<p class="error" role="alert">${error}</p>`}
      </form>
    </main>`;
}

const number = (n) => n.toLocaleString('en-US');

function ProjectionRow({ projection, onRebuild }) {
  const p = projection;
  const rebuilding = p.state === 'rebuilding';
  const percent = p.progress ? Math.round(p.progress.percent) : null;
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
            ? html`<span class="muted">none</span>`
            : html`<progress max="100" value=${percent} aria-label=${`${p.name} rebuild progress`}></progress>
              <span class="percent">${percent}%</span>`
        }
      </td>
      <td>
        <button type="button" disabled=${rebuilding} onClick=${() => onRebuild(p.name)}
          aria-label=${`Rebuild ${p.name}`}>${rebuilding ? 'Rebuilding…' : 'Rebuild'}</button>
      </td>
    </tr>`;
}

function Projections({ token, onUnauthorized }) {
  const [projections, setProjections] = useState(null);
  const [message, setMessage] = useState(null);
  const refresh = useCallback(async () => {
    try {
      const body = await admin(token, 'GET', '/projections');
      setProjections(body.projections);
    } catch (e) {
      if (e.status === 401) onUnauthorized();
      else setMessage(`Could not read the projections: ${e.message}`);
    }
  }, [token, onUnauthorized]);
  useEffect(() => {
    refresh();
    const timer = setInterval(refresh, POLL_MS);
    return () => clearInterval(timer);
  }, [refresh]);
  const rebuild = async (name) => {
    try {
      await admin(token, 'POST', `/projections/${encodeURIComponent(name)}/rebuild`);
      setMessage(`Rebuilding ${name}: its progress shows below.`);
      await refresh();
    } catch (e) {
      setMessage(`Could not rebuild ${name}: ${e.message}`);
    }
  };
  return html`
    <section aria-labelledby="projections-title">
      <h2 id="projections-title">Projections</h2>
      <p class="hint">Each read model, how far it has applied the event log, and a rebuild into fresh copies
        while the live ones serve. Updated every second.</p>
      <p class="status" role="status">${message ?? ''}</p>
      ${
        projections === null
          ? html`<p>Loading…</p>`
          : html`
          <div class="table-scroll">
            <table>
              <thead>
                <tr><th scope="col">Projection</th><th scope="col">State</th><th scope="col">Checkpoint</th>
                  <th scope="col">Lag (events)</th><th scope="col">Lag (time)</th><th scope="col">Rebuild</th>
                  <th scope="col"><span class="visually-hidden">Actions</span></th></tr>
              </thead>
              <tbody>
                ${projections.map((p) => html`<${ProjectionRow} key=${p.name} projection=${p} onRebuild=${rebuild} />`)}
              </tbody>
            </table>
          </div>`
      }
    </section>`;
}

function App() {
  const [token, setToken] = useState(() => sessionStorage.getItem(TOKEN_KEY));
  const signOut = useCallback(() => {
    sessionStorage.removeItem(TOKEN_KEY);
    setToken(null);
  }, []);
  if (!token) return html`<${SignIn} onSignedIn=${setToken} />`;
  return html`
    <header class="top">
      <h1>Partner Data Service console</h1>
      <button type="button" class="secondary" onClick=${signOut}>Sign out</button>
    </header>
    <main>
      <${Projections} token=${token} onUnauthorized=${signOut} />
    </main>`;
}

render(html`<${App} />`, document.getElementById('console'));
