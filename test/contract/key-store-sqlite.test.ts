import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import test from 'ava';
import { KEY_STORE_FILE, openSqliteKeyStore } from '../../eventstore/key-store-sqlite.ts';
import { keyStoreContract } from './key-store.ts';

keyStoreContract(test, 'sqlite', async () => {
  const store = openSqliteKeyStore(':memory:');
  return { store, cleanup: () => store.close() };
});

test('sqlite: a destroyed key leaves no byte of itself in keys.db or its WAL', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-keys-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const store = openSqliteKeyStore(path.join(dir, KEY_STORE_FILE));
  const wrapped = `v1.${'Wr4pp3dK3yM4t3r14l'.repeat(4)}`;
  const held = async () => {
    const found: string[] = [];
    for (const name of await readdir(dir)) {
      if ((await readFile(path.join(dir, name))).includes(wrapped)) found.push(name);
    }
    return found;
  };
  await store.createKey({ key_id: 'ck_gone', wrapped, created_at: '2026-03-01T00:00:00.000Z' }, ['cart:a']);
  t.deepEqual(await held(), ['keys.db-wal']);
  await store.destroyKeys(['ck_gone'], { erasure_id: 'e-1', erased_at: '2026-03-02T00:00:00.000Z' });
  t.deepEqual(await held(), []);
  await store.close();
  t.deepEqual(await held(), []);
});

test('sqlite: a destroy a reader keeps from truncating the WAL says so, and a later one wipes it', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-keys-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const file = path.join(dir, KEY_STORE_FILE);
  const store = openSqliteKeyStore(file, { checkpointAttempts: 3, checkpointPauseMs: 0 });
  t.teardown(() => store.close());
  const wrapped = `v1.${'H3ldR34d3rK3y'.repeat(4)}`;
  await store.createKey({ key_id: 'ck_held', wrapped, created_at: '2026-03-01T00:00:00.000Z' }, ['cart:a']);
  const reader = new DatabaseSync(file);
  reader.exec('BEGIN');
  reader.prepare('SELECT count(*) FROM customer_keys').get();
  const erasure = { erasure_id: 'e-1', erased_at: '2026-03-02T00:00:00.000Z' };
  t.deepEqual(await store.destroyKeys(['ck_held'], erasure), { wiped: false });
  t.true((await readFile(`${file}-wal`)).includes(wrapped), 'the WAL still holds the key');
  t.like(await store.key('ck_held'), { tombstone: { erasure_id: 'e-1' } });
  reader.exec('COMMIT');
  reader.close();
  t.deepEqual(await store.destroyKeys(['ck_held'], erasure), { wiped: true });
  for (const name of await readdir(dir)) {
    t.false((await readFile(path.join(dir, name))).includes(wrapped), name);
  }
});
