// The webhooks view: the subscriptions, a subscription's deliveries filtered by status, each with
// every attempt, and a redeliver button (GET /admin/v1/webhooks, …/{id}/deliveries,
// POST …/deliveries/{delivery_id}/redeliver).
import { useState } from 'preact/hooks';
import { admin, html, time, useAdminRead } from './admin.js';

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
                <td>${time(a.started_at)}</td>
                <td>${a.outcome ?? 'in flight'}</td>
                <td class="num">${a.status ?? '—'}</td>
                <td class="num">${a.duration_ms === null ? '—' : `${a.duration_ms} ms`}</td>
                <td>
                  ${a.error && html`<div class="error">${a.error}</div>`}
                  ${a.response_excerpt && html`<code>${a.response_excerpt}</code>`}
                </td>
              </tr>`,
          )}
        </tbody>
      </table>
    </div>`;
}

function Delivery({ delivery, onRedeliver }) {
  const d = delivery;
  return html`
    <li data-delivery=${d.delivery_id}>
      <details>
        <summary>
          <span class=${`state state-${d.status}`}>${d.status}</span> ${d.event_kind} · cart <code>${d.cart_uuid}</code>
          · ${d.attempt_count} attempt${d.attempt_count === 1 ? '' : 's'} · scheduled ${time(d.scheduled_at)}
        </summary>
        ${d.parked_reason && html`<p>Parked: ${d.parked_reason}</p>`}
        <${Attempts} attempts=${d.attempts} />
        ${
          REDELIVERABLE.has(d.status) &&
          html`<button type="button" onClick=${() => onRedeliver(d)}>Redeliver</button>`
        }
      </details>
    </li>`;
}

function Deliveries({ token, webhook, onUnauthorized }) {
  const [status, setStatus] = useState('all');
  const query = status === 'all' ? '' : `?status=${status}`;
  const read = useAdminRead(
    token,
    `/webhooks/${webhook.webhook_id}/deliveries${query}`,
    'deliveries',
    onUnauthorized,
  );
  const deliveries = read.value;
  const [message, setMessage] = useState(null);
  const redeliver = async (d) => {
    try {
      await admin(token, 'POST', `/webhooks/deliveries/${d.delivery_id}/redeliver`);
      setMessage(
        `Delivery ${d.delivery_id} is pending again; the dispatcher sends it with the same webhook id.`,
      );
      await read.refresh();
    } catch (e) {
      setMessage(`Could not redeliver ${d.delivery_id}: ${e.message}`);
    }
  };
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

export function Webhooks({ token, onUnauthorized }) {
  const read = useAdminRead(token, '/webhooks?limit=100', 'webhooks', onUnauthorized);
  const webhooks = read.value;
  const [chosen, setChosen] = useState(null);
  return html`
    <section aria-labelledby="view-title">
      <h2 id="view-title">Webhooks</h2>
      ${read.error && html`<p class="error" role="alert">Could not read the subscriptions: ${read.error}</p>`}
      ${
        webhooks === null
          ? html`<p>Loading…</p>`
          : webhooks.length === 0
            ? html`<p class="muted">No webhook subscriptions.</p>`
            : html`
            <div class="table-scroll">
              <table>
                <thead><tr><th scope="col">URL</th><th scope="col">Events</th><th scope="col">Stores</th>
                  <th scope="col">State</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
                <tbody>
                  ${webhooks.map(
                    (w) => html`
                      <tr key=${w.webhook_id}>
                        <th scope="row"><code>${w.url}</code></th>
                        <td>${w.events.join(', ')}</td>
                        <td>${w.store_ids.join(', ')}</td>
                        <td>${w.enabled ? 'enabled' : `disabled (${w.disabled_reason})`}</td>
                        <td><button type="button" class="secondary" onClick=${() => setChosen(w)}
                          aria-label=${`Deliveries to ${w.url}`}>Deliveries</button></td>
                      </tr>`,
                  )}
                </tbody>
              </table>
            </div>`
      }
      ${chosen && html`<${Deliveries} key=${chosen.webhook_id} token=${token} webhook=${chosen} onUnauthorized=${onUnauthorized} />`}
    </section>`;
}
