// What the console's views share: htm bound to Preact, the one way they call the admin API (in the
// session), what each role may do there, and the hook that reads from it.

import htm from 'htm';
import { h } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';

export const html = htm.bind(h);

/** Methods that change nothing: the only ones a session call may make without its CSRF token. */
const SAFE_METHODS = new Set(['GET', 'HEAD']);

/** The answer's JSON; a refusal throws with the problem's detail and status. */
async function answerOf(res) {
  const text = await res.text();
  const parsed = text ? JSON.parse(text) : null;
  if (!res.ok) {
    const error = new Error(parsed?.detail ?? `${res.status} ${res.statusText}`);
    error.status = res.status;
    throw error;
  }
  return parsed;
}

/** The calls under way: sign-out waits for them, so none arrives after the session has ended. */
const underWay = new Set();

/** Told when a call finds the session ended (401): the console shows the sign-in form again. */
let onSessionEnded = () => {};
export function whenSessionEnds(handler) {
  onSessionEnded = handler;
}

/**
 * A call to `/admin/v1` in the session: the browser sends the session cookie (HttpOnly, so this page
 * never sees it), and a write carries the session's CSRF token. A refusal throws with the problem's
 * detail and status (401: the session has ended).
 */
export async function admin(session, method, path, body) {
  const headers = {};
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (!SAFE_METHODS.has(method)) headers['x-csrf-token'] = session.csrf_token;
  const call = fetch(`/admin/v1${path}`, {
    method,
    headers,
    credentials: 'same-origin',
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  underWay.add(call);
  const res = await call.finally(() => underWay.delete(call));
  if (res.status === 401) onSessionEnded();
  return answerOf(res);
}

/** Signs in: the token goes out this once, and the session comes back as a cookie. */
export async function signIn(token) {
  const res = await fetch('/admin/v1/session', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    credentials: 'same-origin',
    body: JSON.stringify({ token }),
  });
  return answerOf(res);
}

/** The session this browser has (after a reload), or null. */
export async function currentSession() {
  const session = await answerOf(await fetch('/admin/v1/session', { credentials: 'same-origin' }));
  return session?.operator ? session : null;
}

/** Ends the session on the server, once the calls under way are answered; the cookie is cleared with it. */
export async function signOut(session) {
  await Promise.allSettled([...underWay]);
  await admin(session, 'DELETE', '/session');
}

/**
 * What each role may do in the console (docs/operations.md, "The console"): an auditor reads; an
 * operator and an admin also change partners and their keys, webhooks, deliveries and projections
 * (accounts are managed through `pds operators`). The admin API refuses the same writes whatever the
 * page shows.
 */
const OPERATOR_ACTIONS = [
  'partners.write',
  'webhooks.write',
  'deliveries.redeliver',
  'projections.rebuild',
  // A search of carts by the customer's email or phone (docs/operations.md, "Auditing carts").
  'carts.search_customer',
];
const ROLE_ACTIONS = {
  admin: new Set(OPERATOR_ACTIONS),
  operator: new Set(OPERATOR_ACTIONS),
  auditor: new Set(),
};

/** Whether the session's person may take `action` (one of the actions above). */
export const can = (session, action) => ROLE_ACTIONS[session?.operator?.role]?.has(action) ?? false;

export const number = (n) => n.toLocaleString('en-US');

/** "1, 2 3" → [1, 2, 3]: ids as an operator types them. */
export const idList = (text) =>
  text
    .split(/[\s,]+/)
    .filter(Boolean)
    .map(Number);

/** Who did something, as the admin API names them: the person's name (with the id on hover), else type and id. */
export const person = (actor) =>
  !actor
    ? 'someone not recorded'
    : actor.name
      ? html`<span title=${`${actor.type} ${actor.id}`}>${actor.name}</span>`
      : `${actor.type} ${actor.id}`;

/** Where the console shows a delivery, a subscription, a cart's audit (the URL's fragment). */
export const deliveryHref = (id) => `#delivery/${encodeURIComponent(id)}`;
export const webhookHref = (id) => `#webhooks/${encodeURIComponent(id)}`;
export const cartHref = (uuid) => `#cart-audit/${encodeURIComponent(uuid)}`;

/**
 * A mark the admin API judged (docs/operations.md, "Health"): FAILING or LAGGING, with its reasons in
 * words beside it; nothing while all is well.
 */
export function Trouble({ judged, mark }) {
  if (!judged || judged.status === 'ok' || !judged.trouble) return '';
  return html`
    <div class="trouble" data-trouble=${judged.status}>
      <span class=${`mark mark-${judged.status}`}>${mark}</span>
      <ul class="reasons">${judged.trouble.map((x) => html`<li key=${x.reason}>${x.detail}</li>`)}</ul>
    </div>`;
}

/**
 * Said when the admin API judged only the first subscriptions (`truncated`; docs/operations.md,
 * "Health"): the others have no mark.
 */
export function Truncated({ judged }) {
  if (!judged?.truncated) return '';
  return html`<p class="muted" data-truncated>Health: showing the first ${number(judged.subscriptions.length)} subscriptions
    (in id order); the others are not judged.</p>`;
}

/**
 * The one time zone every view shows times in, the browser's (the zone a `datetime-local` field is
 * read in), named the same way (`timesIn`) at the top of every view and on every form field that
 * takes a time, and on the charts' time axes (docs/operations.md, "The console").
 */
export const ZONE = Intl.DateTimeFormat().resolvedOptions().timeZone;

/** The zone as the page names it: its name, and its offset from UTC now unless it is UTC. */
export function zoneName() {
  if (ZONE === 'UTC' || ZONE === 'Etc/UTC') return 'UTC';
  const offset = new Intl.DateTimeFormat('en-US', { timeZone: ZONE, timeZoneName: 'longOffset' })
    .formatToParts(new Date())
    .find((part) => part.type === 'timeZoneName')?.value;
  return offset ? `${ZONE} (${offset.replace('GMT', 'UTC')})` : ZONE;
}

/** How the page names its zone, in the header and beside every field that takes a time. */
export const timesIn = () => `Times in ${zoneName()}`;

/** An ISO time in the page's zone, with the date, time and zone in full on hover. */
export const time = (iso) =>
  iso
    ? html`<time datetime=${iso} title=${new Date(iso).toLocaleString(undefined, { timeZone: ZONE, dateStyle: 'full', timeStyle: 'long' })}>${new Date(iso).toLocaleString(undefined, { timeZone: ZONE })}</time>`
    : '—';

/**
 * Said after every write (redeliver, recover, rebuild, …) and when a rebuild ends: every read on the
 * page follows at once, so no panel shows what the action changed for up to a poll's interval.
 */
const changes = new EventTarget();
export const announceChange = () => changes.dispatchEvent(new Event('change'));

/**
 * Reads `field` of `GET /admin/v1${path}` (the whole answer when `field` is null) when the view shows, on `refresh()`, after every change
 * announced (`announceChange`), and every `everyMs` if given. An ended session signs out
 * (`onUnauthorized`); another failure is kept in `error`. Only the answer to the newest read started
 * is shown: an older one that lands after it (a poll already on its way when an action ended, the
 * previous path's answer after a filter or window changed) is dropped. `readAt` is when the read
 * shown was started (`Date.now()`).
 */
export function useAdminRead(session, path, field, onUnauthorized, everyMs) {
  const [value, setValue] = useState(null);
  const [error, setError] = useState(null);
  const [readAt, setReadAt] = useState(null);
  const started = useRef(0);
  const open = useRef(0);
  const refresh = useCallback(async () => {
    started.current += 1;
    const read = started.current;
    const at = Date.now();
    open.current += 1;
    try {
      const answer = await admin(session, 'GET', path);
      if (read !== started.current) return;
      setValue(field === null ? answer : answer[field]);
      setReadAt(at);
      setError(null);
    } catch (e) {
      if (e.status === 401) onUnauthorized();
      else if (read === started.current) setError(e.message);
    } finally {
      open.current -= 1;
    }
  }, [session, path, field, onUnauthorized]);
  useEffect(() => {
    refresh();
    changes.addEventListener('change', refresh);
    // A poll waits while a read is on its way: a read slower than the interval would otherwise be
    // overtaken by the next poll's, and its answer dropped, every time (a panel never filled).
    const poll = () => open.current === 0 && refresh();
    const timer = everyMs ? setInterval(poll, everyMs) : undefined;
    return () => {
      changes.removeEventListener('change', refresh);
      clearInterval(timer);
    };
  }, [refresh, everyMs]);
  return { value, error, refresh, readAt };
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
      announceChange();
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
