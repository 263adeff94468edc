// The partners view: every partner with its keys and rate limit, a form that registers one and shows
// its first API key once, with a copy button, and per partner: issue, rotate and revoke keys, and
// change the rate limit (GET, POST and PATCH /admin/v1/partners, …/{id}/keys). The writes show only
// to a role that may make them.
import { useState } from 'preact/hooks';
import { admin, can, html, idList, ShownOnce, time, useAdminRead, useWrite } from './admin.js';

const KINDS = {
  brand: 'brand_ids',
  brand_feed: 'brand_ids',
  store_operator: 'store_ids',
  store_menu_feed: 'store_ids',
};

function CreatePartner({ session, onCreated }) {
  const [form, setForm] = useState({ name: '', kind: 'brand', scope: '', rate: '' });
  const [error, setError] = useState(null);
  const field = (name) => (e) => setForm({ ...form, [name]: e.currentTarget.value });
  const submit = async (event) => {
    event.preventDefault();
    setError(null);
    const body = { name: form.name, kind: form.kind, [KINDS[form.kind]]: idList(form.scope) };
    if (form.kind === 'brand_feed' && body.brand_ids.length === 0) body.all_brands = true;
    if (form.rate) body.rate_limit_per_minute = Number(form.rate);
    try {
      onCreated(await admin(session, 'POST', '/partners', body));
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

function ManagePartner({ session, partner, onKey, onChanged }) {
  const [rate, setRate] = useState(String(partner.rate_limit_per_minute));
  const { message, act } = useWrite({
    secret: { field: 'api_key', what: 'API key' },
    onSecret: onKey,
    onChanged,
  });
  const base = `/partners/${partner.partner_id}`;
  const active = partner.keys.filter((k) => k.status === 'active');
  return html`
    <div class="manage">
      <button type="button" onClick=${() =>
        act(
          () => admin(session, 'POST', `${base}/keys`, {}),
          () => `A new key was issued for ${partner.name}.`,
        )}>
        Issue a key</button>
      <ul class="keys">
        ${active.map(
          (k) => html`
            <li key=${k.key_id}><code>${k.key_prefix}…</code>
              <button type="button" class="secondary" aria-label=${`Rotate key ${k.key_prefix}`}
                onClick=${() =>
                  act(
                    () => admin(session, 'POST', `${base}/keys/${k.key_id}/rotate`, {}),
                    () => `Key ${k.key_prefix}… was rotated for ${partner.name}.`,
                  )}>Rotate</button>
              <button type="button" class="secondary" aria-label=${`Revoke key ${k.key_prefix}`}
                onClick=${() =>
                  act(
                    () => admin(session, 'DELETE', `${base}/keys/${k.key_id}`),
                    () => `Key ${k.key_prefix}… is revoked.`,
                  )}>Revoke</button>
            </li>`,
        )}
      </ul>
      <form class="inline" onSubmit=${(e) => {
        e.preventDefault();
        act(
          () => admin(session, 'PATCH', base, { rate_limit_per_minute: Number(rate) }),
          () => `The rate limit of ${partner.name} is ${rate}/min.`,
        );
      }}>
        <label for=${`rate-${partner.partner_id}`}>Rate limit per minute</label>
        <input id=${`rate-${partner.partner_id}`} inputmode="numeric" value=${rate} onInput=${(e) => setRate(e.currentTarget.value)} />
        <button type="submit" class="secondary">Change</button>
      </form>
      <p role="status">${message ?? ''}</p>
    </div>`;
}

export function Partners({ session, onUnauthorized }) {
  const read = useAdminRead(session, '/partners?limit=100', 'partners', onUnauthorized);
  const partners = read.value;
  const [created, setCreated] = useState(null);
  const writes = can(session, 'partners.write');
  const onCreated = (answer) => {
    setCreated({ title: `${answer.partner.name} is registered.`, value: answer.api_key });
    read.refresh();
  };
  return html`
    <section aria-labelledby="view-title">
      <h2 id="view-title">Partners</h2>
      ${created && html`<${ShownOnce} shown=${created} onDismiss=${() => setCreated(null)} />`}
      ${read.error && html`<p class="error" role="alert">Could not read the partners: ${read.error}</p>`}
      ${writes && html`<${CreatePartner} session=${session} onCreated=${onCreated} />`}
      ${
        partners === null
          ? html`<p>Loading…</p>`
          : html`
          <div class="table-scroll">
            <table>
              <thead><tr><th scope="col">Partner</th><th scope="col">Kind</th><th scope="col">Scope</th>
                <th scope="col">Rate limit</th><th scope="col">Keys</th><th scope="col">Created</th>
                ${writes && html`<th scope="col"><span class="visually-hidden">Manage</span></th>`}</tr></thead>
              <tbody>
                ${partners.map(
                  (p) => html`
                    <tr key=${p.partner_id} data-partner=${p.partner_id}>
                      <th scope="row">${p.name}</th>
                      <td data-label="Kind">${p.kind}</td>
                      <td data-label="Scope">${p.all_brands ? 'all brands' : [...p.brand_ids.map((b) => `brand ${b}`), ...p.store_ids.map((s) => `store ${s}`)].join(', ')}</td>
                      <td class="num" data-label="Rate limit">${p.rate_limit_per_minute}/min</td>
                      <td data-label="Keys">${p.keys.map((k) => html`<div key=${k.key_id}><code>${k.key_prefix}…</code> ${k.status}</div>`)}</td>
                      <td data-label="Created">${time(p.created_at)}</td>
                      ${
                        writes &&
                        html`<td data-label="Manage"><details><summary>Manage<span class="visually-hidden"> ${p.name}</span></summary>
                          <${ManagePartner} session=${session} partner=${p} onKey=${setCreated} onChanged=${read.refresh} />
                        </details></td>`
                      }
                    </tr>`,
                )}
              </tbody>
            </table>
          </div>`
      }
    </section>`;
}
