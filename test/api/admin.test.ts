/**
 * The admin API (`/admin/v1`, operator token) on a real service: partners and their keys, the partner
 * directory that authentication reads, and the audit history of a cart. Every refusal is a problem
 * document and appends nothing.
 */
import test, { type ExecutionContext } from 'ava';
import { waitForProjection } from '../../api/admin-support.ts';
import { API_KEY_PATTERN, hashApiKey } from '../../application/credentials.ts';
import type { PartnerRecord } from '../../domain/partner.ts';
import type { EventStore } from '../../eventstore/port.ts';
import { createProjector } from '../../projections/projector.ts';
import {
  keyByHash,
  PARTNER_KEYS,
  type PartnerKeyDoc,
  partnerKeysProjection,
} from '../../projections/read-models/partner-keys.ts';
import { openSqliteReadStore } from '../../projections/sqlite/read-store.ts';
import { problem } from '../support/admin-answers.ts';
import { startService, type TestService } from '../support/service.ts';

const ADMIN = '/admin/v1';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;
const UNKNOWN_PARTNER = '00000000-0000-4000-8000-000000000000';

// biome-ignore lint/suspicious/noExplicitAny: response bodies are checked field by field
type Json = Record<string, any>;

interface Registered {
  partner: PartnerRecord;
  api_key: string;
  revision: number;
  position: number;
}

