/**
 * An erasure is never undone by a restore (docs/operations.md, "Backups"): an erasure made after a
 * backup is in the erasure ledger beside the backups, and `pds restore` applies it again to the
 * restored key store; the service, started there, records it on the cart. The customer reads as
 * erased, and no byte of their data is in the restored data dir.
 */
import { execFile } from 'node:child_process';
import { copyFileSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import test, { type ExecutionContext } from 'ava';
import { ERASURE_LEDGER_FILE } from '../../cli/backup/erasure-ledger.ts';
import { checksum, MANIFEST_FILE, type Manifest } from '../../cli/backup/manifest.ts';
import { takeBackup } from '../../cli/backup/take.ts';
import { openSqliteKeyStore } from '../../eventstore/key-store-sqlite.ts';
import { seedCatalog } from '../support/cart-world.ts';
import {
  caughtUp,
  checkpoint,
  customer,
  filesHolding,
  historyOf,
  identifiedCart,
  personal,
  storedCustomer,
} from '../support/customer-world.ts';
import { startService, type TestService } from '../support/service.ts';
import { tempDir } from './support.ts';

const exec = promisify(execFile);
// The restored read.db names the first service's projector: the second takes its lease over soon.
const ENV = { PDS_PROJECTOR_LEASE: '1s' };

/** Identifies a customer on a cart and, once the projections hold them, takes a backup. */
async function backupOfIdentifiedCart(t: ExecutionContext, s: TestService, into: string) {
  await seedCatalog(s);
  const cart = await identifiedCart(t, s);
  await caughtUp(s);
  return { cart, taken: await takeBackup({ dataDir: s.dataDir, into, version: 'test' }) };
}

/** Puts the data dir's keys.db in the backup, its manifest's checksum with it: a copy taken later. */
async function copyKeysInto(backup: string, dataDir: string): Promise<void> {
  const keysCopy = path.join(backup, 'keys.db');
  copyFileSync(path.join(dataDir, 'keys.db'), keysCopy);
  const manifestFile = path.join(backup, MANIFEST_FILE);
  const manifest = JSON.parse(readFileSync(manifestFile, 'utf8')) as Manifest;
  const entry = manifest.files.find((f) => f.name === 'keys.db');
  if (!entry) throw new Error('the backup has no keys.db');
  Object.assign(entry, await checksum(keysCopy));
  writeFileSync(manifestFile, JSON.stringify(manifest));
}

/** Erases the customer; the erasure's id. */
async function erase(s: TestService): Promise<string> {
  const erased = await s.call('POST', '/admin/v1/customers/erase', { customer: customer.email });
  return ((await erased.json()) as { erasure_id: string }).erasure_id;
}

/** The erasure ids the key store in `dir` has yet to see recorded. */
async function pendingErasureIds(dir: string): Promise<string[]> {
  const keys = openSqliteKeyStore(path.join(dir, 'keys.db'));
  const pending = await keys.pendingErasures();
  await keys.close();
  return pending.map((e) => e.erasure_id);
}

async function pdsRestore(args: string[]) {
  try {
    const { stdout } = await exec(process.execPath, ['cli/pds.ts', 'restore', ...args], {
      env: { PATH: process.env.PATH ?? '' },
    });
    return { code: 0, stdout, stderr: '' };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return e;
  }
}

test('an erasure made after a backup is applied again by the restore: the restored service reads the customer as erased, and no byte of them is left', async (t) => {
  const backups = await tempDir(t, 'pds-backups-');
  const dataDir = await tempDir(t, 'pds-erased-');
  const s = await startService(t, { dataDir, env: { ...ENV, PDS_BACKUP_DIR: backups } });
  const { cart, taken } = await backupOfIdentifiedCart(t, s, backups);

  const erased = await s.call('POST', '/admin/v1/customers/erase', { customer: customer.email });
  const erasure = (await erased.json()) as { erasure_id: string; keys_destroyed: number };
  t.is(erasure.keys_destroyed, 1);
  const ledger = readFileSync(path.join(backups, ERASURE_LEDGER_FILE), 'utf8');
  t.like(JSON.parse(ledger), { erasure_id: erasure.erasure_id, cart_uuids: [cart.uuid] });
  t.false(
    personal.some((v) => ledger.includes(v)),
    'the ledger holds nothing personal',
  );
  await s.service.stop();

  const target = path.join(await tempDir(t, 'pds-restored-'), 'data');
  const restored = await pdsRestore([taken.dir, target]);
  t.is(restored.code, 0, restored.stderr);
  t.regex(
    restored.stdout,
    /\n1 erasure\(s\) the backup does not hold whole applied again from .*erasures\.jsonl: /,
  );
  // The key store of the data dir replaced records its erasures as well.
  const elsewhere = path.join(await tempDir(t, 'pds-restored-'), 'data');
  const fromKeys = await pdsRestore([taken.dir, elsewhere, '--erasures', path.join(dataDir, 'keys.db')]);
  t.is(fromKeys.code, 0, fromKeys.stderr);
  t.regex(fromKeys.stdout, /\n1 erasure\(s\) the backup does not hold whole applied again from .*keys\.db: /);
  const keys = openSqliteKeyStore(path.join(target, 'keys.db'));
  const [pending] = await keys.pendingErasures();
  await keys.close();
  t.like(pending, { erasure_id: erasure.erasure_id, cart_uuids: [cart.uuid] });

  const again = await startService(t, { dataDir: target, env: ENV });
  const history = await historyOf(again, cart.uuid);
  t.like(history.events.find((e) => e.type === 'CartCustomerIdentified')?.data, {
    email: null,
    erased: true,
  });
  t.truthy(history.events.find((e) => e.type === 'CartCustomerErased'));
  await caughtUp(again);
  await again.service.stop();
  t.is(await storedCustomer(target, cart.uuid), null);
  checkpoint(target);
  t.deepEqual(filesHolding(target, personal), []);
  // The backup itself still holds them: keep backups no longer than the law allows.
  t.true(filesHolding(taken.dir, personal).length > 0);
});

test('a restore without a ledger says that erasures made since are not applied again', async (t) => {
  const backups = await tempDir(t, 'pds-backups-');
  const dataDir = await tempDir(t, 'pds-plain-');
  const s = await startService(t, { dataDir });
  await seedCatalog(s);
  await s.service.stop();
  const taken = await takeBackup({ dataDir, into: backups, version: 'test' });
  const target = path.join(await tempDir(t, 'pds-restored-'), 'data');
  const restored = await pdsRestore([taken.dir, target]);
  t.is(restored.code, 0, restored.stderr);
  t.regex(
    restored.stdout,
    /\nno erasure ledger at .*erasures\.jsonl: erasures made after the backup are not applied again/,
  );
  // A ledger named that is not there is no ledger to skip: nothing is restored.
  const named = path.join(await tempDir(t, 'pds-restored-'), 'data');
  const missing = await pdsRestore([taken.dir, named, '--erasures', path.join(backups, 'nowhere.jsonl')]);
  t.is(missing.code, 3);
  t.regex(missing.stderr, /nowhere\.jsonl does not exist \(--erasures\)/);
  t.deepEqual(readdirSync(path.dirname(named)), []);
});

test('an erasure made while a backup was taken, finished in the copy’s keys.db but not in its log, is applied again and recorded by the restored service', async (t) => {
  const backups = await tempDir(t, 'pds-backups-');
  const dataDir = await tempDir(t, 'pds-between-');
  const s = await startService(t, { dataDir, env: { ...ENV, PDS_BACKUP_DIR: backups } });
  const { cart, taken } = await backupOfIdentifiedCart(t, s, backups);
  const erasure_id = await erase(s);
  await s.service.stop();

  // The copy of the log from before the erasure, the copy of the key store from after it, finished.
  await copyKeysInto(taken.dir, dataDir);
  t.deepEqual(await pendingErasureIds(taken.dir), []);

  const target = path.join(await tempDir(t, 'pds-restored-'), 'data');
  const restored = await pdsRestore([taken.dir, target]);
  t.is(restored.code, 0, restored.stderr);
  t.regex(restored.stdout, /\n1 erasure\(s\) the backup does not hold whole applied again/);
  t.deepEqual(await pendingErasureIds(target), [erasure_id]);

  const again = await startService(t, { dataDir: target, env: ENV });
  const history = await historyOf(again, cart.uuid);
  t.like(history.events.find((e) => e.type === 'CartCustomerErased')?.data, { erasure_id });
  await caughtUp(again);
  await again.service.stop();
  t.is(await storedCustomer(target, cart.uuid), null);
});

test('without any ledger, an erasure finished in the copy’s keys.db but not in its log is applied again from that keys.db', async (t) => {
  const backups = await tempDir(t, 'pds-backups-');
  const dataDir = await tempDir(t, 'pds-no-ledger-');
  const s = await startService(t, { dataDir, env: ENV });
  const { cart, taken } = await backupOfIdentifiedCart(t, s, backups);
  const erasure_id = await erase(s);
  await s.service.stop();
  t.false(readdirSync(backups).includes(ERASURE_LEDGER_FILE));

  // The copy of the log from before the erasure, the copy of the key store from after it, finished.
  await copyKeysInto(taken.dir, dataDir);

  const target = path.join(await tempDir(t, 'pds-restored-'), 'data');
  const restored = await pdsRestore([taken.dir, target]);
  t.is(restored.code, 0, restored.stderr);
  t.regex(restored.stdout, /\nno erasure ledger at .*erasures\.jsonl/);
  t.regex(
    restored.stdout,
    /\n1 erasure\(s\) the backup does not hold whole applied again from the backup's keys\.db/,
  );
  t.deepEqual(await pendingErasureIds(target), [erasure_id]);

  const again = await startService(t, { dataDir: target, env: ENV });
  const history = await historyOf(again, cart.uuid);
  t.like(history.events.find((e) => e.type === 'CartCustomerErased')?.data, { erasure_id });
  await again.service.stop();
});
