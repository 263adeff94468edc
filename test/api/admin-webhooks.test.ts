/**
 * Webhook subscriptions in the admin API (`/admin/v1/webhooks`, operator token) on a real service:
 * create (the signing secret shown once), list, show, change, enable and disable, rotate the secret,
 * remove. Every refusal is a problem document and appends nothing; the auth token and the signing
 * secret never appear in plain text in the event store, the logs, a listing or an idempotency record.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { createSecretBox, type SecretBox } from '../../application/credentials.ts';
import { parseSecretKey, SECRET_KEY_FILE } from '../../cli/config.ts';
import type { EventStore, RecordedEvent } from '../../eventstore/port.ts';
import { ok, problem } from '../support/admin-answers.ts';
import { startService, type TestService } from '../support/service.ts';

const ADMIN = '/admin/v1';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;
const SECRET = /^whsec_[A-Za-z0-9+/]{43}=$/;
const UNKNOWN = '00000000-0000-4000-8000-000000000000';
const BOTH = ['cart_status_updated', 'cart_abandoned'];
/** Reachable without DNS; allowed because the embedded service allows private webhook URLs. */
const LOCAL_URL = 'http://127.0.0.1:9/hooks/pds';
/** A public address written as an IP literal, so the private-address check needs no DNS. */
const PUBLIC_URL = 'https://93.184.215.14/hooks/pds';

// biome-ignore lint/suspicious/noExplicitAny: response bodies are checked field by field
type Json = Record<string, any>;

async function seedStores(t: ExecutionContext, svc: TestService, ids = [10, 11, 12]): Promise<void> {
  for (const id of ids) {
    const res = await svc.call('PUT', `/platform/v1/stores/${id}`, {
      name: `Store ${id}`,
      address: `${id} Market St`,
      city: 'San Francisco',
      state: 'CA',
      zip: '94103',
      lat: 37.77,
      long: -122.41,
    });
    t.is(res.status, 201, await res.clone().text());
  }
}

async function json(res: Response): Promise<Json> {
  return (await res.json()) as Json;
}

async function create(t: ExecutionContext, svc: TestService, body: Json, headers = {}): Promise<Json> {
  const res = await svc.call('POST', `${ADMIN}/webhooks`, body, headers);
  const out = await json(res);
  t.is(res.status, 201, JSON.stringify(out));
  return out;
}

/** Runs `refusal`, then checks the event store's head did not move. */
async function appendsNothing<T>(
  t: ExecutionContext,
  inspect: EventStore,
  refusal: () => Promise<T>,
): Promise<T> {
  const before = await inspect.headPosition();
  const result = await refusal();
  t.is(await inspect.headPosition(), before, 'a refusal appends nothing');
  return result;
}

/** Every event of `$all`, page by page. */
async function readEverything(store: EventStore): Promise<RecordedEvent[]> {
  const all: RecordedEvent[] = [];
  let after = 0;
  for (;;) {
    const page = await store.readAll({ after, maxCount: 50 });
    if (page.length === 0) return all;
    all.push(...page);
    after = page[page.length - 1].position;
  }
}

async function webhookEvents(store: EventStore, id: string): Promise<RecordedEvent[]> {
  return store.readStream(`webhooksub-${id}`);
}

/** The secret box of the service (its key is kept in the data dir in embedded mode). */
async function secretBox(svc: TestService): Promise<SecretBox> {
  const key = await readFile(path.join(svc.dataDir, SECRET_KEY_FILE), 'utf8');
  return createSecretBox(parseSecretKey(key));
}