/** Brands 1 and 2, stores 10 and 11: what partner scopes may name. */
async function seedCatalog(t: ExecutionContext, svc: TestService): Promise<void> {
  for (const id of [1, 2]) {
    const res = await svc.call('PUT', `/platform/v1/brands/${id}`, { name: `Brand ${id}` });
    t.is(res.status, 201, await res.clone().text());
  }
  for (const id of [10, 11]) {
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

async function register(t: ExecutionContext, svc: TestService, body: Json): Promise<Registered> {
  const res = await svc.call('POST', `${ADMIN}/partners`, body);
  t.is(res.status, 201, await res.clone().text());
  return (await res.json()) as Registered;
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

/**
 * What another API process authenticates with: the `partner_keys` read model, projected here on a
 * second store connection into its own read store, caught up.
 */
async function secondDirectory(t: ExecutionContext, svc: TestService) {
  const readStore = openSqliteReadStore(':memory:');
  const projector = createProjector({
    store: await svc.openStore(),
    readStore,
    projections: [partnerKeysProjection],
  });
  t.teardown(() => projector.stop());
  await projector.start();
  await projector.caughtUp;
  const keys = await readStore.collection<PartnerKeyDoc>(PARTNER_KEYS);
  return {
    /** What authentication gets for a key hash: the key's partner, kind and scope (no document id). */
    byKeyHash: async (hash: string) => {
      const doc = await keyByHash(keys, hash);
      if (!doc) return undefined;
      const { _id, ...entry } = doc;
      return entry;
    },
    waitFor: (position: number) => waitForProjection(readStore, 'partner_keys', position),
    count: () => keys.count(),
  };
}

const VALID_SCOPES: Json[] = [
  { name: 'Kiva Marketing', kind: 'brand', brand_ids: [2, 1] },
  { name: 'Brand Feed One', kind: 'brand_feed', brand_ids: [1] },
  { name: 'Brand Feed All', kind: 'brand_feed', all_brands: true },
  { name: 'Green Store POS', kind: 'store_operator', store_ids: [10, 11] },
  { name: 'Menu Syndicator', kind: 'store_menu_feed', store_ids: [11] },
];

test('POST /partners registers a partner of each kind and shows its key once', async (t) => {
  const svc = await startService(t);
  await seedCatalog(t, svc);
  const keys = new Set<string>();
  for (const body of VALID_SCOPES) {
    const res = await svc.call('POST', `${ADMIN}/partners`, body);
    const out = await json(res);
    t.is(res.status, 201, JSON.stringify(out));
    t.true((res.headers.get('content-type') ?? '').startsWith('application/json'));
    t.deepEqual(Object.keys(out).sort(), ['api_key', 'partner', 'position', 'revision']);
    const p = out.partner as Json;
    t.regex(p.partner_id, UUID);
    t.is(res.headers.get('location'), `${ADMIN}/partners/${p.partner_id}`);
    t.is(res.headers.get('etag'), `"${out.revision}"`);
    t.is(out.revision, 1, 'PartnerRegistered and PartnerKeyIssued');
    t.true(Number.isInteger(out.position) && out.position > 0);
    t.is(p.name, body.name);
    t.is(p.kind, body.kind);
    t.deepEqual(
      p.brand_ids,
      [...(body.brand_ids ?? [])].sort((a, b) => a - b),
    );
    t.deepEqual(p.store_ids, body.store_ids ?? []);
    t.is(p.all_brands, body.all_brands ?? false);
    t.is(p.rate_limit_per_minute, 600);
    t.regex(p.created_at, ISO);
    t.is(p.updated_at, p.created_at);
    t.regex(out.api_key, API_KEY_PATTERN);
    t.false(keys.has(out.api_key));
    keys.add(out.api_key);
    t.is(p.keys.length, 1);
    const [key] = p.keys as Json[];
    t.deepEqual(Object.keys(key).sort(), ['issued_at', 'key_id', 'key_prefix', 'revoked_at', 'status']);
    t.regex(key.key_id, /^key_[A-Za-z0-9_-]+$/);
    t.is(key.key_prefix, out.api_key.slice(0, 12));
    t.is(key.status, 'active');
    t.is(key.issued_at, p.created_at);
    t.is(key.revoked_at, null);
    t.false(JSON.stringify(p).includes(hashApiKey(out.api_key)), 'the record shows no key hash');
  }
  // A rate limit may be set at registration.
  const limited = await register(t, svc, {
    name: 'Slow',
    kind: 'store_operator',
    store_ids: [10],
    rate_limit_per_minute: 30,
  });
  t.is(limited.partner.rate_limit_per_minute, 30);
});

test('GET /partners pages with limit, cursor and a Link header, and filters by kind', async (t) => {
  const svc = await startService(t);
  await seedCatalog(t, svc);
  const created: Registered[] = [];
  for (let i = 0; i < 3; i++)
    created.push(await register(t, svc, { name: `Brand ${i}`, kind: 'brand', brand_ids: [1] }));
  for (let i = 0; i < 2; i++)
    created.push(await register(t, svc, { name: `Store ${i}`, kind: 'store_operator', store_ids: [10] }));
  created.push(await register(t, svc, { name: 'Feed', kind: 'brand_feed', all_brands: true }));
  const ids = created.map((c) => c.partner.partner_id).sort();

  // Default page: everything, in a stable order, no next page.
  const all = await svc.call('GET', `${ADMIN}/partners`);
  t.is(all.status, 200);
  t.is(all.headers.get('link'), null);
  const allBody = await json(all);
  t.deepEqual(Object.keys(allBody).sort(), ['next_cursor', 'partners']);
  t.is(allBody.next_cursor, null);
  t.deepEqual(
    allBody.partners.map((p: Json) => p.partner_id),
    ids,
  );
  const byId = new Map(created.map((c) => [c.partner.partner_id, c.partner]));
  for (const p of allBody.partners as Json[]) t.deepEqual(p, byId.get(p.partner_id) as unknown as Json);

  // Paging by two, following next_cursor, and checking the Link header names the same page.
  const seen: string[] = [];
  let url = `${ADMIN}/partners?limit=2`;
  let pages = 0;
  for (;;) {
    const res = await svc.call('GET', url);
    t.is(res.status, 200);
    const body = await json(res);
    pages++;
    t.true(body.partners.length <= 2);
    seen.push(...body.partners.map((p: Json) => p.partner_id));
    if (body.next_cursor === null) {
      t.is(res.headers.get('link'), null);
      break;
    }
    t.is(typeof body.next_cursor, 'string');
    const link = res.headers.get('link') ?? '';
    const m = /^<([^>]+)>; rel="next"$/.exec(link);
    t.truthy(m, `Link header: ${link}`);
    t.is(m![1], `${ADMIN}/partners?limit=2&cursor=${body.next_cursor}`);
    url = m![1];
    t.true(pages < 10);
  }
  t.deepEqual(seen, ids, 'every partner once, in order');
  t.is(pages, 3);

  // Filter by kind, paging by one through the Link header: the filter must stay on every page.
  const brands: string[] = [];
  url = `${ADMIN}/partners?kind=brand&limit=1`;
  for (let i = 0; i < 10; i++) {
    const res = await svc.call('GET', url);
    t.is(res.status, 200);
    const body = await json(res);
    for (const p of body.partners as Json[]) {
      t.is(p.kind, 'brand');
      brands.push(p.partner_id);
    }
    const link = res.headers.get('link');
    if (!link) {
      t.is(body.next_cursor, null);
      break;
    }
    url = /^<([^>]+)>/.exec(link)![1];
  }
  t.deepEqual(
    brands,
    created
      .filter((c) => c.partner.kind === 'brand')
      .map((c) => c.partner.partner_id)
      .sort(),
  );
  const feeds = await json(await svc.call('GET', `${ADMIN}/partners?kind=brand_feed`));
  t.deepEqual(
    feeds.partners.map((p: Json) => p.kind),
    ['brand_feed'],
  );
  const none = await json(await svc.call('GET', `${ADMIN}/partners?kind=store_menu_feed`));
  t.deepEqual(none, { partners: [], next_cursor: null });

  // Bad queries are 400s naming the parameter.
  for (const query of [
    'limit=0',
    'limit=501',
    'limit=x',
    'kind=shop',
    'cursor=!!!',
    'cursor=bm90LWEtdXVpZA',
  ]) {
    const body = await problem(t, await svc.call('GET', `${ADMIN}/partners?${query}`), 400);
    t.true(['invalid_parameter', 'invalid_cursor'].includes(body.code), query);
  }
});

test('GET /partners/{id} answers one partner with its revision; unknown and malformed ids are 404', async (t) => {
  const svc = await startService(t);
  await seedCatalog(t, svc);
  const created = await register(t, svc, { name: 'Feed', kind: 'brand_feed', brand_ids: [2] });
  const res = await svc.call('GET', `${ADMIN}/partners/${created.partner.partner_id}`);
  t.is(res.status, 200);
  t.is(res.headers.get('etag'), '"1"');
  t.deepEqual(await json(res), { partner: created.partner, revision: 1 });

  const unknown = await problem(t, await svc.call('GET', `${ADMIN}/partners/${UNKNOWN_PARTNER}`), 404);
  t.is(unknown.code, 'partner_not_found');
  t.true(unknown.detail.includes(UNKNOWN_PARTNER));
  for (const bad of ['42', 'not-a-uuid', `${created.partner.partner_id}x`, 'partner-1%27%20OR%201=1']) {
    await problem(t, await svc.call('GET', `${ADMIN}/partners/${bad}`), 404);
  }
});

test('PATCH /partners/{id} changes the rate limit, conditionally with If-Match', async (t) => {
  const svc = await startService(t);
  await seedCatalog(t, svc);
  const inspect = await svc.openStore();
  const created = await register(t, svc, { name: 'POS', kind: 'store_operator', store_ids: [10] });
  const id = created.partner.partner_id;

  const res = await svc.call(
    'PATCH',
    `${ADMIN}/partners/${id}`,
    { rate_limit_per_minute: 120 },
    { 'If-Match': '"1"' },
  );
  const body = await json(res);
  t.is(res.status, 200, JSON.stringify(body));
  t.is(res.headers.get('etag'), '"2"');
  t.is(body.revision, 2);
  t.is(body.partner.rate_limit_per_minute, 120);
  t.not(body.partner.updated_at, undefined);
  t.deepEqual(body.partner.keys, created.partner.keys);
  t.deepEqual((await json(await svc.call('GET', `${ADMIN}/partners/${id}`))).partner, body.partner);

  // The directory (what authentication reads) has the new limit.
  const directory = await secondDirectory(t, svc);
  t.is((await directory.byKeyHash(hashApiKey(created.api_key)))?.rate_limit_per_minute, 120);

  // Without If-Match it applies unconditionally; the same value again appends nothing.
  const again = await svc.call('PATCH', `${ADMIN}/partners/${id}`, { rate_limit_per_minute: 60 });
  t.is(again.status, 200);
  t.is((await json(again)).revision, 3);
  await appendsNothing(t, inspect, async () => {
    const same = await svc.call('PATCH', `${ADMIN}/partners/${id}`, { rate_limit_per_minute: 60 });
    t.is(same.status, 200);
    t.is((await json(same)).revision, 3);
  });

  await appendsNothing(t, inspect, async () => {
    const stale = await problem(
      t,
      await svc.call(
        'PATCH',
        `${ADMIN}/partners/${id}`,
        { rate_limit_per_minute: 90 },
        { 'If-Match': '"1"' },
      ),
      412,
      'revision_mismatch',
    );
    t.is(stale.current_revision, 3);
    await problem(
      t,
      await svc.call(
        'PATCH',
        `${ADMIN}/partners/${id}`,
        { rate_limit_per_minute: 90 },
        { 'If-Match': 'latest' },
      ),
      400,
    );
    for (const bad of [
      { rate_limit_per_minute: 0 },
      { rate_limit_per_minute: 100_001 },
      { rate_limit_per_minute: 1.5 },
      { rate_limit_per_minute: '60' },
      {},
      { rate_limit_per_minute: 60, name: 'renamed' },
    ]) {
      const p = await problem(t, await svc.call('PATCH', `${ADMIN}/partners/${id}`, bad), 422);
      t.true(Array.isArray(p.errors) && p.errors.length > 0, JSON.stringify(p));
    }
    await problem(
      t,
      await svc.call('PATCH', `${ADMIN}/partners/${UNKNOWN_PARTNER}`, { rate_limit_per_minute: 90 }),
      404,
      'partner_not_found',
    );
    await problem(t, await svc.call('PATCH', `${ADMIN}/partners/nope`, { rate_limit_per_minute: 90 }), 404);
    await problem(t, await svc.call('PATCH', `${ADMIN}/partners/${id}`, '{"rate_limit_per_minute":'), 400);
  });
  t.is((await json(await svc.call('GET', `${ADMIN}/partners/${id}`))).partner.rate_limit_per_minute, 60);
});

test('keys: issue, rotate and revoke, as the directory sees them; refusals append nothing', async (t) => {
  const svc = await startService(t);
  await seedCatalog(t, svc);
  const inspect = await svc.openStore();
  const created = await register(t, svc, { name: 'Kiva', kind: 'brand', brand_ids: [1] });
  const id = created.partner.partner_id;
  const firstKeyId = created.partner.keys[0].key_id;
  const directory = await secondDirectory(t, svc);
  t.is((await directory.byKeyHash(hashApiKey(created.api_key)))?.key_id, firstKeyId);

  // Issue a second key.
  const issuedRes = await svc.call('POST', `${ADMIN}/partners/${id}/keys`);
  const issued = await json(issuedRes);
  t.is(issuedRes.status, 201, JSON.stringify(issued));
  t.deepEqual(Object.keys(issued).sort(), ['api_key', 'key', 'position', 'revision']);
  t.regex(issued.api_key, API_KEY_PATTERN);
  t.not(issued.api_key, created.api_key);
  t.is(issued.key.key_prefix, issued.api_key.slice(0, 12));
  t.is(issued.key.status, 'active');
  t.is(issued.key.revoked_at, null);
  t.regex(issued.key.issued_at, ISO);
  t.not(issued.key.key_id, firstKeyId);
  t.is(issued.revision, 2);
  await directory.waitFor(issued.position);
  t.like(await directory.byKeyHash(hashApiKey(issued.api_key)), {
    partner_id: id,
    key_id: issued.key.key_id,
    kind: 'brand',
  });
  t.truthy(await directory.byKeyHash(hashApiKey(created.api_key)), 'the first key still works');

  // Rotate the first key: the old one is gone, the new one present, the second one untouched.
  const rotatedRes = await svc.call('POST', `${ADMIN}/partners/${id}/keys/${firstKeyId}/rotate`);
  const rotated = await json(rotatedRes);
  t.is(rotatedRes.status, 201, JSON.stringify(rotated));
  t.deepEqual(Object.keys(rotated).sort(), ['api_key', 'key', 'position', 'revision', 'revoked_key_id']);
  t.is(rotated.revoked_key_id, firstKeyId);
  t.regex(rotated.api_key, API_KEY_PATTERN);
  t.is(rotated.key.status, 'active');
  t.is(rotated.key.key_prefix, rotated.api_key.slice(0, 12));
  await directory.waitFor(rotated.position);
  t.is(await directory.byKeyHash(hashApiKey(created.api_key)), undefined, 'rotated-away key is gone');
  t.like(await directory.byKeyHash(hashApiKey(rotated.api_key)), {
    partner_id: id,
    key_id: rotated.key.key_id,
  });
  t.truthy(await directory.byKeyHash(hashApiKey(issued.api_key)));
  const afterRotate = (await json(await svc.call('GET', `${ADMIN}/partners/${id}`))).partner as Json;
  const first = afterRotate.keys.find((k: Json) => k.key_id === firstKeyId);
  t.is(first.status, 'revoked');
  t.is(first.revoked_at, rotated.key.issued_at, 'revoked and issued at the same instant');
  t.deepEqual(
    afterRotate.keys.map((k: Json) => k.key_id),
    [firstKeyId, issued.key.key_id, rotated.key.key_id],
  );

  // Revoke the second key.
  const revokedRes = await svc.call('DELETE', `${ADMIN}/partners/${id}/keys/${issued.key.key_id}`);
  const revoked = await json(revokedRes);
  t.is(revokedRes.status, 200, JSON.stringify(revoked));
  t.deepEqual(Object.keys(revoked).sort(), ['key', 'position', 'revision']);
  t.is(revoked.key.key_id, issued.key.key_id);
  t.is(revoked.key.status, 'revoked');
  t.regex(revoked.key.revoked_at, ISO);
  t.false('api_key' in revoked);
  await directory.waitFor(revoked.position);
  t.is(await directory.byKeyHash(hashApiKey(issued.api_key)), undefined, 'revoked key is gone');
  t.truthy(await directory.byKeyHash(hashApiKey(rotated.api_key)));

  await appendsNothing(t, inspect, async () => {
    // Revoking twice, or rotating a revoked key: 409.
    const twice = await problem(
      t,
      await svc.call('DELETE', `${ADMIN}/partners/${id}/keys/${issued.key.key_id}`),
      409,
      'key_revoked',
    );
    t.is(twice.key_id, issued.key.key_id);
    await problem(
      t,
      await svc.call('POST', `${ADMIN}/partners/${id}/keys/${firstKeyId}/rotate`),
      409,
      'key_revoked',
    );
    // Unknown keys: 404.
    await problem(
      t,
      await svc.call('DELETE', `${ADMIN}/partners/${id}/keys/key_doesnotexist`),
      404,
      'key_not_found',
    );
    await problem(
      t,
      await svc.call('POST', `${ADMIN}/partners/${id}/keys/key_doesnotexist/rotate`),
      404,
      'key_not_found',
    );
    // Malformed key ids: 404.
    await problem(t, await svc.call('DELETE', `${ADMIN}/partners/${id}/keys/${'k'.repeat(65)}`), 404);
    await problem(t, await svc.call('DELETE', `${ADMIN}/partners/${id}/keys/key%20one`), 404);
    // Unknown and malformed partners: 404.
    await problem(
      t,
      await svc.call('POST', `${ADMIN}/partners/${UNKNOWN_PARTNER}/keys`),
      404,
      'partner_not_found',
    );
    await problem(
      t,
      await svc.call('POST', `${ADMIN}/partners/${UNKNOWN_PARTNER}/keys/${firstKeyId}/rotate`),
      404,
      'partner_not_found',
    );
    await problem(
      t,
      await svc.call('DELETE', `${ADMIN}/partners/${UNKNOWN_PARTNER}/keys/${firstKeyId}`),
      404,
      'partner_not_found',
    );
    await problem(t, await svc.call('POST', `${ADMIN}/partners/12/keys`), 404);
    await problem(t, await svc.call('DELETE', `${ADMIN}/partners/12/keys/${firstKeyId}`), 404);
    // Key routes take no body fields.
    await problem(t, await svc.call('POST', `${ADMIN}/partners/${id}/keys`, { key: 'mine' }), 422);
    await problem(
      t,
      await svc.call('POST', `${ADMIN}/partners/${id}/keys/${rotated.key.key_id}/rotate`, { x: 1 }),
      422,
    );
  });
  t.truthy(
    await directory.byKeyHash(hashApiKey(rotated.api_key)),
    'a refused rotation leaves the key working',
  );
});

test('a partner holds at most 10 active keys', async (t) => {
  const svc = await startService(t);
  await seedCatalog(t, svc);
  const inspect = await svc.openStore();
  const created = await register(t, svc, { name: 'Many', kind: 'store_menu_feed', store_ids: [10] });
  const id = created.partner.partner_id;
  for (let i = 0; i < 9; i++) t.is((await svc.call('POST', `${ADMIN}/partners/${id}/keys`)).status, 201);
  await appendsNothing(t, inspect, async () => {
    await problem(t, await svc.call('POST', `${ADMIN}/partners/${id}/keys`), 409, 'too_many_keys');
  });
  // Rotation replaces a key, so it still works at the limit.
  const rotated = await svc.call(
    'POST',
    `${ADMIN}/partners/${id}/keys/${created.partner.keys[0].key_id}/rotate`,
  );
  t.is(rotated.status, 201);
});

test('the directory on a second connection finds a new key with its partner, kind and scope', async (t) => {
  const svc = await startService(t);
  await seedCatalog(t, svc);
  const registered: Registered[] = [];
  for (const body of VALID_SCOPES) registered.push(await register(t, svc, body));

  // Opened only after the answers: everything must be there once caught up.
  const directory = await secondDirectory(t, svc);
  for (const r of registered) {
    const found = await directory.byKeyHash(hashApiKey(r.api_key));
    t.deepEqual(
      found && { ...found, brand_ids: [...found.brand_ids], store_ids: [...found.store_ids] },
      {
        partner_id: r.partner.partner_id,
        key_id: r.partner.keys[0].key_id,
        kind: r.partner.kind,
        brand_ids: r.partner.brand_ids,
        store_ids: r.partner.store_ids,
        all_brands: r.partner.all_brands,
        rate_limit_per_minute: 600,
      },
      r.partner.kind,
    );
  }
  t.is(await directory.count(), registered.length);
  t.is(await directory.byKeyHash(hashApiKey('pds_key_' + 'A'.repeat(43))), undefined);
  t.is(
    await directory.byKeyHash(registered[0].api_key),
    undefined,
    'looked up by hash, never by the key itself',
  );

  // Rotated-away and revoked keys are not found, in a directory started after those changes too.
  const [brand, feed] = registered;
  const rotated = await json(
    await svc.call(
      'POST',
      `${ADMIN}/partners/${brand.partner.partner_id}/keys/${brand.partner.keys[0].key_id}/rotate`,
    ),
  );
  const revoked = await json(
    await svc.call(
      'DELETE',
      `${ADMIN}/partners/${feed.partner.partner_id}/keys/${feed.partner.keys[0].key_id}`,
    ),
  );
  await directory.waitFor(Math.max(rotated.position, revoked.position));
  const fresh = await secondDirectory(t, svc);
  for (const d of [directory, fresh]) {
    t.is(await d.byKeyHash(hashApiKey(brand.api_key)), undefined);
    t.is(await d.byKeyHash(hashApiKey(feed.api_key)), undefined);
    t.like(await d.byKeyHash(hashApiKey(rotated.api_key)), {
      partner_id: brand.partner.partner_id,
      key_id: rotated.key.key_id,
      kind: 'brand',
    });
    t.truthy(d.byKeyHash(hashApiKey(registered[2].api_key)), 'other partners are untouched');
  }
});

test('scope refusals per kind: 422 naming the problem, nothing appended', async (t) => {
  const svc = await startService(t);
  await seedCatalog(t, svc);
  const inspect = await svc.openStore();
  const cases: { body: Json; field: string; words: RegExp }[] = [
    { body: { kind: 'brand' }, field: 'brand_ids', words: /brand id/ },
    { body: { kind: 'brand', brand_ids: [] }, field: 'brand_ids', words: /brand id/ },
    { body: { kind: 'brand', brand_ids: [1], store_ids: [10] }, field: 'store_ids', words: /store ids/ },
    { body: { kind: 'brand', brand_ids: [1], all_brands: true }, field: 'all_brands', words: /all brands/ },
    { body: { kind: 'brand_feed' }, field: 'brand_ids', words: /all_brands/ },
    { body: { kind: 'brand_feed', all_brands: true, brand_ids: [1] }, field: 'brand_ids', words: /not both/ },
    {
      body: { kind: 'brand_feed', all_brands: true, store_ids: [10] },
      field: 'store_ids',
      words: /store ids/,
    },
    { body: { kind: 'store_operator' }, field: 'store_ids', words: /store id/ },
    {
      body: { kind: 'store_operator', store_ids: [10], brand_ids: [1] },
      field: 'brand_ids',
      words: /brand ids/,
    },
    {
      body: { kind: 'store_operator', store_ids: [10], all_brands: true },
      field: 'all_brands',
      words: /all brands/,
    },
    { body: { kind: 'store_menu_feed', store_ids: [] }, field: 'store_ids', words: /store id/ },
    {
      body: { kind: 'store_menu_feed', store_ids: [11], brand_ids: [2] },
      field: 'brand_ids',
      words: /brand ids/,
    },
    {
      body: { kind: 'store_menu_feed', store_ids: [11], all_brands: true },
      field: 'all_brands',
      words: /all brands/,
    },
  ];
  await appendsNothing(t, inspect, async () => {
    for (const c of cases) {
      const body = { name: 'Refused', ...c.body };
      const p = await problem(t, await svc.call('POST', `${ADMIN}/partners`, body), 422, 'invalid_scope');
      t.is(p.field, c.field, JSON.stringify(body));
      t.is(p.kind, c.body.kind);
      t.regex(p.detail, c.words, JSON.stringify(body));
    }

    // Ids that name nothing.
    const brands = await problem(
      t,
      await svc.call('POST', `${ADMIN}/partners`, { name: 'X', kind: 'brand', brand_ids: [1, 99, 98] }),
      422,
      'unknown_brand_id',
    );
    t.is(brands.field, 'brand_ids');
    t.deepEqual(brands.brand_ids, [98, 99]);
    t.regex(brands.detail, /98, 99/);
    const feed = await problem(
      t,
      await svc.call('POST', `${ADMIN}/partners`, { name: 'X', kind: 'brand_feed', brand_ids: [3] }),
      422,
      'unknown_brand_id',
    );
    t.deepEqual(feed.brand_ids, [3]);
    const stores = await problem(
      t,
      await svc.call('POST', `${ADMIN}/partners`, { name: 'X', kind: 'store_operator', store_ids: [10, 12] }),
      422,
      'unknown_store_id',
    );
    t.is(stores.field, 'store_ids');
    t.deepEqual(stores.store_ids, [12]);
    t.regex(stores.detail, /12/);
    await problem(
      t,
      await svc.call('POST', `${ADMIN}/partners`, { name: 'X', kind: 'store_menu_feed', store_ids: [1] }),
      422,
      'unknown_store_id',
    );

    // Malformed bodies: 422 naming the field (400 for JSON that does not parse).
    const fieldCases: { body: Json; field: string }[] = [
      { body: { kind: 'brand', brand_ids: [1] }, field: 'name' },
      { body: { name: '   ', kind: 'brand', brand_ids: [1] }, field: 'name' },
      { body: { name: 'X', brand_ids: [1] }, field: 'kind' },
      { body: { name: 'X', kind: 'retailer', brand_ids: [1] }, field: 'kind' },
      { body: { name: 'X', kind: 'brand', brand_ids: [1], scope: 'all' }, field: 'scope' },
      { body: { name: 'X', kind: 'brand', brand_ids: ['1'] }, field: 'brand_ids[0]' },
      { body: { name: 'X', kind: 'brand', brand_ids: [0] }, field: 'brand_ids[0]' },
      { body: { name: 'X', kind: 'store_operator', store_ids: 10 }, field: 'store_ids' },
      { body: { name: 'X', kind: 'brand_feed', all_brands: 'yes' }, field: 'all_brands' },
      {
        body: { name: 'X', kind: 'brand', brand_ids: [1], rate_limit_per_minute: 0 },
        field: 'rate_limit_per_minute',
      },
      { body: { name: 'X', kind: 'brand', brand_ids: [1], api_key: 'pds_key_mine' }, field: 'api_key' },
    ];
    for (const c of fieldCases) {
      const p = await problem(
        t,
        await svc.call('POST', `${ADMIN}/partners`, c.body),
        422,
        'validation_failed',
      );
      t.true(
        (p.errors as Json[]).some((e) => e.field === c.field),
        `${JSON.stringify(c.body)} → ${JSON.stringify(p.errors)}`,
      );
    }
    await problem(t, await svc.call('POST', `${ADMIN}/partners`, '{"name": "X",'), 400, 'malformed_json');
    await problem(t, await svc.call('POST', `${ADMIN}/partners`, '[]'), 422);
    await problem(t, await svc.call('POST', `${ADMIN}/partners`), 422);
  });
  t.deepEqual(await json(await svc.call('GET', `${ADMIN}/partners`)), { partners: [], next_cursor: null });
});

test('missing or wrong operator token: 401 on every admin route, nothing appended', async (t) => {
  const svc = await startService(t);
  await seedCatalog(t, svc);
  const inspect = await svc.openStore();
  const created = await register(t, svc, { name: 'Kiva', kind: 'brand', brand_ids: [1] });
  const id = created.partner.partner_id;
  const keyId = created.partner.keys[0].key_id;
  const routes: [string, string, Json?][] = [
    ['POST', '/partners', { name: 'X', kind: 'brand', brand_ids: [1] }],
    ['GET', '/partners'],
    ['GET', `/partners/${id}`],
    ['PATCH', `/partners/${id}`, { rate_limit_per_minute: 5 }],
    ['POST', `/partners/${id}/keys`],
    ['POST', `/partners/${id}/keys/${keyId}/rotate`],
    ['DELETE', `/partners/${id}/keys/${keyId}`],
    ['GET', `/carts/${UNKNOWN_PARTNER}/history`],
  ];
  const wrong: (Record<string, string> | 'none')[] = [
    'none',
    { authorization: 'Bearer not-the-token' },
    { authorization: `Bearer ${svc.token}x` },
    { authorization: `Basic ${svc.token}` },
    { authorization: svc.token },
    { authorization: 'Bearer' },
    { authorization: `Bearer ${created.api_key}` },
  ];
  await appendsNothing(t, inspect, async () => {
    for (const [method, path, body] of routes) {
      for (const headers of wrong) {
        const url = `${svc.base}${ADMIN}${path}`;
        const res =
          headers === 'none'
            ? await fetch(url, {
                method,
                headers: body ? { 'content-type': 'application/json' } : {},
                body: body ? JSON.stringify(body) : undefined,
              })
            : await svc.call(method, `${ADMIN}${path}`, body, headers);
        const p = await problem(t, res, 401, 'unauthorized');
        t.is(res.headers.get('www-authenticate'), 'Bearer realm="pds-operator"', `${method} ${path}`);
        t.false(JSON.stringify(p).includes(svc.token));
      }
    }
  });
  // Still one partner with one active key.
  const one = (await json(await svc.call('GET', `${ADMIN}/partners/${id}`))).partner as Json;
  t.is(one.rate_limit_per_minute, 600);
  t.deepEqual(
    one.keys.map((k: Json) => k.status),
    ['active'],
  );
});

/** A store with a brand, a product and a menu product priced "each": enough to fill a cart. */
async function seedMenu(t: ExecutionContext, svc: TestService): Promise<void> {
  await seedCatalog(t, svc);
  const product = await svc.call('PUT', '/platform/v1/products/100', {
    name: 'Gummies',
    brand_id: 1,
    kind: 'edible',
  });
  t.is(product.status, 201, await product.clone().text());
  const listed = await svc.call('PUT', '/platform/v1/stores/10/menu_products/1000', {
    product_id: 100,
    prices: { each: '10.00' },
  });
  t.is(listed.status, 201, await listed.clone().text());
}

test('GET /carts/{uuid}/history lists every event of a cart in order with its metadata', async (t) => {
  const svc = await startService(t);
  await seedMenu(t, svc);
  const uuid = '6f1c2b3a-4d5e-4f60-8a7b-9c0d1e2f3a4b';
  const correlation = 'checkout-flow-42';

  const steps: { method: string; path: string; body: Json; correlated: boolean }[] = [
    {
      method: 'POST',
      path: '/carts',
      body: { uuid, store_id: 10, source: { channel: 'headless', partner_id: null } },
      correlated: true,
    },
    {
      method: 'POST',
      path: `/carts/${uuid}/items`,
      body: { menu_product_id: 1000, price_id: 'each', count: 2 },
      correlated: true,
    },
    {
      method: 'POST',
      path: `/carts/${uuid}/checkout`,
      body: { reservation_mode: 'pickup' },
      correlated: false,
    },
    {
      method: 'POST',
      path: `/carts/${uuid}/status`,
      body: { status: 'preparing' },
      correlated: true,
    },
  ];
  const answers: { requestId: string; position: number; revision: number }[] = [];
  for (const s of steps) {
    const res = await svc.call(
      s.method,
      `/platform/v1${s.path}`,
      s.body,
      s.correlated ? { 'X-Correlation-Id': correlation } : {},
    );
    const body = await json(res);
    t.true(res.status === 200 || res.status === 201, `${s.path}: ${JSON.stringify(body)}`);
    answers.push({
      requestId: res.headers.get('x-request-id') ?? '',
      position: body.position,
      revision: body.revision,
    });
  }

  const res = await svc.call('GET', `${ADMIN}/carts/${uuid}/history`, undefined, {
    'X-Correlation-Id': 'ignored',
  });
  t.is(res.status, 200);
  const history = await json(res);
  t.is(history.cart_uuid, uuid);
  const events = history.events as Json[];
  // Checkout is also a status move (pending → verification): two events from one request.
  t.deepEqual(
    events.map((e) => e.type),
    ['CartCreated', 'CartItemAdded', 'CartCheckedOut', 'CartStatusChanged', 'CartStatusChanged'],
  );
  const stepOf = [0, 1, 2, 2, 3];

  // The same events, as the event store holds them.
  const inspect = await svc.openStore();
  const stored = await inspect.readStream(`cart-${uuid}`);
  t.is(events.length, stored.length);
  events.forEach((e, i) => {
    const s = stored[i];
    const n = stepOf[i];
    const step = steps[n];
    const last = stepOf.lastIndexOf(n) === i;
    t.deepEqual(Object.keys(e).sort(), [
      'actor',
      'causation_id',
      'changes',
      'correlation_id',
      'data',
      'event_id',
      'occurred_at',
      'position',
      'recorded_at',
      'revision',
      'schema_version',
      'type',
    ]);
    t.is(e.revision, i);
    if (last) t.is(e.revision, answers[n].revision, 'the answer names the last event of its request');
    t.is(e.position, s.position);
    if (last) t.is(e.position, answers[n].position);
    if (i > 0) t.true(e.position > events[i - 1].position);
    t.is(e.event_id, s.id);
    t.regex(e.occurred_at, ISO);
    t.regex(e.recorded_at, ISO);
    t.is(e.recorded_at, s.recordedAt);
    t.is(e.actor.type, 'platform');
    // The recorded actor, with the person's name beside the id.
    t.deepEqual(e.actor, { ...s.metadata.actor, name: 'bootstrap token' });
    t.is(e.correlation_id, step.correlated ? correlation : answers[n].requestId, step.path);
    t.is(e.causation_id, answers[n].requestId, 'caused by the request');
    t.is(e.schema_version, 1);
    t.deepEqual(e.data, s.data);
  });
  t.like(events[0].data, {
    cart_uuid: uuid,
    store_id: 10,
    source: { channel: 'headless', partner_id: null },
  });
  t.like(events[1].data, { menu_product_id: 1000, price_id: 'each', count: 2 });
  t.like(events[2].data, { reservation_mode: 'pickup', amount: 20 });
  t.like(events[3].data, { from: 'pending', to: 'verification' });
  t.like(events[4].data, { from: 'verification', to: 'preparing' });
  t.true(events[1].occurred_at >= events[0].occurred_at);

  // What each event changed in the cart, field by field.
  const changed = (i: number) =>
    Object.fromEntries((events[i].changes as Json[]).map((c) => [c.field, [c.before, c.after]]));
  t.deepEqual(changed(0), {
    uuid: [null, uuid],
    store_id: [null, 10],
    source: [null, { channel: 'headless', partner_id: null }],
    created_at: [null, events[0].data.created_at],
    status: [null, 'pending'],
  });
  t.deepEqual(Object.keys(changed(1)), ['first_item_at', 'lines[1000]', 'amount']);
  t.like(changed(1)['lines[1000]'], [null, { price_id: 'each', count: 2, unit_price: '10.00' }]);
  t.deepEqual(changed(1).amount, [0, 20]);
  t.like(changed(2), {
    reservation_mode: [null, 'pickup'],
    checked_out_at: [null, events[2].data.checked_out_at],
  });
  t.false('status' in changed(2), 'checkout moves the status in an event of its own');
  t.deepEqual(changed(3), { status: ['pending', 'verification'] });
  t.deepEqual(changed(4), { status: ['verification', 'preparing'] });

  // Unknown and malformed carts are 404; the history of another stream is never reachable.
  await problem(t, await svc.call('GET', `${ADMIN}/carts/${UNKNOWN_PARTNER}/history`), 404, 'cart_not_found');
  await problem(t, await svc.call('GET', `${ADMIN}/carts/not-a-uuid/history`), 404);
  await problem(t, await svc.call('GET', `${ADMIN}/carts/..%2Fpartner-x/history`), 404);
});
