/**
 * What an `Idempotency-Key` stores (issue 37, the security review: one 64 KiB request to a reservation
 * that does not exist stored 145 KB). The key was claimed and the answer recorded as events before the
 * path, body and scope were checked, and a refusal was recorded whole, its list of field errors
 * included: a partner could grow the append-only store without bound, one key at a time.
 *
 * Now (docs/write-side.md, "Idempotency"): a request refused before it runs stores nothing on the
 * partner APIs, and at most a claim and its release (a few hundred bytes) on the platform and admin
 * APIs, where its key stays free for the corrected request; a refusal by the command is recorded cut
 * to what a retry needs; a success is still replayed.
 */
import { randomUUID } from 'node:crypto';
import test from 'ava';
import { MAX_RECORDED_PROBLEM_BYTES } from '../../api/idempotency.ts';
import { MAX_BODY_BYTES } from '../../api/write-support.ts';
import type { EventStore } from '../../eventstore/port.ts';
import { partner, reservation, seedCurbsideStore } from '../support/curbside-world.ts';
import { startService, type TestService } from '../support/service.ts';

const P = '/platform/v1';
const OP = '/partner/store/v1';
type Json = Record<string, unknown>;

/** A store with curbside on, its operator's key, and a checked-out curbside cart from its site. */
async function world(s: TestService) {
  await seedCurbsideStore(s);
  const operator = await partner(s, 'Green Door web', 'store_operator', { store_ids: [1] });
  return { key: operator.key, cart: await reservation(s, operator.id, 'curbside') };
}

/** What the event store gained since `after`: events and bytes (their data and metadata as JSON). */
async function stored(store: EventStore, after: number) {
  const events = (await store.readAll({ after })).filter((e) => e.metadata.actor.type !== 'system');
  const bytes = events.reduce(
    (sum, e) =>
      sum + Buffer.byteLength(JSON.stringify(e.data)) + Buffer.byteLength(JSON.stringify(e.metadata)),
    0,
  );
  return { events: events.map((e) => `${e.type} ${e.streamId}`), bytes };
}

/** A JSON object of arrival "fields" just under the body cap: `[name]: value` pairs. */
function bodyOfSize(value: unknown): string {
  const entries: string[] = [];
  let size = 2;
  for (let i = 0; ; i++) {
    const entry = `${JSON.stringify(`field_${i}`)}:${JSON.stringify(value)}`;
    if (size + entry.length + 1 > MAX_BODY_BYTES - 16) break;
    entries.push(entry);
    size += entry.length + 1;
  }
  return `{${entries.join(',')}}`;
}

