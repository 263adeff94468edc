/**
 * Secrets stay secret: an API key is shown once, in the answer that issued it, and never appears in
 * the event store, the logs (at debug level) or an admin listing; only its SHA-256 hash is stored. The
 * operator token never appears in the logs, whatever form a client sends it in. A webhook's auth token
 * and signing secret reach the receiver and nothing else: not an event (in any encoding, anywhere in
 * the store's files), a log line, a listing, a delivery view, or a refusal that quotes a request.
 */
import { createHash, randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { SECRET_KEY_FILE } from '../../cli/config.ts';
import type { EventStore, RecordedEvent } from '../../eventstore/port.ts';
import { caughtUp } from '../support/brand-partner.ts';
import {
  addItem,
  checkOut,
  createCart,
  identify,
  move,
  PICKUP_MOVES,
  seedCatalog as seedCarts,
  ticking,
} from '../support/cart-world.ts';
import { startService, type TestService } from '../support/service.ts';
import { startReceiver } from '../support/webhook-receiver.ts';
import { verifyWebhook } from '../webhooks/verify-signature.ts';

const ADMIN = '/admin/v1';

// biome-ignore lint/suspicious/noExplicitAny: response bodies are checked field by field
type Json = Record<string, any>;

async function seedCatalog(t: ExecutionContext, svc: TestService): Promise<void> {
  t.is((await svc.call('PUT', '/platform/v1/brands/1', { name: 'Kiva' })).status, 201);
  const store = await svc.call('PUT', '/platform/v1/stores/10', {
    name: 'Green Store',
    address: '1 Market St',
    city: 'San Francisco',
    state: 'CA',
    zip: '94103',
    lat: 37.77,
    long: -122.41,
  });
  t.is(store.status, 201);
}

async function post(
  t: ExecutionContext,
  svc: TestService,
  path: string,
  body?: Json,
  headers: Record<string, string> = {},
): Promise<Json> {
  const res = await svc.call('POST', `${ADMIN}${path}`, body, headers);
  const out = (await res.json()) as Json;
  t.is(res.status, 201, JSON.stringify(out));
  return out;
}

/** Every event of `$all`, page by page. */
async function readEverything(store: EventStore): Promise<RecordedEvent[]> {
  const all: RecordedEvent[] = [];
  let after = 0;
  for (;;) {
    const page = await store.readAll({ after, maxCount: 7 });
    if (page.length === 0) return all;
    all.push(...page);
    after = page[page.length - 1].position;
  }
}

/** The key and its random part (in case something stored it without the `pds_key_` prefix). */
const forms = (key: string) => [key, key.slice('pds_key_'.length)];

const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');

interface Issued {
  keys: string[];
  /** key_id → key */
  byId: Map<string, string>;
  partnerIds: string[];
}

/**
 * Registers partners and issues, rotates and revokes keys, some of the requests with an
 * `Idempotency-Key` (as a careful client sends on every POST) and one of them retried.
 */
async function issueKeys(t: ExecutionContext, svc: TestService): Promise<Issued> {
  const byId = new Map<string, string>();
  const partnerIds: string[] = [];
  const note = (partnerOrKey: Json, apiKey: string) => {
    const key = partnerOrKey.partner ? partnerOrKey.partner.keys.at(-1) : partnerOrKey.key;
    byId.set(key.key_id, apiKey);
  };

  const brand = await post(t, svc, '/partners', { name: 'Kiva', kind: 'brand', brand_ids: [1] });
  note(brand, brand.api_key);
  const store = await post(
    t,
    svc,
    '/partners',
    { name: 'POS', kind: 'store_operator', store_ids: [10] },
    { 'Idempotency-Key': 'register-pos' },
  );
  note(store, store.api_key);
  const feed = await post(t, svc, '/partners', { name: 'Feed', kind: 'brand_feed', all_brands: true });
  note(feed, feed.api_key);
  partnerIds.push(brand.partner.partner_id, store.partner.partner_id, feed.partner.partner_id);

  const brandId = brand.partner.partner_id;
  const storeId = store.partner.partner_id;
  const second = await post(t, svc, `/partners/${brandId}/keys`);
  note(second, second.api_key);
  const third = await post(t, svc, `/partners/${storeId}/keys`, undefined, {
    'Idempotency-Key': 'issue-pos-2',
  });
  note(third, third.api_key);
  const rotated = await post(t, svc, `/partners/${brandId}/keys/${brand.partner.keys[0].key_id}/rotate`);
  note(rotated, rotated.api_key);
  const rotatedAgain = await post(t, svc, `/partners/${storeId}/keys/${third.key.key_id}/rotate`, undefined, {
    'Idempotency-Key': 'rotate-pos-2',
  });
  note(rotatedAgain, rotatedAgain.api_key);
  const revoked = await svc.call('DELETE', `${ADMIN}/partners/${brandId}/keys/${second.key.key_id}`);
  t.is(revoked.status, 200);

  // A retried registration (same Idempotency-Key, same body) registers nothing new.
  const retry = await svc.call(
    'POST',
    `${ADMIN}/partners`,
    { name: 'POS', kind: 'store_operator', store_ids: [10] },
    { 'Idempotency-Key': 'register-pos' },
  );
  t.is(retry.status, 201);
  t.is(retry.headers.get('idempotent-replayed'), 'true');
  const replayed = (await retry.json()) as Json;
  t.is(replayed.partner.partner_id, storeId);
  // The key was shown once and only its hash kept: the replay cannot show it again.
  t.is(replayed.api_key, null);
  t.deepEqual({ ...replayed, api_key: store.api_key }, store);

  const keys = [...byId.values()];
  t.is(new Set(keys).size, keys.length, 'every key differs');
  t.true(keys.length >= 7);
  return { keys, byId, partnerIds };
}

test('no API key appears in the event store, the logs or the admin listings', async (t) => {
  const svc = await startService(t);
  await seedCatalog(t, svc);
  const { keys, partnerIds } = await issueKeys(t, svc);

  // Partners using their keys where they do not belong (the admin API) must not log them either.
  for (const key of keys.slice(0, 3)) {
    t.is(
      (await svc.call('GET', `${ADMIN}/partners`, undefined, { authorization: `Bearer ${key}` })).status,
      401,
    );
    t.is(
      (await svc.call('GET', `${ADMIN}/partners?api_key=${key}`, undefined, { authorization: key })).status,
      401,
    );
  }

  const inspect = await svc.openStore();
  const events = await readEverything(inspect);
  t.is(events[events.length - 1].position, await inspect.headPosition(), 'read to the end');
  t.true(events.some((e) => e.type === 'PartnerKeyRotated'));
  for (const e of events) {
    const text = JSON.stringify({ stream: e.streamId, type: e.type, data: e.data, metadata: e.metadata });
    for (const key of keys) {
      for (const form of forms(key)) {
        t.false(text.includes(form), `${e.type} in ${e.streamId} at ${e.position} holds an API key`);
      }
    }
  }

  const logs = svc.logs();
  t.true(logs.includes('"level":20'), 'debug lines are captured');
  t.true(logs.includes('/admin/v1/partners'), 'requests are logged');
  for (const key of keys) for (const form of forms(key)) t.false(logs.includes(form), 'a key in the logs');

  const listings = [await (await svc.call('GET', `${ADMIN}/partners`)).text()];
  for (const kind of ['brand', 'store_operator', 'brand_feed'])
    listings.push(await (await svc.call('GET', `${ADMIN}/partners?kind=${kind}&limit=1`)).text());
  for (const id of partnerIds) listings.push(await (await svc.call('GET', `${ADMIN}/partners/${id}`)).text());
  for (const text of listings) {
    for (const key of keys) {
      for (const form of forms(key)) t.false(text.includes(form), 'a key in a listing');
      t.false(text.includes(sha256(key)), 'a key hash in a listing');
    }
  }
});

test('what is stored of a key is its SHA-256 hash and a 12-character prefix', async (t) => {
  const svc = await startService(t);
  await seedCatalog(t, svc);
  const { byId } = await issueKeys(t, svc);
  const inspect = await svc.openStore();
  const stored = (await readEverything(inspect)).filter(
    (e) => e.type === 'PartnerKeyIssued' || e.type === 'PartnerKeyRotated',
  );
  const seen = new Set<string>();
  for (const e of stored) {
    const data = e.data as Json;
    const key = byId.get(data.key_id);
    t.truthy(key, `an issued key ${data.key_id} the test saw`);
    if (!key) continue;
    seen.add(data.key_id);
    t.is(data.key_hash, sha256(key));
    t.regex(data.key_hash, /^[0-9a-f]{64}$/);
    t.is(data.key_prefix, key.slice(0, 12));
    t.deepEqual(
      Object.keys(data)
        .filter((k) => /key/.test(k))
        .sort(),
      e.type === 'PartnerKeyRotated'
        ? ['key_hash', 'key_id', 'key_prefix', 'old_key_id']
        : ['key_hash', 'key_id', 'key_prefix'],
    );
  }
  t.is(seen.size, byId.size, 'every issued key was stored once');
});

test('the operator token never appears in the logs, whatever form it is sent in', async (t) => {
  const svc = await startService(t);
  const token = svc.token;
  t.true(token.length >= 32);
  const attempts: { method: string; path: string; headers: Record<string, string>; body?: unknown }[] = [];
  const paths = [
    `${ADMIN}/partners`,
    `${ADMIN}/partners/00000000-0000-4000-8000-000000000000`,
    '/platform/v1/brands/1',
    '/admin/v1/nowhere',
    '/healthz',
  ];
  const wrongForms: Record<string, string>[] = [
    { authorization: `Token ${token}` },
    { authorization: token },
    { authorization: `Bearer ${token} ${token}` },
    { authorization: `Bearer ${token}x` },
    { authorization: `Bearer x${token}` },
    { authorization: `Basic ${Buffer.from(`operator:${token}`).toString('base64')}` },
    { authorization: `Basic ${token}` },
    { 'x-api-key': token },
    { 'x-operator-token': token },
    { cookie: `token=${token}` },
  ];
  for (const path of paths) {
    for (const headers of wrongForms) {
      attempts.push({ method: 'GET', path, headers });
      attempts.push({ method: 'POST', path, headers, body: { token } });
    }
    attempts.push({
      method: 'GET',
      path: `${path}?token=${token}`,
      headers: { authorization: 'Bearer nope' },
    });
    attempts.push({ method: 'GET', path: `${path}?access_token=${token}`, headers: {} });
  }
  for (const a of attempts) {
    const { authorization, ...rest } = a.headers;
    const res = await fetch(`${svc.base}${a.path}`, {
      method: a.method,
      headers: {
        ...(authorization ? { authorization } : {}),
        ...rest,
        ...(a.body ? { 'content-type': 'application/json' } : {}),
      },
      body: a.body ? JSON.stringify(a.body) : undefined,
    });
    const text = await res.text();
    if (!a.path.startsWith('/healthz'))
      t.true(
        res.status === 401 || res.status === 404 || res.status === 405,
        `${a.method} ${a.path}: ${res.status}`,
      );
    t.false(text.includes(token), 'the answer does not echo the token');
  }
  // And in the right form, with refusals behind the auth that carry the token in a body or query.
  t.is((await svc.call('POST', `${ADMIN}/partners`, `{"name":"${token}",`)).status, 400);
  t.is((await svc.call('POST', `${ADMIN}/partners`, { name: 'x', kind: token })).status, 422);
  t.is((await svc.call('GET', `${ADMIN}/partners?cursor=${token}`)).status, 400);
  t.is((await svc.call('GET', `${ADMIN}/partners`)).status, 200);

  const logs = svc.logs();
  t.true(logs.includes('"status":401'), 'the refusals are logged');
  t.true(logs.includes('"level":20'), 'debug lines are captured');
  t.false(logs.includes(token), 'the operator token is in the logs');
  t.false(logs.includes(Buffer.from(`operator:${token}`).toString('base64')));
});

// ---- webhook secrets ---------------------------------------------------------------------------

/**
 * Every way a secret could be written down: as is, JSON-escaped, base64, base64url and hex of its
 * UTF-8, and for a prefixed secret (`whsec_…`, `pds_key_…`) its random part and the bytes it encodes.
 */
function encodings(secret: string): { text: string[]; bytes: Buffer[] } {
  const utf8 = Buffer.from(secret, 'utf8');
  const text = [
    secret,
    JSON.stringify(secret).slice(1, -1),
    utf8.toString('base64'),
    utf8.toString('base64url'),
    utf8.toString('hex'),
  ];
  const bytes: Buffer[] = [];
  const m = /^(whsec_|pds_key_)(.+)$/.exec(secret);
  if (m) {
    const random = Buffer.from(m[2], m[1] === 'whsec_' ? 'base64' : 'base64url');
    text.push(m[2], random.toString('hex'), random.toString('base64'), random.toString('base64url'));
    bytes.push(random);
  }
  return { text: [...new Set(text)], bytes };
}

/** Which secrets (by name) appear in `haystack`, in which encoding (raw bytes: of a prefixed secret's random part). */
function found(haystack: string | Buffer, secrets: Record<string, string>): string[] {
  const buffer = typeof haystack === 'string' ? Buffer.from(haystack, 'utf8') : haystack;
  const hits: string[] = [];
  for (const [name, secret] of Object.entries(secrets)) {
    const { text, bytes } = encodings(secret);
    for (const form of text) if (buffer.includes(Buffer.from(form, 'utf8'))) hits.push(`${name} as ${form}`);
    for (const raw of bytes) if (buffer.includes(raw)) hits.push(`${name} as raw bytes`);
  }
  return hits;
}

/** The store's files as bytes: the database and its write-ahead log (every table, every page). */
async function storeFiles(svc: TestService): Promise<Record<string, Buffer>> {
  const files: Record<string, Buffer> = {};
  for (const name of ['events.db', 'events.db-wal']) {
    try {
      files[name] = await readFile(path.join(svc.dataDir, name));
    } catch (err) {
      if ((err as { code?: string }).code !== 'ENOENT') throw err;
    }
  }
  return files;
}

const token = (label: string) => `${label}-${randomBytes(24).toString('base64url')}`;

test('webhook auth tokens and signing secrets reach the receiver and appear nowhere else', async (t) => {
  t.timeout(60_000);
  const svc = await startService(t, { env: { PDS_WEBHOOK_RETRY_SCHEDULE: '0s,0s,0s' } });
  await seedCarts(svc, [1]);
  const receiver = await startReceiver(t);
  const secrets: Record<string, string> = {
    operator: svc.token,
    secret_key: (await readFile(path.join(svc.dataDir, SECRET_KEY_FILE), 'utf8')).trim(),
    token1: token('first-token'),
    token2: token('second-token'),
    token3: token('removed-token'),
  };
  const body = (extra: Json = {}) => ({ url: receiver.url, store_ids: [1], ...extra });

  // Created with an Idempotency-Key and retried: the replay cannot show the secret again.
  const created = await post(t, svc, '/webhooks', body({ auth_token: secrets.token1 }), {
    'Idempotency-Key': 'create-hook',
  });
  secrets.secret1 = created.signing_secret;
  const id = created.webhook.webhook_id as string;
  const replay = await svc.call('POST', `${ADMIN}/webhooks`, body({ auth_token: secrets.token1 }), {
    'Idempotency-Key': 'create-hook',
  });
  t.is(replay.headers.get('idempotent-replayed'), 'true');
  t.is(((await replay.json()) as Json).signing_secret, null);
  // The token changed (re-sending it records nothing), the secret rotated.
  for (let i = 0; i < 2; i++) {
    const patched = await svc.call('PATCH', `${ADMIN}/webhooks/${id}`, { auth_token: secrets.token2 });
    t.is(patched.status, 200);
  }
  const rotated = await svc.call('POST', `${ADMIN}/webhooks/${id}/rotate-secret`, undefined, {
    'Idempotency-Key': 'rotate-hook',
  });
  t.is(rotated.status, 200);
  secrets.secret2 = ((await rotated.json()) as Json).signing_secret;
  // A subscription removed: its secrets too stay out of everything.
  const removed = await post(t, svc, '/webhooks', body({ auth_token: secrets.token3 }));
  secrets.secret3 = removed.signing_secret;
  t.is((await svc.call('DELETE', `${ADMIN}/webhooks/${removed.webhook.webhook_id}`)).status, 200);
  t.is(new Set(Object.values(secrets)).size, Object.keys(secrets).length, 'every secret differs');

  // A cart through checkout to its review; the first attempt fails and is retried.
  receiver.script({ status: 500, body: 'try again' });
  const cart = await createCart(svc, 1);
  await addItem(svc, cart);
  await identify(svc, cart);
  await checkOut(svc, cart);
  for (const status of PICKUP_MOVES)
    await move(svc, cart, status, status === 'with_review' ? { rating: 5 } : {});
  const received = await ticking(svc, () => receiver.waitFor(1 + 1 + PICKUP_MOVES.length));
  // The receiver got the current token and secret (so the test looks where they really are).
  for (const r of received) {
    t.is(r.headers.authorization, `Bearer ${secrets.token2}`);
    t.deepEqual(verifyWebhook(r.headers, r.raw, secrets.secret2, Math.floor(Date.now() / 1000)), {
      valid: true,
    });
  }
  // The operator's views that send: a test request, a redelivery, a recovery.
  t.is((await svc.call('POST', `${ADMIN}/webhooks/${id}/test`, { event: 'cart_abandoned' })).status, 200);
  await caughtUp(t, svc);
  const deliveries = ((await (await svc.call('GET', `${ADMIN}/webhooks/${id}/deliveries`)).json()) as Json)
    .deliveries as Json[];
  t.is(deliveries.length, 1 + PICKUP_MOVES.length);
  t.true(
    deliveries.some((d) => d.attempts.length === 2),
    'a delivery was retried',
  );
  t.is(
    (await svc.call('POST', `${ADMIN}/webhooks/deliveries/${deliveries[0].delivery_id}/redeliver`)).status,
    202,
  );
  await ticking(svc, () => receiver.waitFor(received.length + 2));
  t.is(
    (await svc.call('POST', `${ADMIN}/webhooks/${id}/recover`, { since: '2020-01-01T00:00:00Z' })).status,
    202,
  );
  await caughtUp(t, svc);

  const views: Record<string, string> = {};
  for (const url of [
    '/webhooks',
    '/webhooks?store_id=1',
    '/webhooks?enabled=true',
    `/webhooks/${id}`,
    `/webhooks/${id}/deliveries`,
    `/webhooks/${id}/deliveries?status=delivered,failed,parked,pending,in_flight`,
    ...deliveries.map((d) => `/webhooks/deliveries/${d.delivery_id}`),
    `/carts/${cart.uuid}/history`,
    '/projections',
  ]) {
    const res = await svc.call('GET', `${ADMIN}${url}`);
    t.is(res.status, 200, url);
    views[url] = await res.text();
  }
  views['/metrics'] = await (await fetch(`${svc.base}/metrics`)).text();
  t.true(views[`/webhooks/${id}/deliveries`].includes('try again'), 'the listing shows response excerpts');
  for (const [url, text] of Object.entries(views)) t.deepEqual(found(text, secrets), [], `GET ${url}`);

  const inspect = await svc.openStore();
  const events = await readEverything(inspect);
  t.true(events.some((e) => e.type === 'WebhookDeliveryAttempted'));
  for (const e of events) {
    const text = JSON.stringify({ stream: e.streamId, type: e.type, data: e.data, metadata: e.metadata });
    t.deepEqual(found(text, secrets), [], `${e.type} in ${e.streamId} at ${e.position}`);
  }
  // The files themselves: subscription checkpoints, parked messages, free pages, the WAL.
  const files = await storeFiles(svc);
  t.true(Object.keys(files).length > 0);
  for (const [name, bytes] of Object.entries(files)) t.deepEqual(found(bytes, secrets), [], name);

  const logs = svc.logs();
  t.true(logs.includes('"level":20') && logs.includes('/admin/v1/webhooks'), 'debug lines are captured');
  t.deepEqual(found(logs, secrets), [], 'the logs');
});

test('a refusal never quotes the secret its request carried, nor records it', async (t) => {
  const svc = await startService(t);
  await seedCatalog(t, svc);
  const secret = token('auth-token');
  const apiKey = (await post(t, svc, '/partners', { name: 'Kiva', kind: 'brand', brand_ids: [1] })).api_key;
  const secrets = { secret, apiKey, operator: svc.token };
  const url = 'http://127.0.0.1:9/hooks';
  const hook = await post(t, svc, '/webhooks', { url, auth_token: token('kept'), store_ids: [10] });
  const hookPath = `${ADMIN}/webhooks/${hook.webhook.webhook_id}`;

  const refusals: { method: string; url: string; body?: unknown; headers?: Record<string, string> }[] = [
    // Malformed JSON around the token.
    { method: 'POST', url: `${ADMIN}/webhooks`, body: `{"url":"${url}","auth_token":"${secret}",` },
    // A valid token beside an invalid field.
    {
      method: 'POST',
      url: `${ADMIN}/webhooks`,
      body: { url: 'ftp://x', auth_token: secret, store_ids: [10] },
    },
    { method: 'POST', url: `${ADMIN}/webhooks`, body: { url, auth_token: secret, store_ids: [999] } },
    {
      method: 'POST',
      url: `${ADMIN}/webhooks`,
      body: { url, auth_token: secret, store_ids: [10], x: secret },
    },
    // An invalid token: surrounding space, a control character, too long, not a string.
    { method: 'POST', url: `${ADMIN}/webhooks`, body: { url, auth_token: ` ${secret}`, store_ids: [10] } },
    { method: 'POST', url: `${ADMIN}/webhooks`, body: { url, auth_token: `${secret}\n`, store_ids: [10] } },
    {
      method: 'POST',
      url: `${ADMIN}/webhooks`,
      body: { url, auth_token: secret.repeat(200), store_ids: [10] },
    },
    { method: 'POST', url: `${ADMIN}/webhooks`, body: { url, auth_token: [secret], store_ids: [10] } },
    { method: 'PATCH', url: hookPath, body: { auth_token: secret, enabled: secret } },
    { method: 'PATCH', url: hookPath, body: { auth_token: { $gt: secret } } },
    // API keys and the operator token where they do not belong.
    { method: 'POST', url: `${ADMIN}/partners`, body: { name: 'x', kind: apiKey } },
    { method: 'POST', url: `${ADMIN}/partners`, body: { name: apiKey.repeat(10), kind: 'brand' } },
    { method: 'PATCH', url: `${ADMIN}/partners/${apiKey}`, body: { rate_limit_per_minute: 1 } },
    {
      method: 'GET',
      url: `/partner/brand/v1/stores?cursor=${apiKey}`,
      headers: { authorization: `Bearer ${apiKey}` },
    },
    {
      method: 'GET',
      url: `/partner/brand/v1/stores?limit=${apiKey}`,
      headers: { authorization: `Bearer ${apiKey}` },
    },
    { method: 'GET', url: '/partner/brand/v1/stores', headers: { authorization: `Bearer ${svc.token}` } },
    { method: 'GET', url: '/partner/store/v1/specials', headers: { authorization: `Bearer ${apiKey}` } },
    { method: 'PUT', url: '/platform/v1/brands/1', body: { name: 'x', api_key: apiKey } },
    // Credentials in a path: not logged, not quoted by the 404.
    { method: 'GET', url: `${ADMIN}/webhooks/${secret}` },
    { method: 'DELETE', url: `${ADMIN}/partners/${apiKey}/keys/${apiKey}` },
    {
      method: 'GET',
      url: `/partner/brand/v1/stores/${apiKey}/menu_products`,
      headers: { authorization: `Bearer ${apiKey}` },
    },
    { method: 'GET', url: `/${apiKey}` },
    { method: 'POST', url: `/${svc.token}/${secret}`, body: {} },
    { method: 'GET', url: `/admin/v1/${encodeURIComponent(`Bearer ${svc.token}`)}` },
  ];
  let checked = 0;
  for (const r of refusals) {
    // Each once as is and once with an Idempotency-Key, whose record of the answer is an event.
    for (const key of [undefined, `retry-${checked}`]) {
      const res = await svc.call(r.method, r.url, r.body, {
        ...(key && r.method === 'POST' ? { 'Idempotency-Key': key } : {}),
        ...r.headers,
      });
      const text = await res.text();
      t.true(
        res.status >= 400 && res.status < 500,
        `${r.method} ${r.url}: ${res.status} ${text.slice(0, 200)}`,
      );
      t.deepEqual(found(text, secrets), [], `${r.method} ${r.url} answered ${text.slice(0, 300)}`);
      checked += 1;
    }
  }
  const inspect = await svc.openStore();
  const recorded = (await readEverything(inspect)).filter((e) => e.type === 'IdempotentResponseRecorded');
  t.true(
    recorded.some((e) => (e.data as Json).status === 422),
    'refusals were recorded under their keys',
  );
  for (const e of await readEverything(inspect)) {
    const text = JSON.stringify({ data: e.data, metadata: e.metadata });
    t.deepEqual(found(text, { secret }), [], `${e.type} in ${e.streamId}`);
  }
  t.deepEqual(found(svc.logs(), { secret, operator: svc.token }), [], 'the logs');
  t.deepEqual(found(svc.logs(), { apiKey }), [], 'the logs');
});

// A receiver that quotes the request in its answer (`401 invalid token Bearer …`, a framework's debug
// page) puts the auth token into the response excerpt, which the delivery worker records in
// `WebhookDeliveryAttempted` and the delivery listing shows, and which the admin test-send answers
// with. Both send through webhooks/send.ts, which strikes the token and the signing secret first.
test('a receiver that echoes the auth token does not get it recorded or listed', async (t) => {
  t.timeout(30_000);
  const svc = await startService(t);
  await seedCarts(svc, [1]);
  const receiver = await startReceiver(t);
  const secret = token('echoed-token');
  const hook = await post(t, svc, '/webhooks', { url: receiver.url, auth_token: secret, store_ids: [1] });
  receiver.setDefault({ status: 401, body: `invalid credentials: Bearer ${secret}` });
  const cart = await createCart(svc, 1);
  await addItem(svc, cart);
  await checkOut(svc, cart);
  await ticking(svc, () => receiver.waitFor(1));
  await caughtUp(t, svc);
  const listing = await (
    await svc.call('GET', `${ADMIN}/webhooks/${hook.webhook.webhook_id}/deliveries`)
  ).text();
  t.true(listing.includes('invalid credentials'), 'the excerpt is listed');
  t.deepEqual(found(listing, { secret }), [], 'the delivery listing');
  for (const [name, bytes] of Object.entries(await storeFiles(svc)))
    t.deepEqual(found(bytes, { secret }), [], name);
});

test('the admin test-send answer never shows the auth token or signing secret a receiver echoes', async (t) => {
  const svc = await startService(t);
  await seedCarts(svc, [1]);
  const receiver = await startReceiver(t);
  const secret = token('echoed-test-token');
  const hook = await post(t, svc, '/webhooks', { url: receiver.url, auth_token: secret, store_ids: [1] });
  const signing = hook.signing_secret as string;
  receiver.setDefault({
    status: 401,
    body: `invalid credentials: Bearer ${secret}; expected key ${signing}`,
  });
  for (const event of ['cart_status_updated', 'cart_abandoned']) {
    const res = await svc.call('POST', `${ADMIN}/webhooks/${hook.webhook.webhook_id}/test`, { event });
    t.is(res.status, 200);
    const text = await res.text();
    t.true(text.includes('invalid credentials'), 'the excerpt is shown');
    t.deepEqual(found(text, { secret, signing }), [], `the ${event} test-send answer`);
  }
  t.is(receiver.received.length, 2);
  t.is(receiver.received[0].headers.authorization, `Bearer ${secret}`, 'the receiver got the real token');
});
