/**
 * A backup taken under cart traffic, then `kill -9`, a restore into another data dir and a start there
 * (docs/operations.md, "Backups"), the service a real child process and `pds backup` / `pds restore` the
 * operator's commands: every write acknowledged before the backup began is in the restored log; the
 * partner API answers what the restored log says; every status change in it gets its webhook, under the
 * id it was owed (a name-based id of subscription and event); a webhook the backup records delivered is
 * not sent again, and one still owed in it goes out.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import test, { type ExecutionContext } from 'ava';
import * as cart from '../../domain/cart.ts';
import * as delivery from '../../domain/webhook-delivery.ts';
import { pickupSteps, startCartTraffic } from '../support/cart-traffic.ts';
import { createWebhook, partnerCartView, seedCatalog, storeOperator } from '../support/cart-world.ts';
import { childDataDir, killChild, serveChild } from '../support/child-service.ts';
import { startReceiver } from '../support/webhook-receiver.ts';

const exec = promisify(execFile);
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const STORE_ID = 1;
/** A restored projector takes the lease its dead predecessor held once it runs out. */
const ENV = { PDS_PROJECTOR_LEASE: '1s' };

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function eventually(
  what: string,
  probe: () => Promise<boolean> | boolean,
  timeoutMs = 60_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await delay(50);
  }
}

async function pds(args: string[], env: Record<string, string> = {}): Promise<string> {
  const { stdout } = await exec(process.execPath, ['cli/pds.ts', ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', ...env },
  });
  return stdout;
}

interface LogRow {
  position: number;
  stream_id: string;
  revision: number;
  event_id: string;
  type: string;
  data: string;
}

/** The rows of an embedded log file, read beside whatever has it open. */
function readLog(file: string): LogRow[] {
  const db = new DatabaseSync(file, { readOnly: true });
  try {
    return db
      .prepare('SELECT position, stream_id, revision, event_id, type, data FROM events ORDER BY position')
      .all() as unknown as LogRow[];
  } finally {
    db.close();
  }
}

const deliveredIds = (rows: LogRow[]) =>
  new Set(
    rows
      .filter((r) => r.type === 'WebhookDeliveryAttempted' && JSON.parse(r.data).outcome === 'delivered')
      .map((r) => JSON.parse(r.data).delivery_id as string),
  );

async function tempDir(t: ExecutionContext, prefix: string): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), prefix));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

