// The webhooks view: the subscriptions, each with its id and marked FAILING when the admin API judges
// it so (GET /admin/v1/webhook-health), created (the signing secret shown once), disabled or enabled,
// their secret rotated, a test event sent, failed deliveries recovered since a time; a subscription's
// health (health.js) and its deliveries (deliveries.js), chosen here or by a link (#webhooks/<id>)
// (/admin/v1/webhooks and its deliveries, docs/webhooks.md, "Operators"). The writes show only to a
// role that may make them.
import { useEffect, useRef, useState } from 'preact/hooks';
import {
  admin,
  can,
  html,
  idList,
  ShownOnce,
  Trouble,
  Truncated,
  timesIn,
  useAdminRead,
  useWrite,
} from './admin.js';
import { Deliveries } from './deliveries.js';
import { Health, WindowChoice } from './health.js';

const EVENT_KINDS = ['cart_status_updated', 'cart_abandoned'];

/** The webhook event kinds a subscription receives, as checkboxes. */
function EventKinds({ chosen, onChange }) {
  const toggle = (kind) =>
    onChange(chosen.includes(kind) ? chosen.filter((k) => k !== kind) : [...chosen, kind]);
  return html`
    <fieldset>
      <legend>Events</legend>
      ${EVENT_KINDS.map(
        (kind) => html`
          <label key=${kind} class="check"><input type="checkbox" checked=${chosen.includes(kind)}
            onChange=${() => toggle(kind)} /> ${kind}</label>`,
      )}
    </fieldset>`;
}

function CreateWebhook({ session, onCreated }) {
  const [form, setForm] = useState({ url: '', auth_token: '', stores: '', events: [...EVENT_KINDS] });
  const [error, setError] = useState(null);
  const field = (name) => (e) => setForm({ ...form, [name]: e.currentTarget.value });
  const submit = async (event) => {
    event.preventDefault();
    setError(null);
    const body = {
      url: form.url,
      auth_token: form.auth_token,
      store_ids: idList(form.stores),
      events: form.events,
    };
    try {
      onCreated(await admin(session, 'POST', '/webhooks', body));
      setForm({ url: '', auth_token: '', stores: '', events: [...EVENT_KINDS] });
    } catch (e) {
      setError(e.message);
    }
  };
  return html`
    <form class="grid" onSubmit=${submit} aria-labelledby="create-webhook-title">
      <h3 id="create-webhook-title">Subscribe a receiver</h3>
      <label for="webhook-url">URL</label>
      <input id="webhook-url" type="url" required value=${form.url} onInput=${field('url')} />
      <label for="webhook-auth">Auth token (sent as a bearer token to the receiver)</label>
      <input id="webhook-auth" type="password" autocomplete="off" required value=${form.auth_token} onInput=${field('auth_token')} />
      <label for="webhook-stores">Store ids (comma separated)</label>
      <input id="webhook-stores" required value=${form.stores} onInput=${field('stores')} />
      <${EventKinds} chosen=${form.events} onChange=${(events) => setForm({ ...form, events })} />
      <button type="submit">Subscribe</button>
      ${error && html`<p class="error" role="alert">${error}</p>`}
    </form>`;
}

/** The subscription's URL, stores and events, as a form that sends only what changed. */
function ChangeWebhook({ webhook, onChange }) {
  const id = webhook.webhook_id;
  const [form, setForm] = useState({
    url: webhook.url,
    stores: webhook.store_ids.join(', '),
    events: webhook.events,
  });
  const submit = (event) => {
    event.preventDefault();
    const body = {};
    if (form.url !== webhook.url) body.url = form.url;
    const stores = idList(form.stores);
    if (stores.join() !== webhook.store_ids.join()) body.store_ids = stores;
    if ([...form.events].sort().join() !== [...webhook.events].sort().join()) body.events = form.events;
    onChange(body);
  };
  return html`
    <form class="grid" onSubmit=${submit} aria-label=${`Change ${webhook.url}`}>
      <label for=${`url-${id}`}>URL</label>
      <input id=${`url-${id}`} type="url" required value=${form.url} onInput=${(e) => setForm({ ...form, url: e.currentTarget.value })} />
      <label for=${`stores-${id}`}>Store ids</label>
      <input id=${`stores-${id}`} required value=${form.stores} onInput=${(e) => setForm({ ...form, stores: e.currentTarget.value })} />
      <${EventKinds} chosen=${form.events} onChange=${(events) => setForm({ ...form, events })} />
      <button type="submit" class="secondary">Save changes</button>
    </form>`;
}

