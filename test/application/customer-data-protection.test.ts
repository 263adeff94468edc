/**
 * `protectStoredCustomerData` on the embedded files (docs/operations.md, "Customer data"): a log
 * written before sealing, its personal data in plain text, is sealed in place, in batches, resumably.
 * Afterwards the log reads as before through the service's store (erased where the cart recorded an
 * erasure), and neither `events.db` nor its WAL holds a byte of the customers' data.
 */
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { createCustomerData } from '../../application/customer-data.ts';
import {
  type ProtectionReport,
  protectStoredCustomerData,
} from '../../application/customer-data-protection.ts';
import { protectCustomerData } from '../../application/protected-event-store.ts';
import { openSqliteKeyStore } from '../../eventstore/key-store-sqlite.ts';
import type { RecordedEvent } from '../../eventstore/port.ts';
import { openEventDataRewrite } from '../../eventstore/sqlite/rewrite.ts';
import { openSqliteEventStore } from '../../eventstore/sqlite.ts';
import { tempDir } from '../backup/support.ts';
import { META, rawEvent } from '../support/raw-events.ts';

const live = {
  email: 'ottoline.brackenbury@example.org',
  first_name: 'Ottoline',
  last_name: 'Brackenbury',
  phone_number: '+14155558642',
  DOB: '1979-02-03T00:00:00.000Z',
};
const gone = {
  email: 'peregrina.vanstrumpf@example.org',
  first_name: 'Peregrina',
  last_name: 'Vanstrumpf',
  phone_number: '+14155559753',
  DOB: '1991-11-12T00:00:00.000Z',
};
const personal = (c: typeof live) => [c.email, c.first_name, c.last_name, c.phone_number];
const LIVE_CART = '11111111-1111-4111-8111-111111111111';
const GONE_CART = '22222222-2222-4222-8222-222222222222';
const secretKey = randomBytes(32);

const cartRecord = (uuid: string, c: typeof live) => ({
  cart: {
    uuid,
    customer_email_address: c.email,
    customer_phone_number: c.phone_number,
    customer_name: `${c.first_name} ${c.last_name}`,
  },
});

/** A log as an earlier version wrote it: both customers' data in plain text, one of them erased since. */
async function plainLog(t: ExecutionContext): Promise<string> {
  const dir = await tempDir(t, 'pds-protect-');
  const store = await openSqliteEventStore(path.join(dir, 'events.db'));
  for (const [uuid, c] of [
    [LIVE_CART, live],
    [GONE_CART, gone],
  ] as const) {
    const v1 = { ...rawEvent('CartCustomerIdentified', { ...c }), metadata: { ...META, schema_version: 1 } };
    const v2 = {
      ...rawEvent('CartCustomerIdentified', { ...c, user_id: `u-${uuid.slice(0, 4)}` }),
      metadata: { ...META, schema_version: 2 },
    };
    await store.append(`cart-${uuid}`, [
      rawEvent('CartCreated', { uuid }),
      v1,
      rawEvent('CurbsideArrivalPosted', { fields: { car: `${c.first_name}'s green wagon` } }),
      v2,
    ]);
    await store.append(`queue-${uuid}`, [
      rawEvent('WebhookDeliveryScheduled', { body: JSON.stringify(cartRecord(uuid, c)) }),
    ]);
    await store.append(`idempotency-${uuid}`, [
      rawEvent('IdempotentResponseRecorded', { status: 200, body: cartRecord(uuid, c) }),
      rawEvent('IdempotentResponseRecorded', { status: 200, body: { cart: { uuid } } }),
    ]);
  }
  await store.append(`cart-${GONE_CART}`, [rawEvent('CartCustomerErased', { erasure_id: 'e-1' })]);
  // After the erasure, the same cart's customer is identified again: that one is live.
  await store.append(`cart-${GONE_CART}`, [
    rawEvent('CurbsideArrivalPosted', { fields: { car: 'a blue scooter' } }),
  ]);
  await store.close();
  return dir;
}