const partnerPost = (s: TestService, key: string, url: string, body: string, idempotencyKey: string) =>
  fetch(`${s.base}${url}`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${key}`,
      'content-type': 'application/json',
      'idempotency-key': idempotencyKey,
    },
    body,
  });

test('a 64 KiB arrival for a reservation that does not exist stores nothing under its key', async (t) => {
  const s = await startService(t);
  const { key } = await world(s);
  const store = await s.openStore();
  const url = `${OP}/reservations/${randomUUID()}/curbside_arrival`;

  // Fields the body schema takes (strings) and fields it refuses (numbers, one error each).
  for (const [what, body, status] of [
    ['form answers', bodyOfSize('x'.repeat(40)), 404],
    ['wrong types', bodyOfSize(1), 422],
  ] as const) {
    t.true(body.length > 60_000 && body.length <= MAX_BODY_BYTES, `${what}: ${body.length} bytes`);
    const head = await store.headPosition();
    const r = await partnerPost(s, key, url, body, `missing-${randomUUID()}`);
    t.is(r.status, status, `${what}: ${(await r.text()).slice(0, 200)}`);
    t.deepEqual(await stored(store, head), { events: [], bytes: 0 }, `${what}: nothing stored`);
  }
});

test('a refusal by the command is recorded cut to what a retry needs, and replayed', async (t) => {
  const s = await startService(t);
  const { key, cart } = await world(s);
  const store = await s.openStore();
  const url = `${OP}/reservations/${cart}/curbside_arrival`;
  // The body schema takes any names; the store's form refuses each unknown one (a field error each).
  const body = bodyOfSize('x'.repeat(40));
  const idempotencyKey = `unknown-fields-${randomUUID()}`;
  const head = await store.headPosition();
  const first = await partnerPost(s, key, url, body, idempotencyKey);
  const problem = (await first.json()) as Json & { errors: unknown[] };
  t.is(first.status, 422);
  t.is(problem.code, 'invalid_arrival_fields');
  t.true(problem.errors.length > 1_000, 'the answer itself names every field');
  const kept = await stored(store, head);
  t.deepEqual(
    kept.events.map((e) => e.split(' ')[0]),
    ['IdempotencyKeyClaimed', 'IdempotentResponseRecorded'],
  );
  t.true(kept.bytes < 2 * MAX_RECORDED_PROBLEM_BYTES, `${kept.bytes} bytes stored`);

  const again = await partnerPost(s, key, url, body, idempotencyKey);
  t.is(again.status, 422);
  t.is(again.headers.get('idempotent-replayed'), 'true');
  t.regex(again.headers.get('content-type') ?? '', /^application\/problem\+json/);
  const replayed = (await again.json()) as Json;
  t.like(replayed, { status: 422, code: 'invalid_arrival_fields', title: problem.title, type: problem.type });
  t.true(String(problem.detail).startsWith(String(replayed.detail).replace(/…$/, '')));
  t.is(replayed.errors, undefined, 'the list of field errors is not kept');
});

test('a retry of a successful write still replays its answer', async (t) => {
  const s = await startService(t);
  const { key, cart } = await world(s);
  const store = await s.openStore();
  const url = `${OP}/reservations/${cart}/curbside_arrival`;
  const body = JSON.stringify({ vehicle_make: 'Saab', vehicle_color: 'green', parking_spot: '2' });
  const idempotencyKey = `arrival-${randomUUID()}`;
  const first = await partnerPost(s, key, url, body, idempotencyKey);
  t.is(first.status, 201);
  const head = await store.headPosition();
  const again = await partnerPost(s, key, url, body, idempotencyKey);
  t.is(again.status, 201);
  t.is(again.headers.get('idempotent-replayed'), 'true');
  t.deepEqual(await again.json(), await first.json());
  t.is(await store.headPosition(), head, 'a replay stores nothing');
});

test('platform: an invalid 64 KiB body stores a claim and its release at most, and frees the key', async (t) => {
  const s = await startService(t);
  await world(s);
  const store = await s.openStore();
  const idempotencyKey = `invalid-${randomUUID()}`;
  // A cart body with thousands of unknown fields: a field error each.
  const body = bodyOfSize(1);
  const head = await store.headPosition();
  const refused = await s.call('POST', `${P}/carts`, body, { 'idempotency-key': idempotencyKey });
  t.is(refused.status, 422);
  t.true(((await refused.json()) as { errors: unknown[] }).errors.length > 1_000);
  const kept = await stored(store, head);
  t.deepEqual(
    kept.events.map((e) => e.split(' ')[0]),
    ['IdempotencyKeyClaimed', 'IdempotencyKeyReleased'],
  );
  t.true(kept.bytes < 1_024, `${kept.bytes} bytes stored`);

  // The request never ran: the same key carries the corrected request, which runs and is replayed.
  const corrected = { store_id: 1, source: { channel: 'headless', partner_id: null } };
  const created = await s.call('POST', `${P}/carts`, corrected, { 'idempotency-key': idempotencyKey });
  t.is(created.status, 201);
  const replay = await s.call('POST', `${P}/carts`, corrected, { 'idempotency-key': idempotencyKey });
  t.is(replay.status, 201);
  t.is(replay.headers.get('idempotent-replayed'), 'true');
  t.deepEqual(await replay.json(), await created.json());
});
