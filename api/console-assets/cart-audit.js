// The cart audit view: a cart's whole event history as a timeline, and the path of its statuses
// (GET /admin/v1/carts/{uuid}/history).
import { useState } from 'preact/hooks';
import { admin, html, time } from './admin.js';

/** The statuses a cart went through, from its moves (`CartStatusChanged` from → to). */
function statusPath(events) {
  const moves = events.filter((e) => e.type === 'CartStatusChanged');
  if (moves.length === 0) return [];
  return [moves[0].data.from, ...moves.map((e) => e.data.to)];
}

function Timeline({ history }) {
  const path = statusPath(history.events);
  return html`
    <h3>Cart <code>${history.cart_uuid}</code></h3>
    ${
      path.length > 0
        ? html`<ol class="status-path" aria-label="Status path">${path.map((s, i) => html`<li key=${i}>${s}</li>`)}</ol>`
        : html`<p class="muted">No status moves yet.</p>`
    }
    <ol class="timeline" aria-label="Events, oldest first">
      ${history.events.map(
        (e) => html`
          <li key=${e.event_id} data-revision=${e.revision}>
            <p class="event-head"><strong>${e.type}</strong>
              <span class="muted"> revision ${e.revision} · position ${e.position} · ${time(e.occurred_at)}</span></p>
            <p class="muted">by ${e.actor.type} ${e.actor.id} · correlation <code>${e.correlation_id}</code></p>
            <details><summary>Data</summary><pre>${JSON.stringify(e.data, null, 2)}</pre></details>
          </li>`,
      )}
    </ol>`;
}

export function CartAudit({ token, onUnauthorized }) {
  const [uuid, setUuid] = useState('');
  const [history, setHistory] = useState(null);
  const [error, setError] = useState(null);
  const find = async (event) => {
    event.preventDefault();
    setError(null);
    setHistory(null);
    try {
      setHistory(await admin(token, 'GET', `/carts/${encodeURIComponent(uuid.trim())}/history`));
    } catch (e) {
      if (e.status === 401) onUnauthorized();
      else setError(e.message);
    }
  };
  return html`
    <section aria-labelledby="view-title">
      <h2 id="view-title">Cart audit</h2>
      <form class="inline" onSubmit=${find}>
        <label for="cart-uuid">Cart uuid</label>
        <input id="cart-uuid" required value=${uuid} onInput=${(e) => setUuid(e.currentTarget.value)} />
        <button type="submit">Show history</button>
      </form>
      ${error && html`<p class="error" role="alert">${error}</p>`}
      ${history && html`<${Timeline} history=${history} />`}
    </section>`;
}
