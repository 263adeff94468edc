/**
 * Secrets stay secret: an API key is shown once, in the answer that issued it, and never appears in
 * the event store, the logs (at debug level) or an admin listing; only its SHA-256 hash is stored. The
 * operator token never appears in the logs, whatever form a client sends it in.
 */
import { createHash } from 'node:crypto';
import test, { type ExecutionContext } from 'ava';
import type { EventStore, RecordedEvent } from '../../eventstore/port.ts';
import { startService, type TestService } from '../support/service.ts';

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
