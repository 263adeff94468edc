/**
 * A partner's correlation ids are its own (issue 37, the security review: a partner could set
 * `X-Correlation-Id`, or `X-Request-Id`, to the platform's ids, and its events then claimed to belong
 * to the platform's request). The events a partner causes carry its ids as `partner:<partner id>:<id>`
 * (docs/write-side.md, "Streams and events"); the platform's and the operators' are kept as given.
 */
import test from 'ava';
import type { RecordedEvent } from '../../eventstore/port.ts';
import { ok, partner, reservation, seedCurbsideStore } from '../support/curbside-world.ts';
import { startService, type TestService } from '../support/service.ts';

const OP = '/partner/store/v1';
type Json = Record<string, unknown>;

/** Store 1 with curbside on, and two store operators, each with a checked-out curbside cart from its site. */
async function world(s: TestService, checkoutHeaders: Record<string, string>) {
  await seedCurbsideStore(s);
  const partners: Array<{ id: string; key: string; cart: string }> = [];
  for (const name of ['Green Door web', 'Green Door app']) {
    const { id, key } = await partner(s, name, 'store_operator', { store_ids: [1] });
    partners.push({ id, key, cart: await reservation(s, id, 'curbside', checkoutHeaders) });
  }
  return partners;
}

const arrive = (s: TestService, key: string, cart: string, headers: Record<string, string> = {}) =>
  fetch(`${s.base}${OP}/reservations/${cart}/curbside_arrival`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ vehicle_make: 'Saab', vehicle_color: 'green', parking_spot: '2' }),
  });

const ids = (e: RecordedEvent) => [e.type, e.metadata.correlation_id, e.metadata.causation_id];

test('a partner setting the platform’s correlation and request ids gets them in a namespace of its own', async (t) => {
  const s = await startService(t);
  const platform = { 'x-correlation-id': 'order-42', 'x-request-id': 'platform-request-7' };
  const [a, b] = await world(s, platform);
  const store = await s.openStore();

  // Both partners claim the platform's ids; A also sends an Idempotency-Key (its record is an event too).
  const first = await arrive(s, a.key, a.cart, { ...platform, 'idempotency-key': 'arrival-1' });
  t.is(first.status, 201);
  t.is(first.headers.get('x-request-id'), 'platform-request-7', 'the partner gets its own id back');
  t.is((await arrive(s, b.key, b.cart, platform)).status, 201);

  const all = await store.readAll();
  const claimed = all.filter((e) => e.metadata.correlation_id === 'order-42');
  t.true(claimed.length > 0);
  t.true(
    claimed.every((e) => e.metadata.actor.type === 'platform' && e.streamId.startsWith('cart-')),
    `only the platform's checkouts carry its correlation id: ${JSON.stringify(claimed.map(ids))}`,
  );
  t.false(
    all.some((e) => e.metadata.actor.type === 'partner' && e.metadata.causation_id === 'platform-request-7'),
  );

  const arrival = (p: { id: string; cart: string }) =>
    all.find((e) => e.streamId === `cart-${p.cart}` && e.type === 'CurbsideArrivalPosted') as RecordedEvent;
  t.deepEqual(ids(arrival(a)), [
    'CurbsideArrivalPosted',
    `partner:${a.id}:order-42`,
    `partner:${a.id}:platform-request-7`,
  ]);
  t.deepEqual(ids(arrival(b)), [
    'CurbsideArrivalPosted',
    `partner:${b.id}:order-42`,
    `partner:${b.id}:platform-request-7`,
  ]);
  const keyed = all.filter(
    (e) => e.streamId.startsWith('idempotency-') && e.metadata.actor.type === 'partner',
  );
  t.deepEqual(
    keyed.map(ids),
    ['IdempotencyKeyClaimed', 'IdempotentResponseRecorded'].map((type) => [
      type,
      `partner:${a.id}:order-42`,
      `partner:${a.id}:platform-request-7`,
    ]),
  );

  // The audit history shows the same ids.
  const history = (await ok(s, 'GET', `/admin/v1/carts/${a.cart}/history`)).events as Json[];
  t.like(
    history.find((e) => e.type === 'CartCheckedOut'),
    { correlation_id: 'order-42', causation_id: 'platform-request-7' },
  );
  t.like(
    history.find((e) => e.type === 'CurbsideArrivalPosted'),
    { correlation_id: `partner:${a.id}:order-42`, causation_id: `partner:${a.id}:platform-request-7` },
  );
});

test('a partner’s request without ids gets its generated request id, in its namespace', async (t) => {
  const s = await startService(t);
  const [a] = await world(s, {});
  const store = await s.openStore();
  const r = await arrive(s, a.key, a.cart);
  t.is(r.status, 201);
  const requestId = r.headers.get('x-request-id') ?? '';
  t.regex(requestId, /^[0-9a-f-]{36}$/);
  const [arrival] = await store.readAll({ filter: { eventTypes: ['CurbsideArrivalPosted'] } });
  t.deepEqual(ids(arrival), [
    'CurbsideArrivalPosted',
    `partner:${a.id}:${requestId}`,
    `partner:${a.id}:${requestId}`,
  ]);
});
