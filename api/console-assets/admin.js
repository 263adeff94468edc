// What the console's views share: htm bound to Preact, the one way they call the admin API, and
// the hook that reads from it.

import htm from 'htm';
import { createContext, h } from 'preact';
import { useCallback, useContext, useEffect, useState } from 'preact/hooks';

export const html = htm.bind(h);

/** The person signed in ({operator_id, name, role} of GET /admin/v1/me), for every view. */
export const Me = createContext(null);
const ROLES = ['admin', 'operator', 'auditor'];

/**
 * Whether the person signed in has `role` or more (admin > operator > auditor): the console shows
 * each person only what their role can do. The admin API refuses the rest anyway (403).
 */
export function useMay(role) {
  const me = useContext(Me);
  return me !== null && ROLES.indexOf(me.role) <= ROLES.indexOf(role);
}

/** Who did something, as the admin API names them: the person's name (with the id on hover), else type and id. */
export const person = (actor) =>
  actor.name
    ? html`<span title=${`${actor.type} ${actor.id}`}>${actor.name}</span>`
    : `${actor.type} ${actor.id}`;

/** A call to `/admin/v1`; a refusal throws with the problem's detail and status. */
export async function admin(token, method, path, body) {
  const headers = { authorization: `Bearer ${token}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`/admin/v1${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  const parsed = text ? JSON.parse(text) : null;
  if (!res.ok) {
    const error = new Error(parsed?.detail ?? `${res.status} ${res.statusText}`);
    error.status = res.status;
    throw error;
  }
  return parsed;
}

export const number = (n) => n.toLocaleString('en-US');

/** "1, 2 3" → [1, 2, 3]: ids as an operator types them. */
export const idList = (text) =>
  text
    .split(/[\s,]+/)
    .filter(Boolean)
    .map(Number);

/** An ISO time as the operator's browser shows local times, with the ISO form on hover. */
export const time = (iso) =>
  iso ? html`<time datetime=${iso} title=${iso}>${new Date(iso).toLocaleString()}</time>` : '—';

/**
 * Reads `field` of `GET /admin/v1${path}` when the view shows, on `refresh()`, and every `everyMs` if
 * given. A refused token signs out (`onUnauthorized`); another failure is kept in `error`.
 */
export function useAdminRead(token, path, field, onUnauthorized, everyMs) {
  const [value, setValue] = useState(null);
  const [error, setError] = useState(null);
  const refresh = useCallback(async () => {
    try {
      setValue((await admin(token, 'GET', path))[field]);
      setError(null);
    } catch (e) {
      if (e.status === 401) onUnauthorized();
      else setError(e.message);
    }
  }, [token, path, field, onUnauthorized]);
  useEffect(() => {
    refresh();
    if (!everyMs) return undefined;
    const timer = setInterval(refresh, everyMs);
    return () => clearInterval(timer);
  }, [refresh, everyMs]);
  return { value, error, refresh };
}

/**
 * A write from a panel: `act(call, said)` runs it; a secret in the answer (`secret.field`) is shown
 * once through `onSecret`, anything else is said in the panel's `message`; `onChanged` follows.
 */
export function useWrite({ secret, onSecret, onChanged }) {
  const [message, setMessage] = useState(null);
  const act = async (call, said) => {
    try {
      const answer = await call();
      const value = answer?.[secret.field];
      if (value) onSecret({ title: said(answer), value, what: secret.what });
      else setMessage(said(answer));
      onChanged();
    } catch (e) {
      setMessage(`Failed: ${e.message}`);
    }
  };
  return { message, act };
}

/**
 * A secret the admin API shows once (an API key, a signing secret), with a copy button: `shown` is
 * {title, value, what}; once dismissed it is nowhere in the page.
 */
export function ShownOnce({ shown, onDismiss }) {
  const [copied, setCopied] = useState(null);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(shown.value);
      setCopied('Copied');
    } catch {
      setCopied('The browser refused: select the key and copy it');
    }
  };
  return html`
    <div class="callout" role="region" aria-label=${`New ${shown.what ?? 'API key'}`}>
      <p>${shown.title} The ${shown.what ?? 'API key'}, shown this once:</p>
      <p><code class="secret" data-secret>${shown.value}</code></p>
      <button type="button" onClick=${copy}>Copy</button>
      <span role="status">${copied ?? ''}</span>
      <button type="button" class="secondary" onClick=${onDismiss}>Done</button>
    </div>`;
}
