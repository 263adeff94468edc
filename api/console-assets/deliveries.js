// Webhook deliveries: a subscription's, filtered by status, and one delivery on a view of its own
// (#delivery/<id>), each with every attempt, when its next attempt is due or which delivery it waits
// behind in its queue, links to its subscription and its cart's audit, and a redeliver button to a
// role that may (GET /admin/v1/webhooks/{id}/deliveries, …/deliveries/{delivery_id}; docs/webhooks.md,
// "Operators" and "Order, isolation, durability").
import { useState } from 'preact/hooks';
import {
  admin,
  announceChange,
  can,
  cartHref,
  deliveryHref,
  html,
  person,
  time,
  useAdminRead,
  webhookHref,
} from './admin.js';

const POLL_MS = 10_000;
const STATUSES = ['all', 'pending', 'in_flight', 'failed', 'delivered', 'parked'];
/** Deliveries the admin API lets an operator send again (not while pending or in flight). */
const REDELIVERABLE = new Set(['failed', 'parked', 'delivered']);

function Attempts({ attempts }) {
  if (attempts.length === 0) return html`<p class="muted">No attempt yet.</p>`;
  return html`
    <div class="table-scroll">
      <table class="attempts">
        <thead><tr><th scope="col">Attempt</th><th scope="col">Started</th><th scope="col">Outcome</th>
          <th scope="col">Status</th><th scope="col">Duration</th><th scope="col">Response or error</th></tr></thead>
        <tbody>
          ${attempts.map(
            (a) => html`
              <tr key=${a.attempt}>
                <th scope="row">${a.attempt}</th>
                <td data-label="Started">${time(a.started_at)}</td>
                <td data-label="Outcome">${a.outcome ?? 'in flight'}</td>
                <td class="num" data-label="Status">${a.status ?? '—'}</td>
                <td class="num" data-label="Duration">${a.duration_ms === null ? '—' : `${a.duration_ms} ms`}</td>
                <td data-label="Response or error">
                  ${a.error && html`<div class="error">${a.error}</div>`}
                  ${a.response_excerpt && html`<code>${a.response_excerpt}</code>`}
                </td>
              </tr>`,
          )}
        </tbody>
      </table>
    </div>`;
}

/**
 * When the next attempt is due; for a delivery behind another in its queue, that one (it leaves only
 * after it), as text or with a link to it.
 */
export function NextAttempt({ delivery: d, linked }) {
  const b = d.waiting_behind;
  if (b) {
    const id = linked
      ? html`<a href=${deliveryHref(b.delivery_id)}><code>${b.delivery_id}</code></a>`
      : b.delivery_id;
    return html`<span class="waiting" data-waiting-behind=${b.delivery_id}>waits behind ${id} (${b.status}${
      b.next_attempt_at ? html`, next attempt ${time(b.next_attempt_at)}` : ''
    })</span>`;
  }
  return d.next_attempt_at ? html`next attempt ${time(d.next_attempt_at)}` : '';
}

/** What a delivery is and where its related objects are: itself, its subscription, its cart's audit. */
function Facts({ delivery: d }) {
  return html`
    <dl class="facts">
      <div><dt>Delivery</dt><dd><a href=${deliveryHref(d.delivery_id)}><code>${d.delivery_id}</code></a></dd></div>
      <div><dt>Subscription</dt><dd><a href=${webhookHref(d.webhook_id)}><code>${d.webhook_id}</code></a></dd></div>
      <div><dt>Cart</dt><dd><a href=${cartHref(d.cart_uuid)} title="The cart's audit"><code>${d.cart_uuid}</code></a></dd></div>
      <div><dt>Next attempt</dt><dd>${
        d.waiting_behind
          ? html`<${NextAttempt} delivery=${d} linked=${true} />`
          : d.next_attempt_at
            ? time(d.next_attempt_at)
            : 'none'
      }</dd></div>
    </dl>`;
}

function Detail({ delivery: d, onRedeliver }) {
  return html`
    <${Facts} delivery=${d} />
    ${d.parked_reason && html`<p>Parked: ${d.parked_reason}</p>`}
    <${Attempts} attempts=${d.attempts} />
    ${
      d.redeliveries.length > 0 &&
      html`<ul class="redeliveries" aria-label="Sent again">
        ${d.redeliveries.map(
          (r, i) => html`<li key=${i}>${r.reason} ${time(r.requested_at)} by ${person(r.requested_by)}</li>`,
        )}
      </ul>`
    }
    ${
      onRedeliver &&
      REDELIVERABLE.has(d.status) &&
      html`<button type="button" onClick=${() => onRedeliver(d)}>Redeliver</button>`
    }`;
}

