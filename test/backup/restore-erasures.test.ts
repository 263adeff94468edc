/**
 * An erasure is never undone by a restore (docs/operations.md, "Backups"): an erasure made after a
 * backup is in the erasure ledger beside the backups, and `pds restore` applies it again to the
 * restored key store; the service, started there, records it on the cart. The customer reads as
 * erased, and no byte of their data is in the restored data dir.
 */
import { execFile } from 'node:child_process';
import { copyFileSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { promisify } from 'node:util';
import test from 'ava';
import { ERASURE_LEDGER_FILE } from '../../cli/backup/erasure-ledger.ts';
import { checksum, MANIFEST_FILE, type Manifest } from '../../cli/backup/manifest.ts';
import { takeBackup } from '../../cli/backup/take.ts';
import { openSqliteKeyStore } from '../../eventstore/key-store-sqlite.ts';
import { openReadStore } from '../../projections/index.ts';
import { CARTS, type CartDoc, cartByUuid } from '../../projections/read-models/carts.ts';
import { addItem, createCart, seedCatalog } from '../support/cart-world.ts';
import { until } from '../support/probes.ts';
import { startService, type TestService } from '../support/service.ts';
import { tempDir } from './support.ts';

const exec = promisify(execFile);
// The restored read.db names the first service's projector: the second takes its lease over soon.
const ENV = { PDS_PROJECTOR_LEASE: '1s' };

// Values no random bytes or base64 text of the files would hold by chance.
const customer = {
  email: 'leopoldine.wraxhammer@example.org',
  first_name: 'Leopoldine',
  last_name: 'Wraxhammer',
  phone_number: '+14155553579',
  DOB: '1969-07-20T00:00:00.000Z',
};
const personal = [customer.email, customer.first_name, customer.last_name, customer.phone_number];

function filesHolding(dir: string, values: readonly string[]): string[] {
  const found: string[] = [];
  for (const name of readdirSync(dir, { recursive: true }) as string[]) {
    const file = path.join(dir, name);
    if (!statSync(file).isFile()) continue;
    const bytes = readFileSync(file);
    const held = values.filter((v) => bytes.includes(Buffer.from(v, 'utf8')));
    if (held.length > 0) found.push(`${name}: ${held.join(', ')}`);
  }
  return found;
}

function checkpoint(dir: string): void {
  for (const name of readdirSync(dir).filter((n) => n.endsWith('.db'))) {
    const db = new DatabaseSync(path.join(dir, name));
    db.exec('PRAGMA busy_timeout = 5000');
    db.exec('PRAGMA wal_checkpoint(TRUNCATE)');
    db.close();
  }
}

const caughtUp = (s: TestService) =>
  until('the projections have caught up', async () => {
    const { projections } = (await (await s.call('GET', '/admin/v1/projections')).json()) as {
      projections: Array<{ lag_events: number }>;
    };
    return projections.every((p) => p.lag_events === 0);
  });

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
  await seedCatalog(s);
  const cart = await createCart(s);
  await addItem(s, cart);
  t.is((await s.call('PUT', `/platform/v1/carts/${cart.uuid}/customer`, customer)).status, 200);
  await caughtUp(s);
  const taken = await takeBackup({ dataDir, into: backups, version: 'test' });

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
  const history = (await (await again.call('GET', `/admin/v1/carts/${cart.uuid}/history`)).json()) as {
    events: Array<{ type: string; data: Record<string, unknown> }>;
  };
  t.like(history.events.find((e) => e.type === 'CartCustomerIdentified')?.data, {
    email: null,
    erased: true,
  });
  t.truthy(history.events.find((e) => e.type === 'CartCustomerErased'));
  await caughtUp(again);
  await again.service.stop();
  const read = await openReadStore(`sqlite:${path.join(target, 'read.db')}`);
  const doc = await cartByUuid(await read.collection<CartDoc>(CARTS), cart.uuid);
  await read.close();
  t.is(doc?._state.customer, null);
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
  await seedCatalog(s);
  const cart = await createCart(s);
  await addItem(s, cart);
  t.is((await s.call('PUT', `/platform/v1/carts/${cart.uuid}/customer`, customer)).status, 200);
  await caughtUp(s);
  const taken = await takeBackup({ dataDir, into: backups, version: 'test' });
  const erased = await s.call('POST', '/admin/v1/customers/erase', { customer: customer.email });
  const { erasure_id } = (await erased.json()) as { erasure_id: string };
  await s.service.stop();

  // The copy of the log from before the erasure, the copy of the key store from after it, finished.
  const keysCopy = path.join(taken.dir, 'keys.db');
  copyFileSync(path.join(dataDir, 'keys.db'), keysCopy);
  const manifestFile = path.join(taken.dir, MANIFEST_FILE);
  const manifest = JSON.parse(readFileSync(manifestFile, 'utf8')) as Manifest;
  const entry = manifest.files.find((f) => f.name === 'keys.db');
  if (!entry) throw new Error('the backup has no keys.db');
  Object.assign(entry, await checksum(keysCopy));
  writeFileSync(manifestFile, JSON.stringify(manifest));
  const copied = openSqliteKeyStore(keysCopy);
  t.deepEqual(await copied.pendingErasures(), []);
  await copied.close();

  const target = path.join(await tempDir(t, 'pds-restored-'), 'data');
  const restored = await pdsRestore([taken.dir, target]);
  t.is(restored.code, 0, restored.stderr);
  t.regex(restored.stdout, /\n1 erasure\(s\) the backup does not hold whole applied again/);
  const keys = openSqliteKeyStore(path.join(target, 'keys.db'));
  t.deepEqual(
    (await keys.pendingErasures()).map((e) => e.erasure_id),
    [erasure_id],
  );
  await keys.close();

  const again = await startService(t, { dataDir: target, env: ENV });
  const history = (await (await again.call('GET', `/admin/v1/carts/${cart.uuid}/history`)).json()) as {
    events: Array<{ type: string; data: Record<string, unknown> }>;
  };
  t.like(history.events.find((e) => e.type === 'CartCustomerErased')?.data, { erasure_id });
  await caughtUp(again);
  await again.service.stop();
  const read = await openReadStore(`sqlite:${path.join(target, 'read.db')}`);
  const doc = await cartByUuid(await read.collection<CartDoc>(CARTS), cart.uuid);
  await read.close();
  t.is(doc?._state.customer, null);
});

