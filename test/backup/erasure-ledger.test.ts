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
import { openSqliteKeyStore } from '../../eventstore/key-store-sqlite.ts';
import { tempDir } from './support.ts';

const erasure = (id: string, at: string, keyIds: string[]): CustomerErasure => ({
  erasure_id: id,
  requested_at: at,
  key_ids: keyIds,
  cart_uuids: [`cart-of-${id}`],
});
const key = (id: string) => ({ key_id: id, wrapped: 'w', created_at: '2026-01-01T00:00:00.000Z' });

test('each erasure is in the ledger before the key store records it; one the ledger refuses is not begun', async (t) => {
  const dir = await tempDir(t, 'pds-ledger-');
  const keys = openSqliteKeyStore(':memory:');
  await keys.link(key('k1'), ['cart:a']);
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

test('a ledger’s last line cut short is left out; a damaged line before it refuses the ledger', async (t) => {
  const dir = await tempDir(t, 'pds-ledger-');
  const file = path.join(dir, ERASURE_LEDGER_FILE);
  t.deepEqual(await readErasureLedger(file), []);
  await fileErasureLedger(dir).record(erasure('e1', '2026-02-01T00:00:00.000Z', ['k1']));
  await appendFile(file, '{"erasure_id":"e2","requ');
  t.deepEqual(
    (await readErasureLedger(file)).map((e) => e.erasure_id),
    ['e1'],
  );
  await writeFile(file, `not json\n${await readFile(file, 'utf8')}`);
  await t.throwsAsync(readErasureLedger(file), { instanceOf: ErasureLedgerUnreadable, message: /line 1/ });
});

test('a restore applies again the erasures since the backup and those whose keys it still holds, each once', async (t) => {
  const keys = openSqliteKeyStore(':memory:');
  for (const id of ['k-old', 'k-held', 'k-new']) await keys.link(key(id), [`cart:${id}`]);
  await keys.destroyKeys(['k-old']);
  const since = '2026-03-01T00:00:00.000Z';
  const ledger = [
    erasure('e-new', '2026-03-02T00:00:00.000Z', ['k-new']),
    erasure('e-old', '2026-02-01T00:00:00.000Z', ['k-old']),
    erasure('e-held', '2026-02-02T00:00:00.000Z', ['k-held']),
    erasure('e-new', '2026-03-02T00:00:00.000Z', ['k-new']),
  ];
  const applied = await reapplyErasures(keys, ledger, since);
  t.deepEqual(
    applied.map((e) => e.erasure_id),
    ['e-held', 'e-new'],
  );
  t.deepEqual(
    (await keys.pendingErasures()).map((e) => e.erasure_id),
    ['e-held', 'e-new'],
  );
  t.is(await keys.key('k-held'), null);
  t.is(await keys.key('k-new'), null);
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
