/**
 * `pds customers protect` end to end on the embedded files (docs/operations.md, "Customer data"): a
 * data dir whose log an earlier version wrote (the customer, the webhook body and the recorded answer
 * in plain text) is sealed in place; the service then reads the customer as before, and erasing them
 * leaves no byte of their data in any file of the data dir.
 */
import { execFile } from 'node:child_process';
import { readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { promisify } from 'node:util';
import test from 'ava';
import { oneEventDataDir, tempDir } from './backup/support.ts';
import { addItem, createCart, createWebhook, seedCatalog } from './support/cart-world.ts';
import {
  caughtUp,
  checkpoint,
  customer,
  filesHolding,
  identifiedCart,
  personal,
} from './support/customer-world.ts';
import { unsealLog } from './support/plaintext-log.ts';
import { startService } from './support/service.ts';
import { startReceiver } from './support/webhook-receiver.ts';

const exec = promisify(execFile);

async function pds(env: Record<string, string>, args: string[]) {
  try {
    const { stdout, stderr } = await exec(process.execPath, ['cli/pds.ts', ...args], {
      env: { PATH: process.env.PATH ?? '', ...env },
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

test('pds customers protect seals an earlier version’s plain log in place; then an erasure leaves no byte of the customer', async (t) => {
  const dataDir = await tempDir(t, 'pds-protect-cli-');
  const first = await startService(t, { dataDir });
  const receiver = await startReceiver(t);
  await seedCatalog(first);
  await createWebhook(first, receiver.url, [1], ['cart_status_updated']);
  const cart = await identifiedCart(t, first);
  const once = { 'Idempotency-Key': 'checkout-1', 'content-type': 'application/json' };
  const checkout = { reservation_mode: 'pickup', reservation_start_window: '2026-03-01 10:00' };
  t.is((await first.call('POST', `/platform/v1/carts/${cart.uuid}/checkout`, checkout, once)).status, 200);
  await receiver.waitFor(1);
  await caughtUp(first);
  await first.service.stop();

  // As an earlier version left it: the customer in plain text in the log.
  t.true((await unsealLog(dataDir)) >= 3);
  t.true(filesHolding(dataDir, personal, 'events.db').length > 0);

  const env = { PDS_DATA_DIR: dataDir };
  const run = await pds(env, ['customers', 'protect', '--vacuum', '--json']);
  t.is(run.code, 0, run.stderr);
  const report = JSON.parse(run.stdout);
  t.like(report, {
    from: 0,
    sealed: { CartCustomerIdentified: 1, WebhookDeliveryScheduled: 1, IdempotentResponseRecorded: 1 },
    sealed_erased: 0,
    wal_truncated: true,
    vacuumed: true,
  });
  t.deepEqual(filesHolding(dataDir, personal, 'events.db'), []);
  const again = await pds(env, ['customers', 'protect']);
  t.is(again.code, 0);
  t.regex(
    again.stdout,
    new RegExp(`^nothing to do: the log is protected up to position ${report.through} \\(finished 20\\d\\d-`),
  );

  // The service reads the customer as before, and erasing them by email finds the key protect made.
  const second = await startService(t, { dataDir });
  const history = await (await second.call('GET', `/admin/v1/carts/${cart.uuid}/history`)).text();
  t.true(history.includes(customer.email));
  const erased = await second.call('POST', '/admin/v1/customers/erase', { customer: customer.email });
  t.like(await erased.json(), { keys_destroyed: 1, carts: [cart.uuid] });
  await caughtUp(second);
  await second.service.stop();
  checkpoint(dataDir);
  t.deepEqual(filesHolding(dataDir, personal), []);
});

test('pds customers protect refuses a split deployment and a data dir without a log', async (t) => {
  const split = await pds(
    {
      PDS_EVENT_STORE: 'esdb://localhost:2113?tls=false',
      PDS_READ_STORE: 'mongodb://localhost/pds',
      PDS_SECRET_KEY: Buffer.alloc(32, 7).toString('base64'),
      PDS_OPERATOR_TOKEN: 'an-operator-token-for-the-test',
    },
    ['customers', 'protect'],
  );
  t.is(split.code, 2);
  t.regex(split.stderr, /EventStoreDB, whose events are never rewritten/);
  const empty = await tempDir(t, 'pds-protect-empty-');
  const missing = await pds({ PDS_DATA_DIR: empty }, ['customers', 'protect']);
  t.is(missing.code, 3);
  t.regex(missing.stderr, /events\.db does not exist/);
  t.deepEqual(readdirSync(empty), []);
  // A log without the service's secret key: a key wrapped by another one would open nothing.
  const keyless = await tempDir(t, 'pds-protect-keyless-');
  writeFileSync(path.join(keyless, 'events.db'), '');
  const noKey = await pds({ PDS_DATA_DIR: keyless }, ['customers', 'protect']);
  t.is(noKey.code, 2);
  t.regex(noKey.stderr, /run protect with the service's PDS_SECRET_KEY/);
  t.deepEqual(readdirSync(keyless), ['events.db']);
});

test('pds customers protect runs beside the serving service: the service reads the sealed customer and goes on writing', async (t) => {
  const dataDir = await tempDir(t, 'pds-protect-live-');
  const first = await startService(t, { dataDir });
  await seedCatalog(first);
  const cart = await identifiedCart(t, first);
  await first.service.stop();
  await unsealLog(dataDir);

  const serving = await startService(t, { dataDir });
  const env = { PDS_DATA_DIR: dataDir };
  // Carts written while it runs: their appends wait at most for one batch's transaction.
  const writes = Promise.all(
    Array.from({ length: 5 }, async () => {
      const c = await createCart(serving);
      await addItem(serving, c);
    }),
  );
  const run = await pds(env, ['customers', 'protect', '--batch', '1', '--json']);
  await writes;
  // Sealed, but not finished: events.db was not rebuilt, which waits for the service to stop.
  t.is(run.code, 7, run.stderr);
  t.like(JSON.parse(run.stdout), { sealed: { CartCustomerIdentified: 1 }, vacuumed: false, finished: false });
  const history = await (await serving.call('GET', `/admin/v1/carts/${cart.uuid}/history`)).text();
  t.true(history.includes(customer.email));
  const next = await createCart(serving);
  await addItem(serving, next);
  const erased = await serving.call('POST', '/admin/v1/customers/erase', { customer: cart.uuid });
  t.like(await erased.json(), { keys_destroyed: 1, carts: [cart.uuid] });
  const after = await (await serving.call('GET', `/admin/v1/carts/${cart.uuid}/history`)).text();
  t.false(personal.some((v) => after.includes(v)));
});

test('pds customers protect seals the bodies the dispatcher kept in plain text for a retry: a retry after the erasure goes without the customer', async (t) => {
  const dataDir = await tempDir(t, 'pds-protect-pending-');
  const env = { PDS_WEBHOOK_RETRY_SCHEDULE: '0s,1s,1s,1s,1s,1s,1s,1s,1s,1s' };
  const receiver = await startReceiver(t);
  receiver.setDefault({ status: 503, body: 'down' });
  const first = await startService(t, { dataDir, env });
  await seedCatalog(first);
  await createWebhook(first, receiver.url, [1], ['cart_status_updated']);
  const cart = await identifiedCart(t, first);
  const checkout = { reservation_mode: 'pickup', reservation_start_window: '2026-03-01 10:00' };
  t.is((await first.call('POST', `/platform/v1/carts/${cart.uuid}/checkout`, checkout)).status, 200);
  await receiver.waitFor(1);
  await first.service.stop();
  await unsealLog(dataDir);
  checkpoint(dataDir);
  // As that version kept it: the pending delivery's body, in plain text, in the dispatcher's state.
  t.true(filesHolding(dataDir, [customer.email], 'dispatcher.db').length > 0);

  const run = await pds({ PDS_DATA_DIR: dataDir }, ['customers', 'protect', '--vacuum', '--json']);
  t.is(run.code, 0, run.stderr);
  t.like(JSON.parse(run.stdout), { deliveries_sealed: 1, finished: true });
  t.deepEqual(filesHolding(dataDir, personal, 'dispatcher.db'), []);
  t.deepEqual(filesHolding(dataDir, personal, 'events.db'), []);

  const second = await startService(t, { dataDir, env });
  const erased = await second.call('POST', '/admin/v1/customers/erase', { customer: customer.email });
  t.like(await erased.json(), { keys_destroyed: 1, carts: [cart.uuid] });
  // An attempt already on its way when the erasure answered carries the body it opened before; the
  // delivery's attempts follow one another, so the one after the next to arrive opened it after.
  await receiver.waitFor(receiver.received.length + 1, 20_000);
  const before = receiver.received.length;
  receiver.setDefault({ status: 200, body: 'ok' });
  const after = (await receiver.waitFor(before + 1, 20_000))[before];
  t.false(personal.some((v) => JSON.stringify(after.body).includes(v)));
  t.like(after.body, { cart: { uuid: cart.uuid, customer_email_address: '' } });
});

test('pds customers protect --vacuum rebuilds read.db too: a document deleted in a file written without secure_delete leaves nothing behind', async (t) => {
  const dataDir = await oneEventDataDir(t, 'pds-protect-read-');
  const marker = 'Quillonbrecht-read-marker-7731';
  const read = new DatabaseSync(path.join(dataDir, 'read.db'));
  read.exec('PRAGMA journal_mode = WAL');
  read.exec('PRAGMA secure_delete = OFF');
  read.exec('CREATE TABLE docs (_id TEXT PRIMARY KEY, doc TEXT)');
  read.prepare('INSERT INTO docs VALUES (?, ?)').run('a', JSON.stringify({ name: marker.repeat(50) }));
  read.exec('PRAGMA wal_checkpoint(TRUNCATE)');
  read.prepare('DELETE FROM docs WHERE _id = ?').run('a');
  read.exec('PRAGMA wal_checkpoint(TRUNCATE)');
  read.close();
  t.deepEqual(filesHolding(dataDir, [marker], 'read.db'), [`read.db: ${marker}`], 'the free page holds it');

  const env = { PDS_DATA_DIR: dataDir, PDS_SECRET_KEY: Buffer.alloc(32, 7).toString('base64') };
  const run = await pds(env, ['customers', 'protect', '--vacuum']);
  t.is(run.code, 0, run.stderr);
  t.deepEqual(filesHolding(dataDir, [marker], 'read.db'), []);
});
