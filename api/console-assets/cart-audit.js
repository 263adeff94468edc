// The cart audit view: a cart's whole event history as a timeline, each event with what it changed,
// who caused it and the webhooks it produced, the path of its statuses, and who has read this
// history (GET /admin/v1/carts/{uuid}/history, /webhooks and /views; docs/write-side.md,
// "Auditors"). Each webhook links to its delivery and its subscription; a link to a cart
// (#cart-audit/<uuid>) opens its history at once. Reading the history here is recorded, as every read
// of it is.
import { useEffect, useState } from 'preact/hooks';
import { admin, deliveryHref, html, person, time, webhookHref } from './admin.js';
import { CartSearch } from './cart-search.js';
import { NextAttempt } from './deliveries.js';

/** The statuses a cart went through, from its moves (`CartStatusChanged` from → to). */
function statusPath(events) {
  const moves = events.filter((e) => e.type === 'CartStatusChanged');
  if (moves.length === 0) return [];
  return [moves[0].data.from, ...moves.map((e) => e.data.to)];
}

/** A value as the audit shows it: nothing as ∅, text as it is (empty as ""), the rest as JSON. */
const shown = (value) =>
  value === null ? '∅' : value === '' ? '""' : typeof value === 'string' ? value : JSON.stringify(value);

function Changes({ changes }) {
  if (changes.length === 0) return html`<p class="muted">Changed nothing the cart shows.</p>`;
  return html`
    <ul class="changes" aria-label="What changed">
      ${changes.map(
        (c) =>
          html`<li key=${c.field}><code>${c.field}</code>: ${shown(c.before)} → <strong>${shown(c.after)}</strong></li>`,
      )}
    </ul>`;
}

function Webhooks({ deliveries }) {
  if (deliveries.length === 0) return '';
  return html`
    <ul class="event-webhooks" aria-label="Webhooks it produced">
      ${deliveries.map(
        (d) => html`
          <li key=${d.delivery_id} data-event-delivery=${d.delivery_id}>
            <a href=${deliveryHref(d.delivery_id)}>${d.event_kind}</a>${' to subscription '}<a
              href=${webhookHref(d.webhook_id)}><code>${d.webhook_id}</code></a>${': '}
            <span class=${`state state-${d.status}`}>${d.status}</span>
            ${` after ${d.attempt_count} attempt${d.attempt_count === 1 ? '' : 's'}`}${
              d.delivered_at ? html`, delivered ${time(d.delivered_at)}` : ''
            }${d.parked_reason ? ` (${d.parked_reason})` : ''}${
              d.waiting_behind || d.next_attempt_at
                ? html`; <${NextAttempt} delivery=${d} linked=${true} />`
                : ''
            }
          </li>`,
      )}
    </ul>`;
}

function Views({ views }) {
  return html`
    <section aria-labelledby="views-title">
      <h3 id="views-title">Who read this history</h3>
      <ol class="views" aria-label="Reads, newest first">
        ${views.map((v) => html`<li key=${v.position}>${time(v.viewed_at)} ${person(v.by)}</li>`)}
      </ol>
    </section>`;
}

/**
 * Said when the cart has events from before the deliveries kept: theirs may have been pruned
 * (PDS_DELIVERY_LOG_RETENTION; docs/operations.md, "Retention").
 */
function PrunedNote({ history, prunedBefore }) {
  const first = history.events[0]?.occurred_at;
  if (!prunedBefore || !first || Date.parse(first) >= Date.parse(prunedBefore)) return '';
  return html`<p class="muted" data-pruned-before=${prunedBefore}>
    ${'Webhook deliveries finished before '}${time(prunedBefore)}${' are pruned: those of earlier events may not be shown.'}
  </p>`;
}

function Timeline({ history, deliveries, prunedBefore }) {
  const path = statusPath(history.events);
  const bySource = Map.groupBy(deliveries, (d) => d.source_event_id);
  return html`
    <h3>Cart <code>${history.cart_uuid}</code></h3>
    ${
      path.length > 0
        ? html`<ol class="status-path" aria-label="Status path">${path.map((s, i) => html`<li key=${i}>${s}</li>`)}</ol>`
        : html`<p class="muted">No status moves yet.</p>`
    }
    <${PrunedNote} history=${history} prunedBefore=${prunedBefore} />
    <ol class="timeline" aria-label="Events, oldest first">
      ${history.events.map(
        (e) => html`
          <li key=${e.event_id} data-revision=${e.revision}>
            <p class="event-head"><strong>${e.type}</strong>
              <span class="muted"> revision ${e.revision} · position ${e.position} · ${time(e.occurred_at)}</span></p>
            <p class="muted">by ${person(e.actor)} · correlation <code>${e.correlation_id}</code></p>
            <${Changes} changes=${e.changes} />
            <${Webhooks} deliveries=${bySource.get(e.event_id) ?? []} />
            <details><summary>Data</summary><pre>${JSON.stringify(e.data, null, 2)}</pre></details>
          </li>`,
      )}
    </ol>`;
}

/** Every delivery of the cart, following the pages, and before when finished ones are pruned. */
async function cartDeliveries(session, uuid) {
  const all = [];
  let cursor = null;
  let prunedBefore = null;
  do {
    const query = new URLSearchParams({ limit: '500', ...(cursor ? { cursor } : {}) });
    const page = await admin(session, 'GET', `/carts/${encodeURIComponent(uuid)}/webhooks?${query}`);
    all.push(...page.deliveries);
    prunedBefore ??= page.pruned_before ?? null;
    cursor = page.next_cursor;
  } while (cursor);
  return { deliveries: all, prunedBefore };
}

export function CartAudit({ session, param, fragment, onUnauthorized }) {
  const [uuid, setUuid] = useState(param ?? '');
  const [found, setFound] = useState(null);
  const [error, setError] = useState(null);
  const show = async (id) => {
    setError(null);
    setFound(null);
    try {
      const [history, { deliveries, prunedBefore }] = await Promise.all([
        admin(session, 'GET', `/carts/${encodeURIComponent(id)}/history`),
        cartDeliveries(session, id),
      ]);
      // After the history: this read is among them.
      const { views } = await admin(session, 'GET', `/carts/${encodeURIComponent(id)}/views?limit=50`);
      setFound({ history, deliveries, prunedBefore, views });
    } catch (e) {
      if (e.status === 401) onUnauthorized();
      else setError(e.message);
    }
  };
  const find = (event) => {
    event.preventDefault();
    show(uuid.trim());
  };
  // A link named the cart: its history at once.
  useEffect(() => {
    if (param) show(param);
  }, []);
  return html`
    <section aria-labelledby="view-title">
      <h2 id="view-title">Cart audit</h2>
      <form class="inline" onSubmit=${find}>
        <label for="cart-uuid">Cart uuid</label>
        <input id="cart-uuid" required value=${uuid} onInput=${(e) => setUuid(e.currentTarget.value)} />
        <button type="submit">Show history</button>
      </form>
      ${error && html`<p class="error" role="alert">${error}</p>`}
      ${
        found &&
        html`<${Timeline} history=${found.history} deliveries=${found.deliveries} prunedBefore=${found.prunedBefore} />`
      }
      ${found && html`<${Views} views=${found.views} />`}
      ${!param && html`<${CartSearch} session=${session} fragment=${fragment} onUnauthorized=${onUnauthorized} />`}
    </section>`;
}
