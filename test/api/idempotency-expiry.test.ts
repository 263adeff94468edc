/**
 * An `Idempotency-Key` expires `PDS_IDEMPOTENCY_TTL` after its claim (docs/operations.md,
 * "Retention"): until then a retry replays the first answer and another request with the key is
 * refused; afterwards the key is free, a request with it runs afresh, and its stream carries a max
 * age, so the retention job may drop its records.
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import test from 'ava';
import { manualClock } from '../../domain/clock.ts';
import { openSqliteEventStore } from '../../eventstore/sqlite.ts';
import { seedCurbsideStore } from '../support/curbside-world.ts';
import { startService } from '../support/service.ts';

const HOUR = 3_600_000;

test('a key replays its answer for the TTL, then runs afresh for any request', async (t) => {
  const clock = manualClock('2026-03-01T00:00:00.000Z');
  const s = await startService(t, { clock, env: { PDS_IDEMPOTENCY_TTL: '2h' } });
  await seedCurbsideStore(s);
  const key = `partner-${randomUUID()}`;
  const create = async (name: string) => {
    const r = await s.call(
      'POST',
      '/admin/v1/partners',
      { name, kind: 'store_operator', store_ids: [1] },
      { 'idempotency-key': key },
    );
    const body = (await r.json()) as { partner?: { partner_id: string }; code?: string; detail?: string };
    return { status: r.status, replayed: r.headers.get('idempotent-replayed'), body };
  };

  const first = await create('Green Door web');
  t.is(first.status, 201);
  clock.advance(2 * HOUR - 1);
  const retry = await create('Green Door web');
  t.is(retry.replayed, 'true', 'within the TTL: the first answer');
  t.is(retry.body.partner?.partner_id, first.body.partner?.partner_id);
  const other = await create('Another name');
  t.is(other.status, 422, 'within the TTL: the key is bound to its request');
  t.is(other.body.code, 'idempotency_key_reused');

  clock.advance(1);
  const afresh = await create('Another name');
  t.is(afresh.status, 201, 'past the TTL: any request runs');
  t.is(afresh.replayed, null);
  t.not(afresh.body.partner?.partner_id, first.body.partner?.partner_id);
  const replayed = await create('Another name');
  t.is(replayed.replayed, 'true', 'and the key binds its new answer');
  t.is(replayed.body.partner?.partner_id, afresh.body.partner?.partner_id);

  // The key's stream carries the TTL as its max age: the retention job drops its records.
  const store = await s.openStore();
  t.teardown(() => store.close());
  const streams = new Set(
    (await store.readAll({ filter: { streamPrefixes: ['idempotency-'] } })).map((e) => e.streamId),
  );
  const db = new DatabaseSync(join(s.dataDir, 'events.db'), { readOnly: true });
  t.teardown(() => db.close());
  const expiries = db.prepare('SELECT stream_id, expires_at FROM stream_expiry').all();
  t.is(streams.size, 1);
  const [stream] = streams;
  const last = (await store.readStream(stream)).at(-1);
  t.deepEqual(
    expiries.filter((row) => row.stream_id === stream).map((row) => row.expires_at),
    [Date.parse(last?.recordedAt ?? '') + 2 * HOUR],
    'the stream expires with its last record',
  );
});

test('the service drops expired idempotency records at start, and counts them', async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'pds-retention-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  // Records written two days ago, with a day's max age, then a business event.
  const past = await openSqliteEventStore(join(dataDir, 'events.db'), {
    now: () => new Date(Date.now() - 48 * HOUR),
  });
  const claim = {
    type: 'IdempotencyKeyClaimed',
    data: {},
    metadata: {
      correlation_id: 'c',
      causation_id: null,
      actor: { type: 'platform' as const, id: 'test' },
      occurred_at: new Date(Date.now() - 48 * HOUR).toISOString(),
      schema_version: 1,
    },
  };
  await past.append('idempotency-old', [claim], { maxAgeMs: 24 * HOUR });
  await past.append('idempotency-older', [claim], { maxAgeMs: 24 * HOUR });
  await past.append('store-1', [{ ...claim, type: 'StoreCreated' }]);
  await past.close();

  const s = await startService(t, { dataDir });
  const store = await s.openStore();
  t.teardown(() => store.close());
  for (
    let i = 0;
    i < 200 && (await store.readAll({ filter: { streamPrefixes: ['idempotency-'] } })).length > 0;
    i++
  ) {
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  t.deepEqual(await store.readAll({ filter: { streamPrefixes: ['idempotency-'] } }), []);
  t.is((await store.readStream('store-1')).length, 1, 'a business event stays');
  const metrics = await (await fetch(`${s.base}/metrics`)).text();
  t.regex(metrics, /^pds_retention_dropped_events_total 2$/m);
});
