import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
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