test('POST /webhooks creates a subscription and shows its signing secret once', async (t) => {
  const svc = await startService(t);
  await seedStores(t, svc);
  const inspect = await svc.openStore();
  const box = await secretBox(svc);

  const res = await svc.call('POST', `${ADMIN}/webhooks`, {
    url: LOCAL_URL,
    auth_token: 'receiver-token-0001',
    store_ids: [11, 10, 11],
  });
  const out = await ok(t, res, 201);
  t.deepEqual(Object.keys(out).sort(), ['position', 'revision', 'signing_secret', 'webhook']);
  const w = out.webhook as Json;
  t.regex(w.webhook_id, UUID);
  t.deepEqual(Object.keys(w).sort(), [
    'created_at',
    'disabled_reason',
    'enabled',
    'events',
    'store_ids',
    'updated_at',
    'url',
    'webhook_id',
  ]);
  t.is(w.url, LOCAL_URL);
  t.deepEqual(w.store_ids, [10, 11], 'sorted, without duplicates');
  t.deepEqual(w.events, BOTH, 'every kind by default');
  t.true(w.enabled);
  t.is(w.disabled_reason, null);
  t.regex(w.created_at, ISO);
  t.is(w.updated_at, w.created_at);
  t.regex(out.signing_secret, SECRET);
  t.is(out.revision, 0);
  t.is(res.headers.get('location'), `${ADMIN}/webhooks/${w.webhook_id}`);
  t.is(res.headers.get('etag'), '"0"');

  // The event holds the secrets sealed, each bound to its subscription and its role.
  const [created] = await webhookEvents(inspect, w.webhook_id);
  t.is(created.type, 'WebhookSubscriptionCreated');
  t.is(created.metadata.actor.type, 'operator');
  const data = created.data as Json;
  t.is(box.decrypt(data.auth_token_encrypted, `webhook:${w.webhook_id}:auth_token`), 'receiver-token-0001');
  t.is(
    box.decrypt(data.signing_secret_encrypted, `webhook:${w.webhook_id}:signing_secret`),
    out.signing_secret,
  );
  t.throws(() => box.decrypt(data.auth_token_encrypted, `webhook:${w.webhook_id}:signing_secret`));

  // One kind only; the list and the single record agree with the answer at once (read-your-writes).
  const second = await create(t, svc, {
    url: LOCAL_URL,
    auth_token: 'receiver-token-0002',
    store_ids: [12],
    events: ['cart_abandoned'],
  });
  t.deepEqual(second.webhook.events, ['cart_abandoned']);
  t.not(second.signing_secret, out.signing_secret);
  const listed = await ok(t, await svc.call('GET', `${ADMIN}/webhooks`));
  t.deepEqual(
    listed.webhooks,
    [w, second.webhook].sort((a, b) => (a.webhook_id < b.webhook_id ? -1 : 1)),
  );
  t.is(listed.next_cursor, null);
  const one = await svc.call('GET', `${ADMIN}/webhooks/${w.webhook_id}`);
  t.deepEqual(await ok(t, one), { webhook: w, revision: 0 });
  t.is(one.headers.get('etag'), '"0"');
  // An upper-case id names the same subscription.
  t.is((await svc.call('GET', `${ADMIN}/webhooks/${w.webhook_id.toUpperCase()}`)).status, 200);
});

test('POST /webhooks refuses bad bodies, unknown stores and bad URLs, appending nothing', async (t) => {
  const svc = await startService(t);
  await seedStores(t, svc);
  const inspect = await svc.openStore();
  const valid = { url: LOCAL_URL, auth_token: 'receiver-token', store_ids: [10] };
  const refuse = async (body: unknown, status: number, code: string) =>
    appendsNothing(t, inspect, async () =>
      problem(t, await svc.call('POST', `${ADMIN}/webhooks`, body), status, code),
    );

  const unknownField = await refuse({ ...valid, secret: 'x' }, 422, 'validation_failed');
  t.deepEqual(unknownField.errors, [{ field: 'secret', message: 'unknown field' }]);
  const missing = await refuse({}, 422, 'validation_failed');
  t.deepEqual(missing.errors.map((e: Json) => e.field).sort(), ['auth_token', 'store_ids', 'url']);
  for (const store_ids of [[], [0], ['10'], [1.5]]) {
    const p = await refuse({ ...valid, store_ids }, 422, 'validation_failed');
    t.true(
      p.errors.every((e: Json) => e.field.startsWith('store_ids')),
      JSON.stringify(p.errors),
    );
  }
  for (const auth_token of ['', 'a'.repeat(4097), 'line\nbreak', ' padded', 'nön-ascii', 42]) {
    const p = await refuse({ ...valid, auth_token }, 422, 'validation_failed');
    t.true(p.errors.length > 0 && p.errors.every((e: Json) => e.field === 'auth_token'));
    t.false(JSON.stringify(p).includes('padded') || JSON.stringify(p).includes('break'), 'no echo');
  }
  for (const events of [[], ['order_created'], 'cart_abandoned']) {
    const p = await refuse({ ...valid, events }, 422, 'validation_failed');
    t.true(p.errors.every((e: Json) => e.field.startsWith('events')));
  }
  const unknownStore = await refuse({ ...valid, store_ids: [10, 99, 98] }, 422, 'unknown_store_id');
  t.deepEqual(unknownStore.store_ids, [98, 99]);
  t.is(unknownStore.field, 'store_ids');

  for (const url of [
    'not a url',
    '/relative/path',
    'ftp://127.0.0.1/hook',
    'https://user:pass@127.0.0.1/hook',
  ]) {
    const p = await refuse({ ...valid, url }, 422, 'invalid_url');
    t.deepEqual(p.errors, [{ field: 'url', message: p.errors[0].message }]);
    t.false(JSON.stringify(p).includes('pass@'), 'URL credentials are not echoed');
  }
  const long = await refuse(
    { ...valid, url: `https://127.0.0.1/${'x'.repeat(2048)}` },
    422,
    'validation_failed',
  );
  t.deepEqual(
    long.errors.map((e: Json) => e.field),
    ['url'],
  );
  // The metadata address is refused even where private URLs are allowed.
  const metadata = await refuse({ ...valid, url: 'http://169.254.169.254/latest' }, 422, 'private_url');
  t.is(metadata.reason, 'metadata');
  t.is(metadata.errors[0].field, 'url');

  // Malformed JSON and another media type.
  await appendsNothing(t, inspect, async () =>
    problem(t, await svc.call('POST', `${ADMIN}/webhooks`, '{"url":'), 400, 'malformed_json'),
  );
  // Without the operator token.
  const anonymous = await fetch(`${svc.base}${ADMIN}/webhooks`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(valid),
  });
  await problem(t, anonymous, 401);
  t.is((await ok(t, await svc.call('GET', `${ADMIN}/webhooks`))).webhooks.length, 0);
});