async function protect(
  dir: string,
  options: { batchSize?: number; vacuum?: boolean; onBatch?: () => void } = {},
) {
  const keys = openSqliteKeyStore(path.join(dir, 'keys.db'));
  const rewrite = openEventDataRewrite(path.join(dir, 'events.db'), 'customers-protect');
  try {
    return await protectStoredCustomerData({
      rewrite,
      data: createCustomerData(keys, secretKey),
      scratch: (scratch) => createCustomerData(scratch, secretKey),
      batchSize: options.batchSize ?? 2,
      vacuum: options.vacuum,
      onBatch: options.onBatch,
    });
  } finally {
    await rewrite.close();
    await keys.close();
  }
}

/** The whole log, raw and as the service reads it (opened, webhook bodies too). */
async function readLog(dir: string) {
  const raw = await openSqliteEventStore(path.join(dir, 'events.db'));
  const keys = openSqliteKeyStore(path.join(dir, 'keys.db'));
  const data = createCustomerData(keys, secretKey);
  try {
    const stored = await raw.readAll();
    const opened = await protectCustomerData(raw, data).readAll();
    const shown = await Promise.all(
      opened.map(async (e: RecordedEvent) => {
        const d = e.data as { body?: unknown };
        const body = typeof d.body === 'string' ? await data.openBody(d.body) : d.body;
        return {
          position: e.position,
          id: e.id,
          type: e.type,
          data: body === undefined ? d : { ...d, body },
        };
      }),
    );
    return { stored, shown };
  } finally {
    await keys.close();
    await raw.close();
  }
}

function bytesOf(dir: string, values: readonly string[]): string[] {
  const found: string[] = [];
  for (const name of readdirSync(dir).filter((n) => n.startsWith('events.db'))) {
    const bytes = readFileSync(path.join(dir, name));
    for (const v of values) if (bytes.includes(Buffer.from(v))) found.push(`${name}: ${v}`);
  }
  return found;
}

const sealedTotal = (r: ProtectionReport) => Object.values(r.sealed).reduce((a, b) => a + b, 0);

test('protect seals every plain event in place: same positions and ids, the same data read back, no byte left in events.db or its WAL', async (t) => {
  const dir = await plainLog(t);
  const before = await readLog(dir);
  t.true(bytesOf(dir, personal(live)).length > 0);

  const report = await protect(dir, { vacuum: true });
  t.deepEqual(report.sealed, {
    CartCustomerIdentified: 4,
    CurbsideArrivalPosted: 3,
    WebhookDeliveryScheduled: 2,
    IdempotentResponseRecorded: 2,
  });
  // The erased customer's identification, arrival, webhook body and recorded answer.
  t.is(report.sealed_erased, 5);
  t.is(report.scanned, 13);
  t.true(report.wal_truncated);

  const after = await readLog(dir);
  t.deepEqual(
    after.stored.map((e) => [e.position, e.id, e.streamId, e.revision, e.type, e.metadata]),
    before.stored.map((e) => [e.position, e.id, e.streamId, e.revision, e.type, e.metadata]),
  );
  // Everything but the erased customer's reads back as it was written.
  const kept = before.shown.map((e) => !personal(gone).some((v) => JSON.stringify(e).includes(v)));
  t.deepEqual(
    after.shown.filter((_, i) => kept[i]),
    before.shown.filter((_, i) => kept[i]),
  );
  const goneIdentified = after.shown.filter(
    (e) => e.type === 'CartCustomerIdentified' && JSON.stringify(e.data).includes('erased'),
  );
  t.is(goneIdentified.length, 2);
  t.like(goneIdentified[0].data, { email: null, first_name: null, erased: true });
  t.like(after.shown.at(-1)?.data, { fields: { car: 'a blue scooter' } });
  t.false(JSON.stringify(after.shown).includes(gone.email));
  t.deepEqual(bytesOf(dir, [...personal(live), ...personal(gone)]), []);
});