function ManageWebhook({ session, webhook, onSecret, onChanged }) {
  const [since, setSince] = useState('');
  const base = `/webhooks/${webhook.webhook_id}`;
  const { message, act } = useWrite({
    secret: { field: 'signing_secret', what: 'signing secret' },
    onSecret,
    onChanged,
  });
  const testSend = () =>
    act(
      () => admin(session, 'POST', `${base}/test`, { event: 'cart_status_updated' }),
      ({ result }) =>
        `Test event sent: ${result.outcome}${result.status === null ? '' : `, HTTP ${result.status}`}, ${result.duration_ms} ms${result.error ? ` (${result.error})` : ''}.`,
    );
  const recover = (e) => {
    e.preventDefault();
    act(
      () => admin(session, 'POST', `${base}/recover`, { since: new Date(since).toISOString() }),
      (a) =>
        `${a.recovered} failed or parked deliver${a.recovered === 1 ? 'y was' : 'ies were'} queued again.`,
    );
  };
  return html`
    <div class="manage">
      <div class="inline">
        <button type="button" class="secondary"
          onClick=${() =>
            act(
              () => admin(session, 'PATCH', base, { enabled: !webhook.enabled }),
              () => (webhook.enabled ? 'Disabled.' : 'Enabled.'),
            )}>
          ${webhook.enabled ? 'Disable' : 'Enable'}</button>
        <button type="button" class="secondary"
          onClick=${() =>
            act(
              () => admin(session, 'POST', `${base}/rotate-secret`, {}),
              () => `The secret of ${webhook.url} was rotated.`,
            )}>
          Rotate secret</button>
        <button type="button" class="secondary" onClick=${testSend}>Send a test event</button>
      </div>
      <${ChangeWebhook} webhook=${webhook}
        onChange=${(body) =>
          act(
            () => admin(session, 'PATCH', base, body),
            () => 'Changed.',
          )} />
      <form class="inline" onSubmit=${recover}>
        <label for=${`since-${webhook.webhook_id}`}>Recover failed and parked deliveries since (${timesIn()})</label>
        <input id=${`since-${webhook.webhook_id}`} type="datetime-local" required value=${since}
          onInput=${(e) => setSince(e.currentTarget.value)} />
        <button type="submit" class="secondary">Recover</button>
      </form>
      <p role="status">${message ?? ''}</p>
    </div>`;
}

/** A subscription's health, then its deliveries. */
function Chosen({ session, webhook, onUnauthorized }) {
  const [window, setWindow] = useState('1h');
  const top = useRef(null);
  // Chosen by a click or a link: it shows below the list, so the page goes there.
  useEffect(() => top.current?.scrollIntoView({ block: 'start' }), []);
  return html`
    <section aria-labelledby="chosen-health-title" ref=${top}>
      <h3 id="chosen-health-title">Health of <code>${webhook.url}</code>
        <span class="muted">(id <code>${webhook.webhook_id}</code>)</span></h3>
      <${WindowChoice} window=${window} onChange=${setWindow} />
      <${Health} session=${session} webhook=${webhook} window=${window} onUnauthorized=${onUnauthorized} />
    </section>
    <${Deliveries} session=${session} webhook=${webhook} onUnauthorized=${onUnauthorized} />`;
}

/** The subscription's mark: FAILING with why, or ok (blank until judged, and while its read fails). */
function HealthMark({ judged }) {
  if (!judged) return '';
  if (judged.status === 'ok') return html`<span class="mark mark-ok">ok</span>`;
  return html`<${Trouble} judged=${judged} mark="FAILING" />`;
}

