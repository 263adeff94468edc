/**
 * An expired `Idempotency-Key` on EventStoreDB (docs/operations.md, "Retention"): the server leaves a
 * stream's events past its `$maxAge` out of reads at once, but keeps the stream's revision, so the key's
 * stream reads as empty while a claim with `no_stream` is refused. Modelled here around the embedded
 * store as the server behaves: reads drop the events older than their stream's max age, on the
 * store's clock, and nothing is deleted.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { idempotency } from '../../api/idempotency.ts';
import { manualClock } from '../../domain/clock.ts';
import type { EventStore } from '../../eventstore/port.ts';
import { openSqliteEventStore } from '../../eventstore/sqlite.ts';

const HOUR = 3_600_000;

/** The embedded store, read as EventStoreDB reads streams with `$maxAge`. */
function withServerMaxAge(inner: EventStore, now: () => Date): EventStore {
  const maxAges = new Map<string, number>();
  return {
    ...inner,
    async append(streamId, events, options) {
      const result = await inner.append(streamId, events, options);
      if (options?.maxAgeMs && result.nextExpectedRevision === events.length - 1) {
        maxAges.set(streamId, Math.ceil(options.maxAgeMs / 1_000) * 1_000);
      }
      return result;
    },
    async readStream(streamId, options) {
      const events = await inner.readStream(streamId, options);
      const maxAge = maxAges.get(streamId);
      if (maxAge === undefined) return events;
      return events.filter((e) => Date.parse(e.recordedAt) + maxAge > now().getTime());
    },
    dropExpired: async () => ({ events: 0, streams: 0 }),
  };
}

/** A POST with an `Idempotency-Key` through the middleware alone. */
function request(middleware: ReturnType<typeof idempotency>, key: string, body: unknown) {
  const headers: Record<string, string> = {};
  const ctx = {
    method: 'POST',
    path: '/admin/v1/partners',
    request: { body },
    state: { requestId: 'r1', correlationId: 'c1' },
    status: 404,
    body: undefined as unknown,
    type: '',
    get: (name: string) => (name.toLowerCase() === 'idempotency-key' ? key : ''),
    set(name: string | Record<string, string>, value?: string) {
      if (typeof name === 'string') headers[name.toLowerCase()] = value ?? '';
      else for (const [k, v] of Object.entries(name)) headers[k.toLowerCase()] = v;
    },
    response: { get: () => '', type: 'application/json' },
  };
  return { ctx, headers, run: middleware };
}

test('a key whose records the server no longer returns is free again, its stream continued', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'pds-idem-'));
  const clock = manualClock('2026-03-01T00:00:00.000Z');
  const inner = await openSqliteEventStore(join(dir, 'events.db'), { now: clock.now });
  t.teardown(async () => {
    await inner.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const store = withServerMaxAge(inner, clock.now);
  const middleware = idempotency({
    store,
    clock,
    ttlMs: 2 * HOUR,
    scopeOf: () => 'operator:test',
    actorOf: () => ({ type: 'operator', id: 'test' }),
  });
  let runs = 0;
  const post = async (body: unknown) => {
    const r = request(middleware, 'k-1', body);
    // biome-ignore lint/suspicious/noExplicitAny: the middleware reads only the fields above
    await r.run(r.ctx as any, async () => {
      runs += 1;
      r.ctx.status = 201;
      r.ctx.body = { run: runs };
    });
    return { status: r.ctx.status, body: r.ctx.body, replayed: r.headers['idempotent-replayed'] };
  };

  t.deepEqual(await post({ name: 'a' }), { status: 201, body: { run: 1 }, replayed: undefined });
  clock.advance(HOUR);
  t.deepEqual(await post({ name: 'a' }), { status: 201, body: { run: 1 }, replayed: 'true' });

  clock.advance(HOUR + 1_000);
  t.deepEqual(await store.readStream((await inner.readAll())[0].streamId), [], 'the server returns none');
  const afresh = await post({ name: 'b' });
  t.deepEqual(afresh, { status: 201, body: { run: 2 }, replayed: undefined });
  t.deepEqual(await post({ name: 'b' }), { status: 201, body: { run: 2 }, replayed: 'true' });

  const [stream] = (await inner.readAll()).map((e) => e.streamId);
  t.deepEqual(
    (await inner.readStream(stream)).map((e) => [e.revision, e.type]),
    [
      [0, 'IdempotencyKeyClaimed'],
      [1, 'IdempotentResponseRecorded'],
      [2, 'IdempotencyKeyClaimed'],
      [3, 'IdempotentResponseRecorded'],
    ],
    'the new claim follows the revision the server kept',
  );
});