function Delivery({ delivery, onRedeliver }) {
  const d = delivery;
  const next = d.waiting_behind || d.next_attempt_at ? html` · <${NextAttempt} delivery=${d} />` : '';
  return html`
    <li data-delivery=${d.delivery_id}>
      <details>
        <summary>
          <span class=${`state state-${d.status}`}>${d.status}</span> ${d.event_kind} · cart <code>${d.cart_uuid}</code>
          · ${d.attempt_count} attempt${d.attempt_count === 1 ? '' : 's'} · scheduled ${time(d.scheduled_at)}${next}
        </summary>
        <${Detail} delivery=${d} onRedeliver=${onRedeliver} />
      </details>
    </li>`;
}

/** Sends a delivery again; `said` tells what came of it. */
async function redeliverOne(session, d, said) {
  try {
    await admin(session, 'POST', `/webhooks/deliveries/${d.delivery_id}/redeliver`);
    said(`Delivery ${d.delivery_id} was queued again; the dispatcher sends it with the same webhook id.`);
    announceChange();
  } catch (e) {
    said(`Could not redeliver ${d.delivery_id}: ${e.message}`);
  }
}

/** A subscription's deliveries, newest first, filtered by status; read again every 10 s. */
export function Deliveries({ session, webhook, onUnauthorized }) {
  const [status, setStatus] = useState('all');
  const query = status === 'all' ? '' : `?status=${status}`;
  const read = useAdminRead(
    session,
    `/webhooks/${webhook.webhook_id}/deliveries${query}`,
    'deliveries',
    onUnauthorized,
    POLL_MS,
  );
  const deliveries = read.value;
  const [message, setMessage] = useState(null);
  const redeliver = can(session, 'deliveries.redeliver')
    ? (d) => redeliverOne(session, d, setMessage)
    : undefined;
  return html`
    <section aria-labelledby="deliveries-title">
      <h3 id="deliveries-title">Deliveries to <code>${webhook.url}</code></h3>
      <div class="inline">
        <label for="delivery-status">Status</label>
        <select id="delivery-status" value=${status} onChange=${(e) => setStatus(e.currentTarget.value)}>
          ${STATUSES.map((s) => html`<option key=${s} value=${s}>${s}</option>`)}
        </select>
        <button type="button" class="secondary" onClick=${read.refresh}>Refresh</button>
      </div>
      <p class="status" role="status">${message ?? ''}</p>
      ${
        deliveries === null
          ? html`<p>Loading…</p>`
          : deliveries.length === 0
            ? html`<p class="muted">No deliveries${status === 'all' ? '' : ` ${status}`}.</p>`
            : html`<ul class="deliveries">${deliveries.map((d) => html`<${Delivery} key=${d.delivery_id} delivery=${d} onRedeliver=${redeliver} />`)}</ul>`
      }
    </section>`;
}

/** One delivery (#delivery/<id>), read again every 10 s. */
export function DeliveryView({ session, param, onUnauthorized }) {
  const read = useAdminRead(
    session,
    `/webhooks/deliveries/${encodeURIComponent(param ?? '')}`,
    'delivery',
    onUnauthorized,
    POLL_MS,
  );
  const [message, setMessage] = useState(null);
  const d = read.value;
  const redeliver = can(session, 'deliveries.redeliver')
    ? (x) => redeliverOne(session, x, setMessage)
    : undefined;
  return html`
    <section aria-labelledby="view-title" data-delivery-view=${param}>
      <h2 id="view-title">Delivery</h2>
      ${read.error && html`<p class="error" role="alert">Could not read delivery ${param}: ${read.error}</p>`}
      <p class="status" role="status">${message ?? ''}</p>
      ${
        d
          ? html`<p><span class=${`state state-${d.status}`}>${d.status}</span> ${d.event_kind} · ${d.attempt_count} attempt${
              d.attempt_count === 1 ? '' : 's'
            } · scheduled ${time(d.scheduled_at)}${d.delivered_at ? html` · delivered ${time(d.delivered_at)}` : ''}</p>
            <${Detail} delivery=${d} onRedeliver=${redeliver} />`
          : !read.error && html`<p>Loading…</p>`
      }
    </section>`;
}