test('without PDS_ALLOW_PRIVATE_WEBHOOK_URLS, http and private, loopback and link-local hosts are refused', async (t) => {
  const svc = await startService(t, { env: { PDS_ALLOW_PRIVATE_WEBHOOK_URLS: 'false' } });
  await seedStores(t, svc, [10]);
  const inspect = await svc.openStore();
  const body = (url: string) => ({ url, auth_token: 'receiver-token', store_ids: [10] });
  const refuse = async (url: string, code: string, reason?: string) =>
    appendsNothing(t, inspect, async () => {
      const p = await problem(t, await svc.call('POST', `${ADMIN}/webhooks`, body(url)), 422, code);
      t.is(p.errors[0].field, 'url');
      if (reason) t.is(p.reason, reason, url);
      return p;
    });

  await refuse('http://93.184.215.14/hooks', 'https_required', 'https_required');
  await refuse('https://127.0.0.1/hooks', 'private_url', 'loopback');
  await refuse('https://2130706433/hooks', 'private_url', 'loopback');
  await refuse('https://[::1]/hooks', 'private_url', 'loopback');
  await refuse('https://[::ffff:127.0.0.1]/hooks', 'private_url');
  await refuse('https://localhost/hooks', 'private_url', 'loopback');
  await refuse('https://10.1.2.3/hooks', 'private_url', 'private');
  await refuse('https://192.168.0.7:8443/hooks', 'private_url', 'private');
  await refuse('https://172.20.0.1/hooks', 'private_url', 'private');
  await refuse('https://169.254.10.10/hooks', 'private_url', 'link_local');
  await refuse('https://169.254.169.254/latest/meta-data', 'private_url', 'metadata');
  await refuse('https://[fe80::1]/hooks', 'private_url', 'link_local');
  await refuse('https://[fd12:3456::1]/hooks', 'private_url', 'private');
  await refuse('https://100.64.0.1/hooks', 'private_url', 'shared_address_space');
  await refuse('https://0.0.0.0/hooks', 'private_url', 'unspecified');
  await refuse('https://no-such-host.invalid/hooks', 'unresolvable_url', 'unresolvable');

  // A public https address is accepted; changing it to a private one is refused like a creation.
  const created = await create(t, svc, body(PUBLIC_URL));
  t.is(created.webhook.url, PUBLIC_URL);
  const id = created.webhook.webhook_id;
  await appendsNothing(t, inspect, async () =>
    problem(
      t,
      await svc.call('PATCH', `${ADMIN}/webhooks/${id}`, { url: 'https://127.0.0.1/x', enabled: false }),
      422,
      'private_url',
    ),
  );
  const shown = await ok(t, await svc.call('GET', `${ADMIN}/webhooks/${id}`));
  t.is(shown.webhook.url, PUBLIC_URL);
  t.true(shown.webhook.enabled, 'the refused request changed nothing at all');
});

