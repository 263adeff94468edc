/**
 * docs/read-side.md, "Memory after the first start": each connection to the event store's log keeps a
 * small page cache (2 MiB), so that a catch-up reading the whole log, the first start's, leaves no
 * cache the size of the log allocated for the process's life. `PRAGMA cache_size` is a setting of
 * each connection (negative: KiB), read back here on connections the store opened, after a read of
 * the whole log.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test from 'ava';
import { openLog } from '../eventstore/sqlite/log.ts';

test('each connection to the log keeps a page cache of 2 MiB, however much of the log it read', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-page-cache-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'events.db');
  const writer = openLog(file);
  const reader = openLog(file);
  t.teardown(() => {
    writer.close();
    reader.close();
  });
  const cacheSize = (log: typeof writer) =>
    (log.db.prepare('PRAGMA cache_size').get() as { cache_size: number }).cache_size;
  const insert = writer.db.prepare(
    `INSERT INTO events (stream_id, revision, event_id, type, data, metadata, recorded_at)
     VALUES (?, 0, ?, 'Noted', ?, '{}', '2026-01-01T00:00:00.000Z')`,
  );
  writer.transaction(() => {
    for (let i = 0; i < 2_000; i++)
      insert.run(`note-${i}`, `e-${i}`, JSON.stringify({ text: 'x'.repeat(3_000) }));
  });
  const read = reader.db.prepare('SELECT count(*) AS n, sum(length(data)) AS bytes FROM events').get() as {
    n: number;
    bytes: number;
  };
  t.is(read.n, 2_000);
  t.true(read.bytes > 4 * 1_048_576, 'a log larger than the cache');
  t.is(cacheSize(writer), -2_048);
  t.is(cacheSize(reader), -2_048);
});
