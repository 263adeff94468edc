// Finding carts without their uuid (GET /admin/v1/carts; docs/operations.md, "Auditing carts"): by
// store, status, creation time and source partner, and, for an operator or an admin, by the
// customer's email or phone number. Each cart links to its audit (#cart-audit/<uuid>); the list shows
// no customer. A search by email or phone is on record as a view of each cart it lists.
import { useState } from 'preact/hooks';
import { admin, can, cartHref, html, time } from './admin.js';

// The statuses of a cart (domain/cart/vocabulary.ts, `cartStatuses`).
const STATUSES = [
  'pending',
  'verification',
  'staff_member_review',
  'preparing',
  'ready_for_pickup',
  'delivery_started',
  'delivery_finished',
  'finished',
  'with_review',
  'cancelled',
  'dismissed',
];
const PAGE = 50;

/** The form's values as the search's query: blanks left out, local times as UTC. */
function queryOf(form) {
  const query = new URLSearchParams({ limit: String(PAGE) });
  const set = (name, value) => {
    if (value.trim() !== '') query.set(name, value.trim());
  };
  set('store_id', form.store_id);
  set('status', form.status);
  set('partner_id', form.partner_id);
  for (const name of ['created_after', 'created_before']) {
    if (form[name] !== '') query.set(name, new Date(form[name]).toISOString());
  }
  set('customer_email', form.customer_email);
  set('customer_phone', form.customer_phone);
  return query;
}

const EMPTY = {
  store_id: '',
  status: '',
  partner_id: '',
  created_after: '',
  created_before: '',
  customer_email: '',
  customer_phone: '',
};

function Results({ carts }) {
  if (carts.length === 0) return html`<p role="status">No carts found.</p>`;
  return html`
    <div class="table-scroll">
      <table aria-label="Carts found, newest first">
        <thead><tr><th scope="col">Cart</th><th scope="col">Store</th><th scope="col">Status</th>
          <th scope="col">Created</th><th scope="col">Updated</th><th scope="col">Partner</th>
          <th scope="col" class="num">Items</th></tr></thead>
        <tbody>
          ${carts.map(
            (c) => html`
              <tr key=${c.cart_uuid} data-cart=${c.cart_uuid}>
                <th scope="row"><a href=${cartHref(c.cart_uuid)}><code>${c.cart_uuid}</code></a></th>
                <td>${c.store_id} ${c.store_name}</td>
                <td><span class=${`state state-${c.status}`}>${c.status}</span>${c.abandoned ? ' (abandoned)' : ''}</td>
                <td>${time(c.created_at)}</td>
                <td>${time(c.updated_at)}</td>
                <td>${c.partner_id ? html`<code>${c.partner_id}</code>` : '—'}</td>
                <td class="num">${c.items}</td>
              </tr>`,
          )}
        </tbody>
      </table>
    </div>`;
}

export function CartSearch({ session, onUnauthorized }) {
  const [form, setForm] = useState(EMPTY);
  const [found, setFound] = useState(null);
  const [error, setError] = useState(null);
  const personal = can(session, 'carts.search_customer');
  const field = (name) => ({
    id: `search-${name}`,
    name,
    value: form[name],
    onInput: (e) => setForm({ ...form, [name]: e.currentTarget.value }),
  });
  const read = async (query, before) => {
    setError(null);
    try {
      const page = await admin(session, 'GET', `/carts?${query}`);
      setFound({ carts: [...before, ...page.carts], next: page.next_cursor, query });
    } catch (e) {
      if (e.status === 401) onUnauthorized();
      else setError(e.message);
    }
  };
  const search = (event) => {
    event.preventDefault();
    read(queryOf(form), []);
  };
  const more = () => {
    const query = new URLSearchParams(found.query);
    query.set('cursor', found.next);
    read(query, found.carts);
  };
  return html`
    <section aria-labelledby="search-title">
      <h3 id="search-title">Find carts</h3>
      <form class="grid" aria-labelledby="search-title" onSubmit=${search}>
        <label for="search-store_id">Store id</label>
        <input inputmode="numeric" ...${field('store_id')} />
        <label for="search-status">Status</label>
        <select ...${field('status')}>
          <option value="">any</option>
          ${STATUSES.map((s) => html`<option key=${s} value=${s}>${s}</option>`)}
        </select>
        <label for="search-created_after">Created after (your local time)</label>
        <input type="datetime-local" ...${field('created_after')} />
        <label for="search-created_before">Created before (your local time)</label>
        <input type="datetime-local" ...${field('created_before')} />
        <label for="search-partner_id">Source partner id</label>
        <input ...${field('partner_id')} />
        ${
          personal &&
          html`
            <label for="search-customer_email">Customer email</label>
            <input type="email" autocomplete="off" ...${field('customer_email')} />
            <label for="search-customer_phone">Customer phone</label>
            <input type="tel" autocomplete="off" ...${field('customer_phone')} />
            <p class="hint">A search by email or phone is recorded as a read of each cart it lists.</p>`
        }
        <button type="submit">Find carts</button>
      </form>
      ${error && html`<p class="error" role="alert">${error}</p>`}
      ${found && html`<${Results} carts=${found.carts} />`}
      ${found?.next && html`<button type="button" class="secondary" onClick=${more}>More carts</button>`}
    </section>`;
}