test('with private webhook URLs allowed, link-local, metadata and unspecified addresses are still refused, in every form', async (t) => {
  // The embedded service allows private webhook URLs (loopback receivers on one machine).
  const svc = await startService(t);
  await seedStores(t, svc, [10]);
  const inspect = await svc.openStore();
  const body = (url: string) => ({ url, auth_token: 'receiver-token', store_ids: [10] });
  const refused: [string, string][] = [
    ['http://169.254.0.1/hooks', 'link_local'],
    ['http://169.254.169.254/latest/meta-data', 'metadata'],
    ['http://100.100.100.200/latest/meta-data', 'metadata'],
    ['http://[fd00:ec2::254]/latest/meta-data', 'metadata'],
    ['http://[fe80::1]/hooks', 'link_local'],
    ['http://[::ffff:169.254.169.254]/latest', 'metadata'],
    ['http://[::ffff:a9fe:101]/hooks', 'link_local'],
    ['http://[::ffff:100.100.100.200]/latest', 'metadata'],
    ['http://[::169.254.169.254]/latest', 'metadata'],
    ['http://[64:ff9b::a9fe:a9fe]/latest', 'metadata'],
    ['http://2852039166/latest', 'metadata'],
    ['http://0.0.0.0:9/hooks', 'unspecified'],
    ['http://[::]:9/hooks', 'unspecified'],
    ['http://[::ffff:0.0.0.0]:9/hooks', 'unspecified'],
  ];
  for (const [url, reason] of refused) {
    const p = await appendsNothing(t, inspect, async () =>
      problem(t, await svc.call('POST', `${ADMIN}/webhooks`, body(url)), 422, 'private_url'),
    );
    t.is(p.reason, reason, url);
    t.deepEqual(
      p.errors.map((e: Json) => e.field),
      ['url'],
    );
    t.regex(p.detail, /no webhook is ever sent there$/, url);
  }
  // Loopback and private receivers are still allowed here; changing one to a refused address is refused.
  const created = await create(t, svc, body(LOCAL_URL));
  const id = created.webhook.webhook_id;
  for (const [url, reason] of refused.slice(0, 3)) {
    const p = await appendsNothing(t, inspect, async () =>
      problem(t, await svc.call('PATCH', `${ADMIN}/webhooks/${id}`, { url }), 422, 'private_url'),
    );
    t.is(p.reason, reason, url);
  }
  t.is((await ok(t, await svc.call('GET', `${ADMIN}/webhooks/${id}`))).webhook.url, LOCAL_URL);
});

test('GET /webhooks pages in webhook id order, filters by store and state, and refuses bad queries', async (t) => {
  const svc = await startService(t);
  await seedStores(t, svc);
  const ids: string[] = [];
  for (const store_ids of [[10], [10, 11], [12], [11]]) {
    ids.push((await create(t, svc, { url: LOCAL_URL, auth_token: 'tok', store_ids })).webhook.webhook_id);
  }
  ids.sort();
  const seen: string[] = [];
  let url = `${ADMIN}/webhooks?limit=3`;
  for (let i = 0; i < 5; i++) {
    const res = await svc.call('GET', url);
    const page = await ok(t, res);
    seen.push(...page.webhooks.map((w: Json) => w.webhook_id));
    for (const w of page.webhooks) {
      t.false('auth_token_encrypted' in w || 'signing_secret_encrypted' in w || 'auth_token' in w);
    }
    if (!page.next_cursor) {
      t.is(res.headers.get('link'), null);
      break;
    }
    t.is(res.headers.get('link'), `<${ADMIN}/webhooks?limit=3&cursor=${page.next_cursor}>; rel="next"`);
    url = `${ADMIN}/webhooks?limit=3&cursor=${page.next_cursor}`;
  }
  t.deepEqual(seen, ids);

  const ofStore = await ok(t, await svc.call('GET', `${ADMIN}/webhooks?store_id=10`));
  t.is(ofStore.webhooks.length, 2);
  t.true(ofStore.webhooks.every((w: Json) => w.store_ids.includes(10)));
  const firstOfStore = await svc.call('GET', `${ADMIN}/webhooks?store_id=11&limit=1`);
  const link = firstOfStore.headers.get('link') ?? '';
  t.regex(link, /store_id=11/, 'the next page keeps the filter');

  await ok(t, await svc.call('PATCH', `${ADMIN}/webhooks/${ids[0]}`, { enabled: false }));
  const disabled = await ok(t, await svc.call('GET', `${ADMIN}/webhooks?enabled=false`));
  t.deepEqual(
    disabled.webhooks.map((w: Json) => w.webhook_id),
    [ids[0]],
  );
  t.is((await ok(t, await svc.call('GET', `${ADMIN}/webhooks?enabled=true`))).webhooks.length, 3);

  for (const query of ['limit=0', 'limit=501', 'limit=x', 'store_id=0', 'enabled=maybe']) {
    await problem(t, await svc.call('GET', `${ADMIN}/webhooks?${query}`), 400, 'invalid_parameter');
  }
  await problem(t, await svc.call('GET', `${ADMIN}/webhooks?cursor=bm9wZQ`), 400, 'invalid_cursor');
});

