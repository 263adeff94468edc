// What the console's views share: htm bound to Preact, and the one way they call the admin API.

import htm from 'htm';
import { h } from 'preact';

export const html = htm.bind(h);

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

/** An ISO time as the operator's browser shows local times, with the ISO form on hover. */
export const time = (iso) =>
  iso ? html`<time datetime=${iso} title=${iso}>${new Date(iso).toLocaleString()}</time>` : '—';
