/**
 * The erasure ledger (docs/operations.md, "Backups"): written before an erasure's keys are destroyed,
 * read back by a restore, which applies again what the restored key store may not hold.
 */
import { appendFile, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import test from 'ava';
import type { CustomerErasure } from '../../application/customer-keys.ts';
import { reapplyErasures, recordErasuresIn } from '../../application/erasure-ledger.ts';
import {
  ERASURE_LEDGER_FILE,
  ErasureLedgerUnreadable,
  fileErasureLedger,
  readErasureLedger,
} from '../../cli/backup/erasure-ledger.ts';
import { openSqliteKeyStore, reopenErasuresIn } from '../../eventstore/key-store-sqlite.ts';
import { tempDir } from './support.ts';

const erasure = (id: string, at: string, keyIds: string[]): CustomerErasure => ({
  erasure_id: id,
  requested_at: at,
  key_ids: keyIds,
  cart_uuids: [`cart-of-${id}`],
});
const key = (id: string) => ({ key_id: id, wrapped: 'w', created_at: '2026-01-01T00:00:00.000Z' });
const by = (e: CustomerErasure) => ({ erasure_id: e.erasure_id, erased_at: e.requested_at });

test('each erasure is in the ledger before the key store records it; one the ledger refuses is not begun', async (t) => {
  const dir = await tempDir(t, 'pds-ledger-');
  const keys = openSqliteKeyStore(':memory:');
  await keys.createKey(key('k1'), ['cart:a']);
  const recorded = recordErasuresIn(keys, fileErasureLedger(dir));
  await recorded.beginErasure(erasure('e1', '2026-02-01T00:00:00.000Z', ['k1']));
  t.deepEqual(await readErasureLedger(path.join(dir, ERASURE_LEDGER_FILE)), [
    erasure('e1', '2026-02-01T00:00:00.000Z', ['k1']),
  ]);
  t.is((await keys.pendingErasures()).length, 1);

  const failing = recordErasuresIn(keys, {
    record: async () => {
      throw new Error('disk full');
    },
  });
  await t.throwsAsync(failing.beginErasure(erasure('e2', '2026-02-02T00:00:00.000Z', ['k1'])), {
    message: 'disk full',
  });
  t.is((await keys.pendingErasures()).length, 1);
});

test('a ledger line cut short is left out, and the next entry starts a line of its own after it; a damaged line refuses the ledger', async (t) => {
  const dir = await tempDir(t, 'pds-ledger-');
  const file = path.join(dir, ERASURE_LEDGER_FILE);
  t.deepEqual(await readErasureLedger(file), []);
  const ledger = fileErasureLedger(dir);
  await ledger.record(erasure('e1', '2026-02-01T00:00:00.000Z', ['k1']));
  await appendFile(file, '{"erasure_id":"e2","requ');
  t.deepEqual(
    (await readErasureLedger(file)).map((e) => e.erasure_id),
    ['e1'],
  );
  // The crash's erasure never began; the next one is read whole, and so is the ledger.
  await ledger.record(erasure('e3', '2026-02-03T00:00:00.000Z', ['k3']));
  t.deepEqual(
    (await readErasureLedger(file)).map((e) => e.erasure_id),
    ['e1', 'e3'],
  );
  await writeFile(file, `{"not":"an erasure"}\n${await readFile(file, 'utf8')}`);
  await t.throwsAsync(readErasureLedger(file), { instanceOf: ErasureLedgerUnreadable, message: /line 1/ });
});

test('a ledger created beside a key store that erased before starts with those erasures', async (t) => {
  const dir = await tempDir(t, 'pds-ledger-');
  const earlier = [erasure('e0', '2026-01-15T00:00:00.000Z', ['k0'])];
  const ledger = fileErasureLedger(dir, () => earlier);
  await ledger.record(erasure('e1', '2026-02-01T00:00:00.000Z', ['k1']));
  await ledger.record(erasure('e2', '2026-02-02T00:00:00.000Z', ['k2']));
  t.deepEqual(
    (await readErasureLedger(path.join(dir, ERASURE_LEDGER_FILE))).map((e) => e.erasure_id),
    ['e0', 'e1', 'e2'],
  );
});

/** A restored data dir: its keys in `dir`, and a log whose carts each erasure did not reach are `notErased`. */
function restoredData(dir: string, notErased: Record<string, string[]>) {
  const file = path.join(dir, 'keys.db');
  const keys = openSqliteKeyStore(file);
  return {
    keys,
    reopenErasure: async (e: CustomerErasure) => reopenErasuresIn(file, [e]),
    cartsNotErased: async (id: string, carts: readonly string[]) =>
      carts.filter((c) => (notErased[id] ?? []).includes(c)),
  };
}

test('a restore applies again the erasures whose keys the copy holds or whose carts its log holds unerased, each once; a tombstone is a key gone', async (t) => {
  const restored = restoredData(await tempDir(t, 'pds-ledger-'), { 'e-log': ['cart-of-e-log'] });
  const { keys } = restored;
  for (const id of ['k-old', 'k-held', 'k-log']) await keys.createKey(key(id), [`cart:${id}`]);
  const old = erasure('e-old', '2026-02-01T00:00:00.000Z', ['k-old']);
  const log = erasure('e-log', '2026-02-03T00:00:00.000Z', ['k-log']);
  // Both finished in the copy's key store; only e-log's cart is without its record in the copy's log.
  for (const e of [old, log]) {
    await keys.beginErasure(e);
    await keys.destroyKeys(e.key_ids, by(e));
    await keys.finishErasure(e.erasure_id);
  }
  const ledger = [
    log,
    old,
    erasure('e-held', '2026-02-02T00:00:00.000Z', ['k-held']),
    erasure('e-new', '2026-03-02T00:00:00.000Z', ['k-new']),
    log,
  ];
  const applied = await reapplyErasures(restored, ledger);
  t.deepEqual(
    applied.map((e) => e.erasure_id),
    ['e-held', 'e-log'],
  );
  // Pending again, also the one the copy held as finished: the service records it on its carts.
  t.deepEqual(
    (await keys.pendingErasures()).map((e) => e.erasure_id),
    ['e-log', 'e-held'],
  );
  t.like(await keys.key('k-held'), { tombstone: { erasure_id: 'e-held' } });
  t.like(await keys.key('k-log'), { tombstone: { erasure_id: 'e-log' } });
  await keys.close();
});

test('the key store of the data dir a restore replaces is read as a ledger of its erasures', async (t) => {
  const dir = await tempDir(t, 'pds-ledger-');
  const file = path.join(dir, 'keys.db');
  const keys = openSqliteKeyStore(file);
  await keys.beginErasure(erasure('e1', '2026-02-01T00:00:00.000Z', ['k1']));
  await keys.finishErasure('e1');
  await keys.beginErasure(erasure('e2', '2026-02-02T00:00:00.000Z', ['k2']));
  await keys.close();
  t.deepEqual(
    (await readErasureLedger(file)).map((e) => e.erasure_id),
    ['e1', 'e2'],
  );
  await writeFile(
    path.join(dir, 'other.db'),
    Buffer.concat([Buffer.from('SQLite format 3\0'), Buffer.alloc(200)]),
  );
  await t.throwsAsync(readErasureLedger(path.join(dir, 'other.db')), { instanceOf: ErasureLedgerUnreadable });
});