test('GET /webhooks/{id}: unknown and malformed ids are 404', async (t) => {
  const svc = await startService(t);
  await problem(t, await svc.call('GET', `${ADMIN}/webhooks/${UNKNOWN}`), 404, 'webhook_not_found');
  await problem(t, await svc.call('GET', `${ADMIN}/webhooks/not-a-uuid`), 404, 'not_found');
});

test('PATCH /webhooks/{id} changes URL, stores, events and auth token, and enables and disables', async (t) => {
  const svc = await startService(t);
  await seedStores(t, svc);
  const inspect = await svc.openStore();
  const box = await secretBox(svc);
  const created = await create(t, svc, { url: LOCAL_URL, auth_token: 'token-one', store_ids: [10] });
  const id = created.webhook.webhook_id as string;
  const patch = (body: unknown, headers: Record<string, string> = {}) =>
    svc.call('PATCH', `${ADMIN}/webhooks/${id}`, body, headers);

  const changed = await ok(
    t,
    await patch({ url: 'http://127.0.0.1:9/v2', store_ids: [12, 11], events: ['cart_status_updated'] }),
  );
  t.is(changed.webhook.url, 'http://127.0.0.1:9/v2');
  t.deepEqual(changed.webhook.store_ids, [11, 12]);
  t.deepEqual(changed.webhook.events, ['cart_status_updated']);
  t.is(changed.revision, 1);
  t.deepEqual((await ok(t, await svc.call('GET', `${ADMIN}/webhooks?store_id=12`))).webhooks, [
    changed.webhook,
  ]);
  let events = await webhookEvents(inspect, id);
  t.deepEqual(Object.keys(events[1].data as Json).sort(), [
    'changed_at',
    'events',
    'store_ids',
    'url',
    'webhook_id',
  ]);

  // The same auth token again (and the same values) records nothing.
  const same = await appendsNothing(t, inspect, async () =>
    ok(
      t,
      await patch({ auth_token: 'token-one', url: 'http://127.0.0.1:9/v2', events: ['cart_status_updated'] }),
    ),
  );
  t.is(same.revision, 1);
  t.deepEqual(same.webhook, changed.webhook);
  await appendsNothing(t, inspect, async () => ok(t, await patch({})));

  // A new token is sealed again; only it is in the change.
  const rekeyed = await ok(t, await patch({ auth_token: 'token-two' }));
  t.is(rekeyed.revision, 2);
  t.false(JSON.stringify(rekeyed).includes('token-two'));
  events = await webhookEvents(inspect, id);
  const change = events[2].data as Json;
  t.deepEqual(Object.keys(change).sort(), ['auth_token_encrypted', 'changed_at', 'webhook_id']);
  t.is(box.decrypt(change.auth_token_encrypted, `webhook:${id}:auth_token`), 'token-two');

  // Disable, again (nothing more), enable; with a change in the same request.
  const disabled = await ok(t, await patch({ enabled: false }));
  t.false(disabled.webhook.enabled);
  t.is(disabled.webhook.disabled_reason, 'operator');
  await appendsNothing(t, inspect, async () => ok(t, await patch({ enabled: false })));
  const enabled = await ok(t, await patch({ enabled: true, events: BOTH }));
  t.true(enabled.webhook.enabled);
  t.is(enabled.webhook.disabled_reason, null);
  t.deepEqual(enabled.webhook.events, BOTH);
  events = await webhookEvents(inspect, id);
  t.deepEqual(
    events.map((e) => e.type),
    [
      'WebhookSubscriptionCreated',
      'WebhookSubscriptionChanged',
      'WebhookSubscriptionChanged',
      'WebhookSubscriptionDisabled',
      'WebhookSubscriptionChanged',
      'WebhookSubscriptionEnabled',
    ],
  );
  t.is((events[3].data as Json).reason, 'operator');
  const shown = await ok(t, await svc.call('GET', `${ADMIN}/webhooks/${id}`));
  t.deepEqual(shown.webhook, enabled.webhook);
  t.is(shown.revision, 5);

  // Refusals append nothing: an unknown field, bad values, unknown stores (also beside `enabled`),
  // a stale If-Match, an unknown id.
  const refuse = async (res: Promise<Response>, status: number, code: string) =>
    appendsNothing(t, inspect, async () => problem(t, await res, status, code));
  const unknownField = await refuse(patch({ signing_secret: 'x' }), 422, 'validation_failed');
  t.deepEqual(unknownField.errors, [{ field: 'signing_secret', message: 'unknown field' }]);
  await refuse(patch({ enabled: 'no' }), 422, 'validation_failed');
  await refuse(patch({ store_ids: [] }), 422, 'validation_failed');
  await refuse(patch({ auth_token: '' }), 422, 'validation_failed');
  await refuse(patch({ url: 'ftp://127.0.0.1/' }), 422, 'invalid_url');
  const unknownStore = await refuse(patch({ store_ids: [10, 77], enabled: false }), 422, 'unknown_store_id');
  t.deepEqual(unknownStore.store_ids, [77]);
  t.true((await ok(t, await svc.call('GET', `${ADMIN}/webhooks/${id}`))).webhook.enabled);
  const stale = await refuse(patch({ enabled: false }, { 'if-match': '"1"' }), 412, 'revision_mismatch');
  t.is(stale.current_revision, 5);
  await refuse(
    svc.call('PATCH', `${ADMIN}/webhooks/${UNKNOWN}`, { enabled: false }),
    404,
    'webhook_not_found',
  );
  // A matching If-Match applies.
  t.false((await ok(t, await patch({ enabled: false }, { 'if-match': '"5"' }))).webhook.enabled);
});

