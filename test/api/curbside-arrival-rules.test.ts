/**
 * Who may post a curbside arrival, for which reservations (issue 37, the security review: an arrival
 * was accepted for a cart reserved for delivery, and any key covering a store could post arrivals for
 * carts from other partners' sites). The rule (docs/partner-api.md, "The curbside arrival"): a checked-out
 * curbside reservation only (409 `reservation_not_curbside` for pickup or delivery), made through the
 * posting partner's own site at a store of its key (any other is answered as unknown, 404).
 */
import { randomUUID } from 'node:crypto';
import test from 'ava';
import { ok, partner, reservation, seedCurbsideStore } from '../support/curbside-world.ts';
import { startService, type TestService } from '../support/service.ts';

const P = '/platform/v1';
const OP = '/partner/store/v1';
const FEED = '/partner/store-menu-feed/v1';
const ARRIVAL = { vehicle_make: 'Volvo', vehicle_color: 'red', parking_spot: '3' };
type Json = Record<string, unknown>;

/** Store 1 (pickup, delivery and curbside), two store operators and a menu feed covering it, a brand. */
async function world(s: TestService) {
  await seedCurbsideStore(s);
  return {
    a: await partner(s, 'Green Door web', 'store_operator', { store_ids: [1] }),
    b: await partner(s, 'Green Door app', 'store_operator', { store_ids: [1] }),
    feed: await partner(s, 'MenuMap', 'store_menu_feed', { store_ids: [1] }),
    brand: await partner(s, 'Kiva', 'brand', { brand_ids: [1] }),
  };
}

async function arrive(s: TestService, base: string, key: string, uuid: string, headers = {}) {
  const r = await fetch(`${s.base}${base}/reservations/${uuid}/curbside_arrival`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify(ARRIVAL),
  });
  return { status: r.status, type: r.headers.get('content-type'), body: (await r.json()) as Json };
}

test('an arrival for a pickup or delivery reservation is a 409, and nothing is appended', async (t) => {
  const s = await startService(t);
  const { a } = await world(s);
  const store = await s.openStore();
  for (const mode of ['pickup', 'delivery']) {
    const uuid = await reservation(s, a.id, mode);
    const head = await store.headPosition();
    const r = await arrive(s, OP, a.key, uuid, { 'idempotency-key': randomUUID() });
    t.is(r.status, 409, mode);
    t.is(r.type, 'application/problem+json');
    t.like(r.body, { status: 409, code: 'reservation_not_curbside', reservation_mode: mode });
    t.regex(String(r.body.detail), new RegExp(`for ${mode}, not curbside`));
    const appended = (await store.readAll({ after: head })).filter(
      (e) => !e.streamId.startsWith('idempotency-'),
    );
    t.deepEqual(appended, [], `${mode}: nothing appended`);
  }
  // A curbside reservation of its own site is taken…
  t.is((await arrive(s, OP, a.key, await reservation(s, a.id, 'curbside'))).status, 201);
  // …unless the store has turned curbside off since.
  const late = await reservation(s, a.id, 'curbside');
  await ok(s, 'PUT', `${P}/stores/1/curbside_pickup_setting`, { enabled: false });
  t.like((await arrive(s, OP, a.key, late)).body, { status: 409, code: 'curbside_disabled' });
});

test('only the partner whose site made the reservation posts its arrival; any other gets a 404', async (t) => {
  const s = await startService(t);
  const w = await world(s);
  const store = await s.openStore();
  const of = {
    a: await reservation(s, w.a.id, 'curbside'),
    b: await reservation(s, w.b.id, 'curbside'),
    feed: await reservation(s, w.feed.id, 'curbside'),
    brand: await reservation(s, w.brand.id, 'curbside'),
    platform: await reservation(s, null, 'curbside'),
  };
  const unknown = randomUUID();
  const notFound = (uuid: string) => ({
    type: 'about:blank',
    title: 'Not Found',
    status: 404,
    detail: `no reservation ${uuid}`,
    code: 'reservation_not_found',
  });
  const refused: Array<[string, string, string, string]> = [
    ['store operator A', OP, w.a.key, of.b],
    ['store operator A', OP, w.a.key, of.feed],
    ['store operator A', OP, w.a.key, of.brand],
    ['store operator A', OP, w.a.key, of.platform],
    ['store operator A', OP, w.a.key, unknown],
    ['the menu feed', FEED, w.feed.key, of.a],
    ['the menu feed', FEED, w.feed.key, of.platform],
  ];
  for (const [who, base, key, uuid] of refused) {
    const head = await store.headPosition();
    const r = await arrive(s, base, key, uuid, { 'idempotency-key': randomUUID() });
    // The same answer as for a reservation that does not exist: nothing tells them apart.
    t.is(r.status, 404, `${who} → ${uuid}`);
    t.deepEqual(r.body, notFound(uuid), `${who} → ${uuid}`);
    t.is(await store.headPosition(), head, `${who} → ${uuid}: nothing stored, not even under the key`);
  }
  for (const [who, base, key, uuid, id] of [
    ['store operator A', OP, w.a.key, of.a, w.a.id],
    ['store operator B', OP, w.b.key, of.b, w.b.id],
    ['the menu feed', FEED, w.feed.key, of.feed, w.feed.id],
  ]) {
    const r = await arrive(s, base, key, uuid);
    t.is(r.status, 201, `${who}: ${JSON.stringify(r.body)}`);
    const history = (await ok(s, 'GET', `/admin/v1/carts/${uuid}/history`)).events as Json[];
    t.like(
      history.find((e) => e.type === 'CurbsideArrivalPosted'),
      { actor: { type: 'partner', id } },
      who,
    );
  }
});