test('without any ledger, an erasure finished in the copy’s keys.db but not in its log is applied again from that keys.db', async (t) => {
  const backups = await tempDir(t, 'pds-backups-');
  const dataDir = await tempDir(t, 'pds-no-ledger-');
  const s = await startService(t, { dataDir, env: ENV });
  await seedCatalog(s);
  const cart = await createCart(s);
  await addItem(s, cart);
  t.is((await s.call('PUT', `/platform/v1/carts/${cart.uuid}/customer`, customer)).status, 200);
  await caughtUp(s);
  const taken = await takeBackup({ dataDir, into: backups, version: 'test' });
  const erased = await s.call('POST', '/admin/v1/customers/erase', { customer: customer.email });
  const { erasure_id } = (await erased.json()) as { erasure_id: string };
  await s.service.stop();
  t.false(readdirSync(backups).includes(ERASURE_LEDGER_FILE));

  // The copy of the log from before the erasure, the copy of the key store from after it, finished.
  const keysCopy = path.join(taken.dir, 'keys.db');
  copyFileSync(path.join(dataDir, 'keys.db'), keysCopy);
  const manifestFile = path.join(taken.dir, MANIFEST_FILE);
  const manifest = JSON.parse(readFileSync(manifestFile, 'utf8')) as Manifest;
  const entry = manifest.files.find((f) => f.name === 'keys.db');
  if (!entry) throw new Error('the backup has no keys.db');
  Object.assign(entry, await checksum(keysCopy));
  writeFileSync(manifestFile, JSON.stringify(manifest));

  const target = path.join(await tempDir(t, 'pds-restored-'), 'data');
  const restored = await pdsRestore([taken.dir, target]);
  t.is(restored.code, 0, restored.stderr);
  t.regex(restored.stdout, /\nno erasure ledger at .*erasures\.jsonl/);
  t.regex(
    restored.stdout,
    /\n1 erasure\(s\) the backup does not hold whole applied again from the backup's keys\.db/,
  );
  const keys = openSqliteKeyStore(path.join(target, 'keys.db'));
  t.deepEqual(
    (await keys.pendingErasures()).map((e) => e.erasure_id),
    [erasure_id],
  );
  await keys.close();

  const again = await startService(t, { dataDir: target, env: ENV });
  const history = (await (await again.call('GET', `/admin/v1/carts/${cart.uuid}/history`)).json()) as {
    events: Array<{ type: string; data: Record<string, unknown> }>;
  };
  t.like(history.events.find((e) => e.type === 'CartCustomerErased')?.data, { erasure_id });
  await again.service.stop();
});