test('POST /webhooks/{id}/rotate-secret shows a new secret once and seals it', async (t) => {
  const svc = await startService(t);
  await seedStores(t, svc, [10]);
  const inspect = await svc.openStore();
  const box = await secretBox(svc);
  const created = await create(t, svc, { url: LOCAL_URL, auth_token: 'tok', store_ids: [10] });
  const id = created.webhook.webhook_id as string;

  const res = await svc.call('POST', `${ADMIN}/webhooks/${id}/rotate-secret`);
  const rotated = await ok(t, res);
  t.deepEqual(Object.keys(rotated).sort(), ['position', 'revision', 'signing_secret', 'webhook']);
  t.regex(rotated.signing_secret, SECRET);
  t.not(rotated.signing_secret, created.signing_secret);
  t.is(rotated.revision, 1);
  t.is(res.headers.get('etag'), '"1"');
  const [, event] = await webhookEvents(inspect, id);
  t.is(event.type, 'WebhookSigningSecretRotated');
  t.is(
    box.decrypt((event.data as Json).signing_secret_encrypted, `webhook:${id}:signing_secret`),
    rotated.signing_secret,
  );

  await appendsNothing(t, inspect, async () =>
    problem(t, await svc.call('POST', `${ADMIN}/webhooks/${id}/rotate-secret`, { secret: 'mine' }), 422),
  );
  await appendsNothing(t, inspect, async () =>
    problem(
      t,
      await svc.call('POST', `${ADMIN}/webhooks/${UNKNOWN}/rotate-secret`),
      404,
      'webhook_not_found',
    ),
  );
});