function WebhookRow({ session, webhook: w, judged, writes, onChoose, onSecret, onChanged }) {
  return html`
    <tr key=${w.webhook_id} data-webhook=${w.webhook_id} class=${judged?.status === 'failing' ? 'failing' : undefined}>
      <th scope="row"><code>${w.url}</code><div class="muted">id <code>${w.webhook_id}</code></div></th>
      <td data-label="Events">${w.events.join(', ')}</td>
      <td data-label="Stores">${w.store_ids.join(', ')}</td>
      <td data-label="State">${w.enabled ? 'enabled' : `disabled (${w.disabled_reason})`}</td>
      <td data-label="Health"><${HealthMark} judged=${judged} /></td>
      <td data-label="Actions"><button type="button" class="secondary" onClick=${() => onChoose(w.webhook_id)}
        aria-label=${`Deliveries to ${w.url}`}>Deliveries</button>
        ${
          writes &&
          html`<details><summary>Manage<span class="visually-hidden"> ${w.url}</span></summary>
            <${ManageWebhook} session=${session} webhook=${w} onSecret=${onSecret} onChanged=${onChanged} />
          </details>`
        }</td>
    </tr>`;
}

export function Webhooks({ session, param, onUnauthorized }) {
  const read = useAdminRead(session, '/webhooks?limit=100', 'webhooks', onUnauthorized);
  const health = useAdminRead(session, '/webhook-health', null, onUnauthorized, 10_000);
  const webhooks = read.value;
  // No marks while the health cannot be read: the last ones would say what is no longer known.
  const judged = new Map(
    (health.error ? [] : (health.value?.subscriptions ?? [])).map((j) => [j.webhook_id, j]),
  );
  // Chosen here, or named by the link that led here (#webhooks/<id>); by id, so that the panel shows
  // the subscription as last read (its new URL after "Save changes").
  const [picked, setChosen] = useState(null);
  const chosenId = picked ?? param;
  const chosen = (chosenId && webhooks?.find((w) => w.webhook_id === chosenId)) ?? null;
  const [secret, setSecret] = useState(null);
  const writes = can(session, 'webhooks.write');
  const onCreated = (answer) => {
    setSecret({
      title: `${answer.webhook.url} is subscribed.`,
      value: answer.signing_secret,
      what: 'signing secret',
    });
    read.refresh();
  };
  return html`
    <section aria-labelledby="view-title">
      <h2 id="view-title">Webhooks</h2>
      ${secret && html`<${ShownOnce} shown=${secret} onDismiss=${() => setSecret(null)} />`}
      ${writes && html`<${CreateWebhook} session=${session} onCreated=${onCreated} />`}
      ${read.error && html`<p class="error" role="alert">Could not read the subscriptions: ${read.error}</p>`}
      ${health.error && html`<p class="error" role="alert">Could not read the subscriptions' health: ${health.error}</p>`}
      ${!health.error && html`<${Truncated} judged=${health.value} />`}
      ${!picked && param && webhooks && !chosen && html`<p class="error" role="alert">No subscription <code>${param}</code> among the first 100.</p>`}
      ${
        webhooks === null
          ? html`<p>Loading…</p>`
          : webhooks.length === 0
            ? html`<p class="muted">No webhook subscriptions.</p>`
            : html`
            <div class="table-scroll">
              <table>
                <thead><tr><th scope="col">URL and id</th><th scope="col">Events</th><th scope="col">Stores</th>
                  <th scope="col">State</th><th scope="col">Health</th>
                  <th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
                <tbody>
                  ${webhooks.map(
                    (w) => html`<${WebhookRow} key=${w.webhook_id} session=${session} webhook=${w}
                      judged=${judged.get(w.webhook_id)} writes=${writes} onChoose=${setChosen}
                      onSecret=${setSecret} onChanged=${read.refresh} />`,
                  )}
                </tbody>
              </table>
            </div>`
      }
      ${chosen && html`<${Chosen} key=${chosen.webhook_id} session=${session} webhook=${chosen} onUnauthorized=${onUnauthorized} />`}
    </section>`;
}
