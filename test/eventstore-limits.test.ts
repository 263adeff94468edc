/**
 * The embedded store's row limits (eventstore/sqlite/rows.ts): written into the SQL, rounded up to a
 * power of two, never bound (SQLite prepares a statement with a bound `LIMIT ?` again at every
 * execution), and no row fetched past the count asked (docs/operations.md, "Threads"): the rows each
 * statement hands to JavaScript are counted here.
 */
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DatabaseSync, type StatementSync } from 'node:sqlite';
import test from 'ava';
import type { RecordedEvent } from '../eventstore/port.ts';
import { subscribeToAll } from '../eventstore/sqlite/catch-up.ts';
import { type Log, openLog } from '../eventstore/sqlite/log.ts';
import { createReads } from '../eventstore/sqlite/reads.ts';
import { firstRows, limitSql } from '../eventstore/sqlite/rows.ts';
import { createSqliteEventStore } from '../eventstore/sqlite.ts';
import { rawEvent } from './support/raw-events.ts';

/**
 * The log, its statements wrapped to count the events' rows they hand to JavaScript (from `all`,
 * `get` and `iterate`): what SQLite read and node:sqlite converted for a read.
 */
function countingLog(log: Log): { log: Log; fetched: () => number; reset: () => void } {
  let fetched = 0;
  const wrap = (stmt: StatementSync, sql: string): StatementSync => {
    if (!/\bdata\b/.test(sql)) return stmt; // heads, counts, revisions: not an event's row
    return new Proxy(stmt, {
      get(target, prop) {
        if (prop === 'all')
          return (...params: never[]) => {
            const rows = target.all(...params);
            fetched += rows.length;
            return rows;
          };
        if (prop === 'get')
          return (...params: never[]) => {
            const row = target.get(...params);
            if (row !== undefined) fetched++;
            return row;
          };
        if (prop === 'iterate')
          return (...params: never[]) => {
            const it = target.iterate(...params);
            return {
              next() {
                const r = it.next();
                if (!r.done) fetched++;
                return r;
              },
              return: () => it.return?.(),
              [Symbol.iterator]() {
                return this;
              },
            };
          };
        const value = Reflect.get(target, prop, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
  };
  return {
    log: { ...log, stmt: (sql, arrays) => wrap(log.stmt(sql, arrays), sql) },
    fetched: () => fetched,
    reset: () => {
      fetched = 0;
    },
  };
}

/** `count` events written straight into the log's table, in streams named by `streamOf(i)`. */
function fill(log: Log, count: number, streamOf: (i: number) => string): void {
  const insert = log.db.prepare(
    `INSERT INTO events (stream_id, revision, event_id, type, data, metadata, recorded_at)
     VALUES (?, coalesce((SELECT max(revision) + 1 FROM events WHERE stream_id = ?1), 0), ?, 'CartItemAdded', '{}', '{}', '2026-01-01T00:00:00.000Z')`,
  );
  log.transaction(() => {
    for (let i = 0; i < count; i++) insert.run(streamOf(i), `e-${i}`);
  });
}

test('a limit is SQL text, rounded up to a power of two; none when missing or negative', (t) => {
  t.is(limitSql(undefined), '');
  t.is(limitSql(-1), '');
  t.is(limitSql(0), ' LIMIT 0');
  t.is(limitSql(1), ' LIMIT 1');
  t.is(limitSql(3), ' LIMIT 4');
  t.is(limitSql(64), ' LIMIT 64');
  t.is(limitSql(65), ' LIMIT 128');
  t.is(limitSql(10_001), ' LIMIT 16384');
  // A thousand different limits (a stream read up to each revision) share eleven statements.
  t.is(new Set(Array.from({ length: 1_000 }, (_, i) => limitSql(i + 1))).size, 11);
});

test('a batch of 5,000 events fetches 5,000 rows, not the 8,192 of its rounded limit', (t) => {
  const counting = countingLog(openLog(':memory:'));
  t.teardown(() => counting.log.close());
  fill(counting.log, 8_200, (i) => `cart-${i % 50}`);
  const reads = createReads(counting.log);

  const batch = reads.nextChunk(0, undefined, 5_000);
  t.is(batch.rows.length, 5_000);
  t.deepEqual([batch.rows[0][0], batch.rows[4_999][0], batch.reached], [1, 5_000, 5_000]);
  t.is(counting.fetched(), 5_000);

  // Filtered by type: the scan of a window of positions, the same count.
  counting.reset();
  const typed = reads.nextChunk(100, { eventTypes: ['CartItemAdded'] }, 5_000);
  t.deepEqual([typed.rows.length, typed.rows[0][0], typed.reached], [5_000, 101, 5_100]);
  t.is(counting.fetched(), 5_000);

  // The rest of the log: fewer rows than asked, all of them, and the read reaches the head.
  counting.reset();
  const rest = reads.nextChunk(5_000, undefined, 5_000);
  t.deepEqual([rest.rows.length, rest.reached], [3_200, 8_200]);
  t.is(counting.fetched(), 3_200);
});

test('a prefix read through the stream index fetches exactly its batch too', (t) => {
  const counting = countingLog(openLog(':memory:'));
  t.teardown(() => counting.log.close());
  // 6,000 partner events among 30,000: far behind, a prefix this small is read through the index.
  fill(counting.log, 30_000, (i) => (i % 5 === 0 ? `partner-${i % 7}` : `cart-${i % 50}`));
  const reads = createReads(counting.log);
  const route = {};
  const batch = reads.nextChunk(0, { streamPrefixes: ['partner-'] }, 5_000, route);
  t.like(route, { indexed: true });
  t.is(batch.rows.length, 5_000);
  t.true(
    batch.rows.every((row, i) => row[1].startsWith('partner-') && (i === 0 || row[0] > batch.rows[i - 1][0])),
  );
  t.is(batch.reached, batch.rows[4_999][0]);
  t.is(counting.fetched(), 5_000);
});

test('a prefix scanned while its events last goes through the stream index once they are behind it', (t) => {
  const counting = countingLog(openLog(':memory:'));
  t.teardown(() => counting.log.close());
  // 25,000 catalog events, then 100,000 of carts: too many to read through the index from the start,
  // none left once the reader is past them (a build's catalog).
  fill(counting.log, 125_000, (i) => (i < 25_000 ? `store-${i % 7}` : `cart-${i % 50}`));
  const reads = createReads(counting.log);
  const route = {};
  const filter = { streamPrefixes: ['store-'] };
  let position = 0;
  let read = 0;
  const steps: Array<{ rows: number; indexed: boolean | undefined }> = [];
  while (position < 125_000) {
    const chunk = reads.nextChunk(position, filter, 5_000, route);
    read += chunk.rows.length;
    position = chunk.reached;
    steps.push({ rows: chunk.rows.length, indexed: (route as { indexed?: boolean }).indexed });
  }
  t.is(read, 25_000);
  t.is(counting.fetched(), 25_000);
  // Five batches scanned by position, one window without the prefix's events, then one read through
  // the index to the head: not five more windows of carts.
  t.deepEqual(steps, [
    ...Array.from({ length: 5 }, () => ({ rows: 5_000, indexed: false })),
    { rows: 0, indexed: undefined },
    { rows: 0, indexed: true },
  ]);
});

test('a prefix whose events are mostly behind the reader goes through the index only when its reads walk less than a scan', (t) => {
  const log = openLog(':memory:');
  t.teardown(() => log.close());
  // 60,000 catalog events, 100,000 of carts, then 1,000 catalog events: from 60,000, few are ahead,
  // but each read through the index walks all 61,000 entries of the prefix.
  fill(log, 161_000, (i) => (i < 60_000 || i >= 160_000 ? `store-${i % 7}` : `cart-${i % 50}`));
  const reads = createReads(log);
  const filter = { streamPrefixes: ['store-'] };
  // In batches of 5,000: one read walks 61,000 entries, fewer than the 101,000 positions a scan reads.
  const large = {};
  const batch = reads.nextChunk(60_000, filter, 5_000, large);
  t.like(large, { indexed: true });
  t.deepEqual([batch.rows.length, batch.rows[0][0], batch.reached], [1_000, 160_001, 161_000]);
  // In batches of 64 (a persistent group's reads): 16 reads would walk 976,000 entries, so it scans.
  const small = {};
  const first = reads.nextChunk(60_000, filter, 64, small);
  t.like(small, { indexed: false });
  t.deepEqual([first.rows.length, first.reached], [0, 80_000]);
});

test('a prefix with many events still ahead is counted again only once some were read', (t) => {
  const log = openLog(':memory:');
  t.teardown(() => log.close());
  // 25,000 catalog events, 60,000 of carts, 25,000 catalog events again: past the first 25,000, as
  // many are still ahead as a scan is worth, and of the carts' windows between, only the first
  // (after events were read) has them counted again.
  fill(log, 110_000, (i) => (i < 25_000 || i >= 85_000 ? `store-${i % 7}` : `cart-${i % 50}`));
  let counts = 0;
  const counting: Log = {
    ...log,
    stmt: (sql, arrays) => {
      if (sql.includes('count(*)')) counts++;
      return log.stmt(sql, arrays);
    },
  };
  const reads = createReads(counting);
  const route = {};
  const filter = { streamPrefixes: ['store-'] };
  let position = 0;
  let read = 0;
  /** Where the prefixes were counted, and whether through the index (1) then. */
  const countedAt: number[] = [];
  while (position < 110_000) {
    const before = counts;
    const chunk = reads.nextChunk(position, filter, 5_000, route);
    if (counts > before) countedAt.push(position, (route as { indexed?: boolean }).indexed ? 1 : 0);
    read += chunk.rows.length;
    position = chunk.reached;
  }
  t.is(read, 50_000);
  // At the start, and after the first window of carts found none, each time deciding to scan (0);
  // not after the second window of carts.
  t.deepEqual(countedAt, [0, 0, 45_000, 0]);
});

test('a catch-up in batches of 5,000 fetches each event of the log once', async (t) => {
  const counting = countingLog(openLog(':memory:'));
  t.teardown(() => counting.log.close());
  fill(counting.log, 12_345, (i) => `cart-${i % 50}`);
  const seen: RecordedEvent[] = [];
  const batches: number[] = [];
  const sub = subscribeToAll(
    counting.log,
    createReads(counting.log),
    { from: 'start', maxBatchSize: 5_000 },
    {
      onEvents: async (events) => {
        batches.push(events.length);
        seen.push(...events);
      },
    },
  );
  await sub.caughtUp;
  await sub.stop();
  t.deepEqual(batches, [5_000, 5_000, 2_345]);
  t.true(seen.every((e, i) => e.position === i + 1));
  t.is(counting.fetched(), 12_345);
});

test('a read whose limit is not a power of two stops at it, and leaves no read open behind it', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-limits-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'events.db');
  const counting = countingLog(openLog(file));
  const other = new DatabaseSync(file);
  t.teardown(() => {
    other.close();
    counting.log.close();
  });
  fill(counting.log, 40, (i) => `cart-${i % 2}`);
  const reads = createReads(counting.log);

  t.deepEqual(
    (await reads.readStream('cart-0', { maxCount: 5 })).map((e) => e.revision),
    [0, 1, 2, 3, 4],
  );
  t.deepEqual(
    reads.readAllSync({ direction: 'backwards', maxCount: 3 }).map((row) => row[0]),
    [40, 39, 38],
  );
  t.is(counting.fetched(), 8);
  // Another connection's checkpoint copies the whole WAL: no statement of the reads still holds a snapshot.
  const checkpoint = other.prepare('PRAGMA wal_checkpoint(TRUNCATE)').get() as { busy: number };
  t.is(checkpoint.busy, 0);

  // Rows of any shape, a limit of zero, and none.
  const stmt = (max: number | undefined) =>
    counting.log.db.prepare(`SELECT position FROM events ORDER BY position${limitSql(max)}`);
  t.deepEqual(firstRows(stmt(3), 3, []), [{ position: 1 }, { position: 2 }, { position: 3 }]);
  t.deepEqual(firstRows(stmt(0), 0, []), []);
  t.is(firstRows(stmt(undefined), undefined, []).length, 40);
  t.is(firstRows(stmt(-1), -1, []).length, 40);
});

test('reads of every kind answer exactly the count asked when it is not a power of two', async (t) => {
  const store = createSqliteEventStore(':memory:');
  t.teardown(() => store.close());
  for (let i = 0; i < 12; i++) await store.append(`cart-${i % 2}`, [rawEvent('CartItemAdded')]);
  t.is((await store.readStream('cart-0', { maxCount: 5 })).length, 5);
  t.deepEqual(
    (await store.readStream('cart-0', { direction: 'backwards', maxCount: 3 })).map((e) => e.revision),
    [5, 4, 3],
  );
  t.is((await store.readAll({ maxCount: 7 })).length, 7);
  t.is((await store.readAll({ maxCount: 5, filter: { streamPrefixes: ['cart-1'] } })).length, 5);
  t.is((await store.readAll({ direction: 'backwards', maxCount: 3 })).length, 3);
});

test('no statement of the embedded store binds its LIMIT', async (t) => {
  const dir = path.join(import.meta.dirname, '..', 'eventstore', 'sqlite');
  for (const file of await readdir(dir)) {
    const code = (await readFile(path.join(dir, file), 'utf8'))
      .split('\n')
      .filter((line) => !/^\s*(\*|\/\/|\/\*)/.test(line));
    const bound = code.filter((line) => /LIMIT \?/i.test(line));
    t.deepEqual(bound, [], `${file} binds a LIMIT: use limitSql (rows.ts)`);
  }
});