test('DELETE /webhooks/{id} removes the subscription; every later command on it is 404', async (t) => {
  const svc = await startService(t);
  await seedStores(t, svc, [10]);
  const inspect = await svc.openStore();
  const kept = await create(t, svc, { url: LOCAL_URL, auth_token: 'tok', store_ids: [10] });
  const gone = await create(t, svc, { url: LOCAL_URL, auth_token: 'tok', store_ids: [10] });
  const id = gone.webhook.webhook_id as string;

  const removed = await ok(t, await svc.call('DELETE', `${ADMIN}/webhooks/${id}`));
  t.is(removed.webhook_id, id);
  t.true(removed.removed);
  t.regex(removed.removed_at, ISO);
  t.is(removed.revision, 1);
  t.deepEqual(
    (await ok(t, await svc.call('GET', `${ADMIN}/webhooks`))).webhooks.map((w: Json) => w.webhook_id),
    [kept.webhook.webhook_id],
  );

  for (const [method, url, body] of [
    ['GET', `/webhooks/${id}`, undefined],
    ['PATCH', `/webhooks/${id}`, { enabled: true }],
    ['POST', `/webhooks/${id}/rotate-secret`, undefined],
    ['DELETE', `/webhooks/${id}`, undefined],
    ['DELETE', `/webhooks/${UNKNOWN}`, undefined],
  ] as const) {
    await appendsNothing(t, inspect, async () =>
      problem(t, await svc.call(method, `${ADMIN}${url}`, body), 404, 'webhook_not_found'),
    );
  }
});

test('the auth token and the signing secret never appear in plain text in events, logs, listings or idempotency records', async (t) => {
  const svc = await startService(t);
  await seedStores(t, svc, [10, 11]);
  const inspect = await svc.openStore();
  const tokens = ['receiver-token-AAAAAAAA', 'receiver-token-BBBBBBBB', 'receiver-token-CCCCCCCC'];
  const secrets: string[] = [];

  // Created with an Idempotency-Key, then retried: the replay cannot show the secret again.
  const headers = { 'idempotency-key': 'create-webhook-1' };
  const body = { url: LOCAL_URL, auth_token: tokens[0], store_ids: [10] };
  const first = await create(t, svc, body, headers);
  secrets.push(first.signing_secret);
  const replay = await svc.call('POST', `${ADMIN}/webhooks`, body, headers);
  t.is(replay.status, 201);
  t.is(replay.headers.get('idempotent-replayed'), 'true');
  const replayed = await json(replay);
  t.is(replayed.signing_secret, null);
  t.deepEqual(replayed.webhook, first.webhook);
  const id = first.webhook.webhook_id as string;

  // A refusal recorded under an Idempotency-Key must not echo the token either.
  const refused = await svc.call(
    'POST',
    `${ADMIN}/webhooks`,
    { ...body, auth_token: tokens[2], store_ids: [99] },
    { 'idempotency-key': 'create-webhook-2' },
  );
  t.is(refused.status, 422);

  const rotateHeaders = { 'idempotency-key': 'rotate-1' };
  const rotated = await ok(
    t,
    await svc.call('POST', `${ADMIN}/webhooks/${id}/rotate-secret`, undefined, rotateHeaders),
  );
  secrets.push(rotated.signing_secret);
  const rotateReplay = await json(
    await svc.call('POST', `${ADMIN}/webhooks/${id}/rotate-secret`, undefined, rotateHeaders),
  );
  t.is(rotateReplay.signing_secret, null);
  await ok(t, await svc.call('PATCH', `${ADMIN}/webhooks/${id}`, { auth_token: tokens[1], enabled: false }));

  const everything = JSON.stringify(await readEverything(inspect));
  t.true(everything.includes('IdempotentResponseRecorded'), 'idempotency records are in the scan');
  const listing = JSON.stringify([
    await json(await svc.call('GET', `${ADMIN}/webhooks`)),
    await json(await svc.call('GET', `${ADMIN}/webhooks/${id}`)),
  ]);
  const logs = svc.logs();
  t.true(logs.length > 0);
  for (const secret of [...tokens, ...secrets, ...secrets.map((s) => s.slice('whsec_'.length))]) {
    t.false(everything.includes(secret), `event store holds ${secret.slice(0, 10)}…`);
    t.false(everything.includes(JSON.stringify(secret).slice(1, -1)), 'nor JSON-escaped');
    t.false(logs.includes(secret), `logs hold ${secret.slice(0, 10)}…`);
    t.false(listing.includes(secret), `listing holds ${secret.slice(0, 10)}…`);
  }
  t.false(listing.includes('encrypted'), 'listings do not even show the ciphertexts');
});