test('under cart traffic: back up, kill -9, restore elsewhere, start: every write acknowledged before the backup, the same read models, owed webhooks under their ids, none delivered sent again', async (t) => {
  t.timeout(240_000);
  const receiver = await startReceiver(t);
  // A receiver that takes its time, so that deliveries are still owed when the backup is taken.
  receiver.setDefault({ status: 200, delayMs: 40 });
  const dataDir = await childDataDir(t);
  const first = await serveChild(t, dataDir, ENV);
  await seedCatalog(first.api, [STORE_ID]);
  const { partnerId, key } = await storeOperator(first.api, 'Backup Test Shop', STORE_ID);
  const hook = await createWebhook(first.api, receiver.url, [STORE_ID]);
  const steps = pickupSteps(STORE_ID, STORE_ID * 100, partnerId);
  const traffic = startCartTraffic(first.api, {
    writers: 3,
    steps,
    pauseMs: 5,
    deadline: Date.now() + 180_000,
  });
  await eventually('traffic under way', () => traffic.steps() >= 80 && receiver.received.length >= 5);

  // Acknowledged before the backup began: in the restored log, whatever comes after.
  const acknowledged = traffic.acknowledged();
  const backups = await tempDir(t, 'pds-backups-');
  const taken = JSON.parse(await pds(['backup', backups, '--json'], { PDS_DATA_DIR: dataDir })) as {
    backup: string;
    manifest: { log: { head: number; events: number } };
  };
  const stepsAtBackup = traffic.steps();
  await eventually('traffic after the backup', () => traffic.steps() >= stepsAtBackup + 40);
  await killChild(first);
  await traffic.abandon();
  const receivedBeforeRestore = receiver.received.length;

  const restoredDir = path.join(await tempDir(t, 'pds-restored-'), 'data');
  await pds(['restore', taken.backup, restoredDir]);
  const backupLog = readLog(path.join(restoredDir, 'events.db'));
  t.is(backupLog.length, taken.manifest.log.events);
  t.is(backupLog.at(-1)?.position, taken.manifest.log.head);
  const second = await serveChild(t, restoredDir, ENV);

  // Every write acknowledged before the backup: each cart at least at the revision it was answered.
  const cartRevision = new Map<string, number>();
  for (const row of backupLog)
    if (row.stream_id.startsWith('cart-')) cartRevision.set(row.stream_id, row.revision);
  for (const c of acknowledged) {
    t.true((cartRevision.get(cart.streamId(c.uuid)) ?? -1) >= c.revision, `cart ${c.uuid} at ${c.revision}`);
  }
  t.true(acknowledged.length > 10, `${acknowledged.length} carts acknowledged before the backup`);

  // The read models answer what the restored log says.
  const stepEvents = new Map<string, string[]>();
  for (const row of backupLog.filter((r) => r.stream_id.startsWith('cart-'))) {
    const uuid = row.stream_id.slice('cart-'.length);
    const label = row.type === 'CartStatusChanged' ? `${row.type}:${JSON.parse(row.data).to}` : row.type;
    stepEvents.set(uuid, [...(stepEvents.get(uuid) ?? []), label]);
  }
  const allSteps = steps.flatMap((s) => s.events);
  const expectedView = new Map<string, string>();
  for (const [uuid, events] of stepEvents) {
    t.deepEqual(events, allSteps.slice(0, events.length), `cart ${uuid}: whole steps, in order`);
    const moves = events.filter((e) => e.startsWith('CartStatusChanged:'));
    const status =
      moves.length === 0 ? 'pending' : (moves.at(-1) as string).slice('CartStatusChanged:'.length);
    expectedView.set(uuid, `${status}, ${events.includes('CartItemAdded') ? 1 : 0} line(s)`);
  }
  await eventually('the read models caught up', async () => {
    const view = await partnerCartView(second.base, key, STORE_ID);
    return view.size === expectedView.size && [...expectedView].every(([uuid, v]) => view.get(uuid) === v);
  });
  t.deepEqual(await partnerCartView(second.base, key, STORE_ID), expectedView);

  // Webhooks: every status change in the restored log, under the id it is owed; none under another.
  const owed = new Set(
    backupLog
      .filter((r) => r.type === 'CartStatusChanged' && r.stream_id.startsWith('cart-'))
      .map((r) => delivery.deliveryId(hook.id, r.event_id)),
  );
  const deliveredInBackup = deliveredIds(backupLog);
  const pendingInBackup = [...owed].filter((id) => !deliveredInBackup.has(id));
  t.true(
    deliveredInBackup.size > 0 && pendingInBackup.length > 0,
    `${deliveredInBackup.size} delivered, ${pendingInBackup.length} owed`,
  );
  const idOf = (i: number) => String(receiver.received[i].headers['x-service-webhook-id']);
  const afterRestore = () =>
    receiver.received.slice(receivedBeforeRestore).map((_, i) => idOf(receivedBeforeRestore + i));
  await eventually('every owed webhook sent after the restore', () => {
    const sent = new Set(afterRestore());
    return pendingInBackup.every((id) => sent.has(id));
  });
  await eventually('every owed webhook recorded delivered', () => {
    const delivered = deliveredIds(readLog(path.join(restoredDir, 'events.db')));
    return [...owed].every((id) => delivered.has(id));
  });
  const sentAfter = afterRestore();
  t.deepEqual(
    sentAfter.filter((id) => !owed.has(id)),
    [],
    'nothing sent under an id the restored log does not owe',
  );
  t.deepEqual(
    sentAfter.filter((id) => deliveredInBackup.has(id)),
    [],
    'nothing the backup records delivered sent again',
  );
  t.log(
    `backup at position ${taken.manifest.log.head}: ${acknowledged.length} carts acknowledged before it, ` +
      `${deliveredInBackup.size} webhooks delivered in it, ${pendingInBackup.length} owed and sent after the restore`,
  );
});
