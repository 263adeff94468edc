// The operator console (api/console.ts; README, "Operator console"): Preact and htm as ES modules, no
// build. Signing in posts the token once and gets a session: an HttpOnly cookie this page cannot read,
// which the browser sends with every call to /admin/v1, and a CSRF token kept in memory for writes.
// Nothing is kept in sessionStorage or localStorage; a reload asks the service for the session.
// Views are chosen by the URL's fragment (#overview, …), which may name what the view shows
// (#webhooks/<id>, #delivery/<id>, #cart-audit/<uuid>), so every object links to the related ones;
// each view shows what the person's role can do. The header names the one time zone every view shows
// times in (admin.js `ZONE`).
import { render } from 'preact';
import { useCallback, useEffect, useState } from 'preact/hooks';
import { currentSession, html, signIn, signOut, timesIn, whenSessionEnds, ZONE } from './admin.js';
import { CartAudit } from './cart-audit.js';
import { DeliveryView } from './deliveries.js';
import { Overview } from './overview.js';
import { Partners } from './partners.js';
import { Webhooks } from './webhooks.js';

const VIEWS = [
  { id: 'overview', title: 'Overview', View: Overview },
  { id: 'webhooks', title: 'Webhooks', View: Webhooks },
  { id: 'partners', title: 'Partners', View: Partners },
  { id: 'cart-audit', title: 'Cart audit', View: CartAudit },
  // Reached by links only (a delivery's id), not from the navigation.
  { id: 'delivery', title: 'Delivery', View: DeliveryView, linked: true },
];

function SignIn({ onSignedIn, problem }) {
  const [token, setToken] = useState('');
  const [error, setError] = useState(null);
  const [checking, setChecking] = useState(false);
  const submit = async (event) => {
    event.preventDefault();
    setChecking(true);
    setError(null);
    try {
      const session = await signIn(token);
      setToken('');
      onSignedIn(session);
    } catch (e) {
      setError(e.status === 401 ? 'That token was refused. Check it and try again.' : e.message);
    } finally {
      setChecking(false);
    }
  };
  return html`
    <main class="sign-in">
      <h1>Partner Data Service console</h1>
      ${problem && html`<p class="error" role="alert">${problem}</p>`}
      <form onSubmit=${submit}>
        <label for="token">Operator token</label>
        <input id="token" name="token" type="password" autocomplete="off" required
          value=${token} onInput=${(e) => setToken(e.currentTarget.value)} />
        <p class="hint">Sent once to start a session; the page keeps no copy of it.</p>
        <button type="submit" disabled=${checking}>${checking ? 'Checking…' : 'Sign in'}</button>
        ${error && html`<p class="error" role="alert">${error}</p>`}
      </form>
    </main>`;
}

/**
 * The view the fragment names and what it shows (`#delivery/<id>`: the delivery `<id>`), else the
 * overview; after a `?`, the state of its form (`#cart-audit?store_id=2`: a search).
 */
function viewOf() {
  const [where, fragment = ''] = location.hash.slice(1).split('?', 2);
  const [id, ...rest] = where.split('/');
  const view = VIEWS.find((v) => v.id === id);
  if (!view) return { ...VIEWS[0], param: null, fragment: '' };
  return { ...view, param: rest.length > 0 ? decodeURIComponent(rest.join('/')) : null, fragment };
}

function App() {
  // undefined: asking the service (or signing out); null: signed out; else the session (person, role,
  // CSRF token).
  const [session, setSession] = useState(undefined);
  const [problem, setProblem] = useState(null);
  const [view, setView] = useState(viewOf);
  useEffect(() => {
    const follow = () => setView(viewOf());
    addEventListener('hashchange', follow);
    whenSessionEnds(() => setSession(null));
    currentSession().then(setSession, (e) => {
      setProblem(`Could not reach the admin API: ${e.message}`);
      setSession(null);
    });
    return () => removeEventListener('hashchange', follow);
  }, []);
  const ended = useCallback(() => setSession(null), []);
  const leave = useCallback(async () => {
    // The views go first, so they start no call; then the session ends on the server.
    setSession(undefined);
    try {
      await signOut(session);
    } catch (e) {
      if (e.status !== 401) setProblem(`Signing out failed (${e.message}): the session may still be live.`);
    }
    setSession(null);
  }, [session]);
  if (session === undefined) return html`<main><p>Loading…</p></main>`;
  if (session === null) {
    const signedIn = (s) => {
      setProblem(null);
      setSession(s);
    };
    return html`<${SignIn} onSignedIn=${signedIn} problem=${problem} />`;
  }
  const { View } = view;
  const { operator } = session;
  return html`
    <header class="top">
      <p class="brand">Partner Data Service console</p>
      <nav aria-label="Views">
        ${VIEWS.filter((v) => !v.linked).map(
          (v) =>
            html`<a key=${v.id} href=${`#${v.id}`} aria-current=${v.id === view.id ? 'page' : undefined}>${v.title}</a>`,
        )}
      </nav>
      <p class="zone" data-zone=${ZONE}>${timesIn()}</p>
      <p class="who">Signed in as <strong>${operator.name}</strong> <span class="role" data-role=${operator.role}>${operator.role}</span></p>
      <button type="button" class="secondary" onClick=${leave}>Sign out</button>
    </header>
    <main>
      <h1 class="visually-hidden">${view.title}</h1>
      <${View} key=${`${view.id}/${view.param ?? ''}`} session=${session} param=${view.param} fragment=${view.fragment} onUnauthorized=${ended} />
    </main>`;
}

render(html`<${App} />`, document.getElementById('console'));
