// The partners view: every partner with its keys and rate limit, and a form that registers one and
// shows its first API key once, with a copy button (GET and POST /admin/v1/partners).
import { useState } from 'preact/hooks';
import { admin, html, time, useAdminRead } from './admin.js';

const KINDS = {
  brand: 'brand_ids',
  brand_feed: 'brand_ids',
  store_operator: 'store_ids',
  store_menu_feed: 'store_ids',
};

const ids = (text) =>
  text
    .split(/[\s,]+/)
    .filter(Boolean)
    .map(Number);

function NewKey({ created, onDismiss }) {
  const [copied, setCopied] = useState(null);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(created.api_key);
      setCopied('Copied');
    } catch {
      setCopied('The browser refused: select the key and copy it');
    }
  };
  return html`
    <div class="callout" role="region" aria-label="New API key">
      <p><strong>${created.partner.name}</strong> is registered. Its API key, shown this once:</p>
      <p><code class="secret" data-api-key>${created.api_key}</code></p>
      <button type="button" onClick=${copy}>Copy key</button>
      <span role="status">${copied ?? ''}</span>
      <button type="button" class="secondary" onClick=${onDismiss}>Done</button>
    </div>`;
}

function CreatePartner({ token, onCreated }) {
  const [form, setForm] = useState({ name: '', kind: 'brand', scope: '', rate: '' });
  const [error, setError] = useState(null);
  const field = (name) => (e) => setForm({ ...form, [name]: e.currentTarget.value });
  const submit = async (event) => {
    event.preventDefault();
    setError(null);
    const body = { name: form.name, kind: form.kind, [KINDS[form.kind]]: ids(form.scope) };
    if (form.kind === 'brand_feed' && body.brand_ids.length === 0) body.all_brands = true;
    if (form.rate) body.rate_limit_per_minute = Number(form.rate);
    try {
      onCreated(await admin(token, 'POST', '/partners', body));
      setForm({ name: '', kind: form.kind, scope: '', rate: '' });
    } catch (e) {
      setError(e.message);
    }
  };
  return html`
    <form class="grid" onSubmit=${submit} aria-labelledby="create-title">
      <h3 id="create-title">Register a partner</h3>
      <label for="partner-name">Name</label>
      <input id="partner-name" required value=${form.name} onInput=${field('name')} />
      <label for="partner-kind">Kind</label>
      <select id="partner-kind" value=${form.kind} onChange=${field('kind')}>
        ${Object.keys(KINDS).map((k) => html`<option key=${k} value=${k}>${k}</option>`)}
      </select>
      <label for="partner-scope">${KINDS[form.kind] === 'brand_ids' ? 'Brand ids' : 'Store ids'} (comma separated${form.kind === 'brand_feed' ? '; empty: all brands' : ''})</label>
      <input id="partner-scope" value=${form.scope} onInput=${field('scope')} />
      <label for="partner-rate">Rate limit per minute (empty: the default)</label>
      <input id="partner-rate" inputmode="numeric" value=${form.rate} onInput=${field('rate')} />
      <button type="submit">Register</button>
      ${error && html`<p class="error" role="alert">${error}</p>`}
    </form>`;
}

export function Partners({ token, onUnauthorized }) {
  const read = useAdminRead(token, '/partners?limit=100', 'partners', onUnauthorized);
  const partners = read.value;
  const [created, setCreated] = useState(null);
  const onCreated = (answer) => {
    setCreated(answer);
    read.refresh();
  };
  return html`
    <section aria-labelledby="view-title">
      <h2 id="view-title">Partners</h2>
      ${created && html`<${NewKey} created=${created} onDismiss=${() => setCreated(null)} />`}
      ${read.error && html`<p class="error" role="alert">Could not read the partners: ${read.error}</p>`}
      <${CreatePartner} token=${token} onCreated=${onCreated} />
      ${
        partners === null
          ? html`<p>Loading…</p>`
          : html`
          <div class="table-scroll">
            <table>
              <thead><tr><th scope="col">Partner</th><th scope="col">Kind</th><th scope="col">Scope</th>
                <th scope="col">Rate limit</th><th scope="col">Keys</th><th scope="col">Created</th></tr></thead>
              <tbody>
                ${partners.map(
                  (p) => html`
                    <tr key=${p.partner_id} data-partner=${p.partner_id}>
                      <th scope="row">${p.name}</th>
                      <td>${p.kind}</td>
                      <td>${p.all_brands ? 'all brands' : [...p.brand_ids.map((b) => `brand ${b}`), ...p.store_ids.map((s) => `store ${s}`)].join(', ')}</td>
                      <td class="num">${p.rate_limit_per_minute}/min</td>
                      <td>${p.keys.map((k) => html`<div key=${k.key_id}><code>${k.key_prefix}…</code> ${k.status}</div>`)}</td>
                      <td>${time(p.created_at)}</td>
                    </tr>`,
                )}
              </tbody>
            </table>
          </div>`
      }
    </section>`;
}
