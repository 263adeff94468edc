/**
 * The rewrite's last checkpoint (`eventstore/sqlite/rewrite.ts`; docs/operations.md, "Customer data")
 * beside a serving process: while a reader keeps the WAL from being truncated, the checkpoint must not
 * hold the writer's lock waiting for it, or the service's appends fail with `database is locked` once
 * their own busy timeout runs out. A worker thread stands for the service: it appends with a short
 * busy timeout while the checkpoint runs.
 */
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { Worker } from 'node:worker_threads';
import test from 'ava';
import { openEventDataRewrite } from '../eventstore/sqlite/rewrite.ts';
import { openSqliteEventStore } from '../eventstore/sqlite.ts';
import { tempDir } from './backup/support.ts';
import { rawEvent } from './support/raw-events.ts';

/** Waits for the signal, lets the checkpoint begin, then writes with a 1 s busy timeout. */
const SERVICE = `
  const { workerData, parentPort } = require('node:worker_threads');
  const { DatabaseSync } = require('node:sqlite');
  const signal = new Int32Array(workerData.signal);
  Atomics.wait(signal, 0, 0);
  Atomics.wait(signal, 0, 1, 300);
  const db = new DatabaseSync(workerData.file, { timeout: 1000 });
  try {
    db.exec("CREATE TABLE IF NOT EXISTS service_writes (n INTEGER)");
    db.exec('INSERT INTO service_writes VALUES (1)');
    parentPort.postMessage('written');
  } catch (error) {
    parentPort.postMessage(String(error.message));
  } finally {
    db.close();
  }
`;

test('the rewrite’s last checkpoint never holds the writer’s lock waiting on a reader: the service’s appends go through, and the WAL is said not truncated', async (t) => {
  const dir = await tempDir(t, 'pds-rewrite-');
  const file = path.join(dir, 'events.db');
  const store = await openSqliteEventStore(file);
  await store.append('cart-a', [rawEvent('CartCreated', {})]);
  // A long read of another process, from before the last append: the WAL cannot be reset under it.
  const reader = new DatabaseSync(file);
  reader.exec('BEGIN');
  reader.prepare('SELECT count(*) FROM events').get();
  await store.append('cart-a', [rawEvent('CartItemAdded', {})]);
  const rewrite = openEventDataRewrite(file, 'customers-protect');
  t.teardown(async () => {
    if (reader.isTransaction) reader.exec('ROLLBACK');
    reader.close();
    await rewrite.close();
    await store.close();
  });

  const signal = new Int32Array(new SharedArrayBuffer(4));
  const service = new Worker(SERVICE, { eval: true, workerData: { file, signal: signal.buffer } });
  const answer = new Promise<string>((resolve, reject) => {
    service.once('message', resolve);
    service.once('error', reject);
  });
  Atomics.store(signal, 0, 1);
  Atomics.notify(signal, 0);
  const { wal_truncated } = await rewrite.finish('2026-01-01T00:00:00.000Z', false);
  t.is(await answer, 'written');
  t.false(wal_truncated);
  await service.terminate();
});