test('a run stopped after a batch resumes where it was; a finished one has nothing left to do', async (t) => {
  const dir = await plainLog(t);
  const before = await readLog(dir);
  let batches = 0;
  const stopped = await protect(dir, {
    onBatch: () => {
      if (++batches === 2) throw new Error('killed');
    },
  }).catch((error: Error) => error.message);
  t.is(stopped, 'killed');

  const resumed = await protect(dir);
  t.true(resumed.from > 0);
  // Without a rebuild of the file, no event's data holds anything of either customer.
  const { stored } = await readLog(dir);
  t.false([...personal(live), ...personal(gone)].some((v) => JSON.stringify(stored).includes(v)));
  const again = await protect(dir, { vacuum: true });
  t.deepEqual(
    [again.from, again.through, again.scanned, sealedTotal(again)],
    [resumed.through, resumed.through, 0, 0],
  );
  t.truthy(again.finished_before);

  // The same end state as one uninterrupted run: every event reads as one run leaves it.
  const once = await plainLog(t);
  await protect(once);
  const strip = (log: Awaited<ReturnType<typeof readLog>>) => log.shown.map((e) => [e.position, e.data]);
  t.deepEqual(strip(await readLog(dir)), strip(await readLog(once)));
  t.notDeepEqual(strip(await readLog(dir)), strip(before));
  t.deepEqual(bytesOf(dir, [...personal(live), ...personal(gone)]), []);
});

test('an erasure appended while a batch is sealed sends the walk back to read it: that cart is sealed erased', async (t) => {
  const dir = await plainLog(t);
  const keys = openSqliteKeyStore(path.join(dir, 'keys.db'));
  const rewrite = openEventDataRewrite(path.join(dir, 'events.db'), 'customers-protect');
  t.teardown(async () => {
    await rewrite.close();
    await keys.close();
  });
  let erased = false;
  const report = await protectStoredCustomerData({
    rewrite: {
      ...rewrite,
      async write(changes, through, guard) {
        if (!erased) {
          // The service erases the live customer's cart between the read and the write of the first batch.
          erased = true;
          const store = await openSqliteEventStore(path.join(dir, 'events.db'));
          await store.append(`cart-${LIVE_CART}`, [rawEvent('CartCustomerErased', { erasure_id: 'e-2' })]);
          await store.close();
        }
        return rewrite.write(changes, through, guard);
      },
    },
    data: createCustomerData(keys, secretKey),
    scratch: (scratch) => createCustomerData(scratch, secretKey),
    batchSize: 2,
  });
  // Both customers' identifications, arrivals, webhook bodies and answers.
  t.is(report.sealed_erased, 5 + 5);
  const { shown } = await readLog(dir);
  const identified = shown.filter((e) => e.type === 'CartCustomerIdentified');
  t.true(identified.every((e) => (e.data as { erased?: boolean }).erased === true));
});

test('two runs at once seal each event once, and each counts only what it wrote', async (t) => {
  const dir = await plainLog(t);
  const before = await readLog(dir);
  const [a, b] = await Promise.all([protect(dir, { batchSize: 1 }), protect(dir, { batchSize: 1 })]);
  t.is(sealedTotal(a) + sealedTotal(b), 11);
  t.is(a.sealed_erased + b.sealed_erased, 5);
  const after = await readLog(dir);
  const kept = before.shown.map((e) => !personal(gone).some((v) => JSON.stringify(e).includes(v)));
  t.deepEqual(
    after.shown.filter((_, i) => kept[i]),
    before.shown.filter((_, i) => kept[i]),
  );
});

test('without a vacuum a run is not finished: the old values may stay in the file; a run with one finishes it', async (t) => {
  const dir = await plainLog(t);
  const sealed = await protect(dir);
  t.like(sealed, { vacuumed: false, finished: false, wal_truncated: true });
  // No event holds them; what the file holds besides its events is what the vacuum is for.
  const { stored } = await readLog(dir);
  t.false([...personal(live), ...personal(gone)].some((v) => JSON.stringify(stored).includes(v)));
  t.true(bytesOf(dir, [...personal(live), ...personal(gone)]).length > 0);
  const vacuumed = await protect(dir, { vacuum: true });
  t.like(vacuumed, { from: sealed.through, scanned: 0, vacuumed: true, finished: true });
  t.deepEqual(bytesOf(dir, [...personal(live), ...personal(gone)]), []);
  // Finished stays finished, until a run seals something again.
  t.like(await protect(dir), { finished: true });
});

