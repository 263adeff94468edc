// Finding carts without their uuid (GET /admin/v1/carts; docs/operations.md, "Auditing carts"): by
// store, status, creation time and source partner, and, for an operator or an admin, by the
// customer's email or phone number. Newest first. Each cart links to its audit (#cart-audit/<uuid>);
// the list shows no customer. A search by email or phone is on record as a view of each cart it lists.
// The search is kept in the fragment (#cart-audit?store_id=…), so Back from a cart's audit shows it
// again; the customer's email and phone are kept out of it (and the browser's history), in this
// page's memory only, with the carts already shown.
import { useEffect, useState } from 'preact/hooks';
import { admin, can, cartHref, html, time, zoneName } from './admin.js';

const PAGE = 50;
/** Filters the fragment keeps: what a search by store, status, time and partner needs. */
const KEPT = ['store_id', 'status', 'created_after', 'created_before', 'partner_id'];

/**
 * The statuses a search offers: the `status` parameter of `GET /carts` in the admin API's OpenAPI
 * document, generated from the domain's list (`cartStatuses`), read once a page.
 */
let statuses;
const cartStatuses = (session) => {
  statuses ??= admin(session, 'GET', '/openapi.json').then(
    (doc) => doc.paths['/carts'].get.parameters.find((p) => p.name === 'status').schema.enum,
    (e) => {
      statuses = undefined; // read again next time
      throw e;
    },
  );
  return statuses;
};

/** The form's values as the search's query: blanks left out, local times as UTC. */
function queryOf(form) {
  const query = new URLSearchParams();
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

/** What the fragment says of a search: the query without the customer's email or phone. */
function fragmentOf(query) {
  const kept = new URLSearchParams();
  for (const name of KEPT) if (query.has(name)) kept.set(name, query.get(name));
  return kept.toString();
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

const pad = (n) => String(n).padStart(2, '0');
/** An ISO time as a `datetime-local` value: in the browser's zone, the zone the field is read in. */
function localValue(iso) {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '';
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

/** The form a fragment's search fills in. */
function formOf(fragment) {
  const query = new URLSearchParams(fragment);
  const form = { ...EMPTY };
  for (const name of KEPT) {
    const value = query.get(name) ?? '';
    form[name] = name.startsWith('created_') && value !== '' ? localValue(value) : value;
  }
  return form;
}

/**
 * The last search of this page: its fragment, the form (with the customer's fields) and the carts
 * shown, so Back restores what was on screen without asking again (a search by the customer would be
 * on record again).
 */
let last = null;

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
                <td data-label="Store">${c.store_id} ${c.store_name}</td>
                <td data-label="Status"><span class=${`state state-${c.status}`}>${c.status}</span>${c.abandoned ? ' (abandoned)' : ''}</td>
                <td data-label="Created">${time(c.created_at)}</td>
                <td data-label="Updated">${time(c.updated_at)}</td>
                <td data-label="Partner">${c.partner_id ? html`<code>${c.partner_id}</code>` : '—'}</td>
                <td class="num" data-label="Items">${c.items}</td>
              </tr>`,
          )}
        </tbody>
      </table>
    </div>`;
}

export function CartSearch({ session, fragment, onUnauthorized }) {
  const remembered = last?.fragment === fragment ? last : null;
  const [form, setForm] = useState(() => remembered?.form ?? formOf(fragment));
  const [found, setFound] = useState(() => remembered?.found ?? null);
  const [error, setError] = useState(null);
  const [options, setOptions] = useState([]);
  const personal = can(session, 'carts.search_customer');
  useEffect(() => {
    cartStatuses(session).then(setOptions, (e) => setError(`Could not read the cart statuses: ${e.message}`));
  }, []);
  const field = (name) => ({
    id: `search-${name}`,
    name,
    value: form[name],
    onInput: (e) => setForm({ ...form, [name]: e.currentTarget.value }),
  });
  const read = async (query, before, shownForm) => {
    setError(null);
    try {
      const page = await admin(session, 'GET', `/carts?${query}`);
      const next = {
        carts: [...before, ...page.carts],
        next: page.next_cursor,
        capped: page.linked_carts_capped === true,
        query: query.toString(),
      };
      setFound(next);
      last = { fragment: fragmentOf(query), form: shownForm, found: next };
    } catch (e) {
      if (e.status === 401) onUnauthorized();
      else setError(e.message);
    }
  };
  // The search the fragment names (a link, a reload, Back, a new search): the carts this page last
  // showed for it, else asked for.
  useEffect(() => {
    const memo = last?.fragment === fragment ? last : null;
    const shown = memo?.form ?? formOf(fragment);
    setForm(shown);
    if (memo?.found || (fragment === '' && !memo)) {
      setFound(memo?.found ?? null);
      return;
    }
    const query = queryOf(shown);
    query.set('limit', String(PAGE));
    read(query, [], shown);
  }, [fragment]);
  const search = (event) => {
    event.preventDefault();
    const query = queryOf(form);
    query.set('limit', String(PAGE));
    const kept = fragmentOf(query);
    last = { fragment: kept, form, found: null };
    // A new search is a new entry of the browser's history; the fragment's change runs it (above).
    if (kept !== fragment) location.hash = `#cart-audit${kept === '' ? '' : `?${kept}`}`;
    else read(query, [], form);
  };
  const more = () => {
    const query = new URLSearchParams(found.query);
    query.set('cursor', found.next);
    read(query, found.carts, form);
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
          ${options.map((s) => html`<option key=${s} value=${s}>${s}</option>`)}
        </select>
        <label for="search-created_after">Created after</label>
        <input type="datetime-local" aria-describedby="search-zone" ...${field('created_after')} />
        <label for="search-created_before">Created before</label>
        <input type="datetime-local" aria-describedby="search-zone" ...${field('created_before')} />
        <p class="hint" id="search-zone">Times in ${zoneName()}</p>
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
      ${
        found?.capped &&
        html`<p class="muted" role="status">This customer is linked to more carts than a search reads: only those most recently linked were searched.</p>`
      }
      ${found && html`<${Results} carts=${found.carts} />`}
      ${found?.next && html`<button type="button" class="secondary" onClick=${more}>More carts</button>`}
    </section>`;
}
