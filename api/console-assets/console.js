// The operator console (api/console.ts; README, "Operator console"): Preact and htm as ES modules, no
// build. The operator token stays in this tab's sessionStorage and goes out only in the Authorization
// header of calls to /admin/v1: the console has no authority of its own. Views are chosen by the
// URL's fragment (#overview, …), which never carries the token.
import { render } from 'preact';
import { useCallback, useEffect, useState } from 'preact/hooks';
import { admin, html, Me, useAdminRead } from './admin.js';
import { CartAudit } from './cart-audit.js';
import { Overview } from './overview.js';
import { Partners } from './partners.js';
import { Webhooks } from './webhooks.js';

const TOKEN_KEY = 'pds.operator-token';
const VIEWS = [
  { id: 'overview', title: 'Overview', View: Overview },
  { id: 'webhooks', title: 'Webhooks', View: Webhooks },
  { id: 'partners', title: 'Partners', View: Partners },
  { id: 'cart-audit', title: 'Cart audit', View: CartAudit },
];

function SignIn({ onSignedIn }) {
  const [token, setToken] = useState('');
  const [error, setError] = useState(null);
  const [checking, setChecking] = useState(false);
  const submit = async (event) => {
    event.preventDefault();
    setChecking(true);
    setError(null);
    try {
      await admin(token, 'GET', '/me');
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

const viewOf = () => VIEWS.find((v) => `#${v.id}` === location.hash) ?? VIEWS[0];

function App() {
  const [token, setToken] = useState(() => sessionStorage.getItem(TOKEN_KEY));
  const [view, setView] = useState(viewOf);
  useEffect(() => {
    const follow = () => setView(viewOf());
    addEventListener('hashchange', follow);
    return () => removeEventListener('hashchange', follow);
  }, []);
  const signOut = useCallback(() => {
    sessionStorage.removeItem(TOKEN_KEY);
    setToken(null);
  }, []);
  if (!token) return html`<${SignIn} onSignedIn=${setToken} />`;
  return html`<${SignedIn} token=${token} view=${view} signOut=${signOut} />`;
}

/** The views, for the person the token belongs to: each shows what their role can do. */
function SignedIn({ token, view, signOut }) {
  const read = useAdminRead(token, '/me', 'operator', signOut);
  const me = read.value;
  if (me === null) {
    return html`<main><h1>Partner Data Service console</h1>${
      read.error ? html`<p class="error" role="alert">${read.error}</p>` : html`<p>Loading…</p>`
    }</main>`;
  }
  const { View } = view;
  return html`
    <${Me.Provider} value=${me}>
    <header class="top">
      <p class="brand">Partner Data Service console</p>
      <p class="who">${me.name} <span class="muted">(${me.role})</span></p>
      <nav aria-label="Views">
        ${VIEWS.map(
          (v) =>
            html`<a key=${v.id} href=${`#${v.id}`} aria-current=${v === view ? 'page' : undefined}>${v.title}</a>`,
        )}
      </nav>
      <button type="button" class="secondary" onClick=${signOut}>Sign out</button>
    </header>
    <main>
      <h1 class="visually-hidden">${view.title}</h1>
      <${View} key=${view.id} token=${token} onUnauthorized=${signOut} />
    </main>
    <//>`;
}

render(html`<${App} />`, document.getElementById('console'));