test('a customer erased before is sealed under keys whose tombstones name the cart’s erasure: read as erased, never as a key missing', async (t) => {
  const dir = await plainLog(t);
  await protect(dir, { vacuum: true });
  const raw = await openSqliteEventStore(path.join(dir, 'events.db'));
  const events = await raw.readAll();
  await raw.close();
  const erasure = events.find((e) => e.type === 'CartCustomerErased');
  const goneIdentified = events.filter(
    (e) => e.streamId === `cart-${GONE_CART}` && e.type === 'CartCustomerIdentified',
  );
  const keys = openSqliteKeyStore(path.join(dir, 'keys.db'));
  t.teardown(() => keys.close());
  for (const e of goneIdentified) {
    const { key_id } = (e.data as { personal: { key_id: string } }).personal;
    t.like(await keys.key(key_id), { tombstone: { erasure_id: 'e-1', erased_at: erasure?.recordedAt } });
  }
  t.is(goneIdentified.length, 2);
});

test('an event of a version without user_id is sealed with its cart’s user id: erasing by that user id erases it', async (t) => {
  const dir = await tempDir(t, 'pds-protect-');
  const store = await openSqliteEventStore(path.join(dir, 'events.db'));
  await store.append(`cart-${LIVE_CART}`, [
    rawEvent('CartCreated', { cart_uuid: LIVE_CART, store_id: 1, user_id: 'u-4711' }),
    rawEvent('CartCustomerIdentified', { ...live }),
    rawEvent('CurbsideArrivalPosted', { fields: { car: 'an ochre van' } }),
  ]);
  await store.close();
  await protect(dir, { vacuum: true });
  const raw = await openSqliteEventStore(path.join(dir, 'events.db'));
  const stored = await raw.readAll();
  await raw.close();
  // The event keeps its version's shape: the user id is only in the key's links.
  t.false(stored.some((e) => e.type !== 'CartCreated' && 'user_id' in (e.data as object)));

  const keys = openSqliteKeyStore(path.join(dir, 'keys.db'));
  const data = createCustomerData(keys, secretKey);
  const found = await data.resolve('u-4711');
  t.deepEqual(found.cart_uuids, [LIVE_CART]);
  await data.keys.destroyKeys(found.key_ids, { erasure_id: 'e-user', erased_at: '2026-02-01T00:00:00.000Z' });
  await keys.close();
  const { shown } = await readLog(dir);
  t.like(shown[1].data, { email: null, erased: true });
  t.like(shown[2].data, { fields: {}, erased: true });
});

test('an erasure a cart records after a batch sealed it under its key destroys that key: the erasure may have looked before the key existed', async (t) => {
  const dir = await plainLog(t);
  let batches = 0;
  await protect(dir, {
    batchSize: 1,
    onBatch: async () => {
      // After the live cart's first identification is sealed under a key of the service's.
      if (++batches !== 1) return;
      const store = await openSqliteEventStore(path.join(dir, 'events.db'));
      await store.append(`cart-${LIVE_CART}`, [
        rawEvent('CartCustomerErased', { erasure_id: 'e-3', erased_at: '2026-02-03T00:00:00.000Z' }),
      ]);
      await store.close();
    },
  });
  const { shown, stored } = await readLog(dir);
  const identified = shown.filter((e) => e.type === 'CartCustomerIdentified');
  t.true(identified.every((e) => (e.data as { erased?: boolean }).erased === true));
  const first = stored.find((e) => e.streamId === `cart-${LIVE_CART}` && e.type === 'CartCustomerIdentified');
  if (!first) throw new Error('the live cart has no identification');
  const keys = openSqliteKeyStore(path.join(dir, 'keys.db'));
  t.teardown(() => keys.close());
  t.like(await keys.key((first.data as { personal: { key_id: string } }).personal.key_id), {
    tombstone: { erasure_id: 'e-3' },
  });
});

test('a run on a log with nothing to seal is recorded finished all the same', async (t) => {
  const dir = await tempDir(t, 'pds-protect-');
  const store = await openSqliteEventStore(path.join(dir, 'events.db'));
  await store.close();
  const first = await protect(dir, { vacuum: true });
  t.like(first, { from: 0, through: 0, scanned: 0, finished: true, finished_before: null });
  const second = await protect(dir);
  t.like(second, { finished: true });
  t.truthy(second.finished_before);
});
