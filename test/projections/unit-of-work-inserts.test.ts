/**
 * A unit of work writes a document it knows the store lacks as an insert (`insertOne`), so the SQLite
 * store does not look up an old version's index entries first (`SELECT _id, keys`): known absent
 * when a lookup of it found nothing or a delete of it was committed, and stored again from its first
 * write on (projections/unit-of-work.ts, `absent`). Anything else stays a replace with upsert.
 */
import test, { type ExecutionContext } from 'ava';
import * as cart from '../../domain/cart.ts';
import * as store from '../../domain/store.ts';
import type { RecordedEvent } from '../../eventstore/port.ts';
import type { Projection } from '../../projections/projector.ts';
import { CARTS, cartIndexes, cartsProjection } from '../../projections/read-models/carts.ts';
import type { Doc, WriteOp } from '../../projections/read-store.ts';
import { openSqliteReadStore } from '../../projections/sqlite/read-store.ts';
import { applyBatch } from '../../projections/unit-of-work.ts';
import { META } from '../support/raw-events.ts';
import { append, eventStoreFor, project, storeUpserted } from './support.ts';

const KEYS_LOOKUP = /^SELECT _id, keys FROM /;

/** A read store that counts its lookups of stored index entries, by `_id`. */
function countingStore(t: ExecutionContext) {
  const lookups: unknown[] = [];
  const readStore = openSqliteReadStore(':memory:', {
    onQuery: (sql, params) => {
      if (KEYS_LOOKUP.test(sql)) lookups.push(params[0]);
    },
  });
  t.teardown(() => readStore.close());
  return { readStore, lookups };
}

/**
 * Notes driven by their events: `Put` reads the note then writes it, `Blind` writes it unread,
 * `Delete` deletes it, `Flush` runs an `updateMany` (which commits what is pending).
 */
const notes: Projection = {
  name: 'notes',
  version: 1,
  collections: { notes: [{ keys: [['text', 1]] }] },
  filter: { streamPrefixes: ['note-'] },
  apply(e, tx) {
    const { id, text } = e.data as { id: string; text?: string };
    if (e.type === 'Put') {
      const before = tx.get<Doc & { text: string }>('notes', id);
      tx.put('notes', { _id: id, text: `${before?.text ?? ''}${text}` });
    } else if (e.type === 'Blind') tx.put('notes', { _id: id, text: text ?? '' });
    else if (e.type === 'Delete') tx.delete('notes', id);
    else tx.updateMany('notes', { _id: 'nobody' }, { $set: { text: 'never' } });
  },
};

/** Applies `steps` as one batch of `notes` events; answers each commit's operations, as `kind id`. */
async function applyNotes(
  t: ExecutionContext,
  steps: Array<[type: string, id: string, text?: string]>,
  seed: Doc[] = [],
) {
  const { readStore, lookups } = countingStore(t);
  const collection = await readStore.collection('notes', notes.collections.notes);
  if (seed.length > 0)
    await collection.bulkWrite(
      seed.map((d) => ({ replaceOne: { filter: { _id: d._id }, replacement: d, upsert: true } })),
    );
  lookups.length = 0;
  const commits: string[][] = [];
  const events: RecordedEvent[] = steps.map(([type, id, text], i) => ({
    position: 100 + i,
    streamId: `note-${id}`,
    revision: i,
    id: `e-${i}`,
    type,
    data: { id, text },
    metadata: META,
    recordedAt: '2026-05-01T10:00:00.000Z',
  }));
  await applyBatch(
    notes,
    { notes: collection },
    async (writes) => {
      commits.push(writes.flatMap(({ ops }) => ops.map(describe)));
      await readStore.commit({ writes });
    },
    events,
  );
  const stored = (await collection.find({})).map((d) => `${d._id}:${d.text}`);
  return { commits, stored, lookups, collection };
}

function describe(op: WriteOp): string {
  if ('insertOne' in op) return `insertOne ${op.insertOne.document._id}`;
  if ('replaceOne' in op) return `replaceOne ${op.replaceOne.filter._id}`;
  if ('deleteOne' in op) return `deleteOne ${op.deleteOne.filter._id}`;
  return Object.keys(op)[0];
}

test('a document a lookup found absent is inserted, without a lookup of stored index entries', async (t) => {
  const { commits, stored, lookups } = await applyNotes(t, [
    ['Put', 'a', 'x'],
    ['Put', 'a', 'y'],
    ['Put', 'b', 'z'],
  ]);
  t.deepEqual(commits, [['insertOne a', 'insertOne b']]);
  t.deepEqual(stored, ['a:xy', 'b:z']);
  t.deepEqual(lookups, []);
});

test('a stored document, and one written unread, are replaced (upserted), as before', async (t) => {
  const { commits, stored, lookups } = await applyNotes(
    t,
    [
      ['Put', 'a', 'y'],
      ['Blind', 'c', 'w'],
    ],
    [{ _id: 'a', text: 'x' }],
  );
  t.deepEqual(commits, [['replaceOne a', 'replaceOne c']]);
  t.deepEqual(stored, ['a:xy', 'c:w']);
  t.deepEqual(lookups, ['a', 'c']);
});

test('a new document written again after a commit of the same unit is replaced: the first write stored it', async (t) => {
  const { commits, stored } = await applyNotes(t, [
    ['Put', 'a', 'x'],
    ['Flush', 'a'],
    ['Put', 'a', 'y'],
  ]);
  t.deepEqual(commits, [['insertOne a', 'updateMany'], ['replaceOne a']]);
  t.deepEqual(stored, ['a:xy']);
});

test('a stored document deleted and written again is replaced; deleted in one commit and written in a later one, inserted', async (t) => {
  const sameCommit = await applyNotes(
    t,
    [
      ['Delete', 'a'],
      ['Put', 'a', 'y'],
    ],
    [{ _id: 'a', text: 'x' }],
  );
  t.deepEqual(sameCommit.commits, [['replaceOne a']]);
  t.deepEqual(sameCommit.stored, ['a:y']);

  const laterCommit = await applyNotes(
    t,
    [
      ['Put', 'a', 'y'],
      ['Delete', 'a'],
      ['Flush', 'a'],
      ['Put', 'a', 'z'],
    ],
    [{ _id: 'a', text: 'x' }],
  );
  t.deepEqual(laterCommit.commits, [['deleteOne a', 'updateMany'], ['insertOne a']]);
  t.deepEqual(laterCommit.stored, ['a:z']);
});

test('a new document deleted in the batch that created it is deleted, and inserted when written again after', async (t) => {
  const { commits, stored } = await applyNotes(t, [
    ['Put', 'a', 'x'],
    ['Delete', 'a'],
    ['Flush', 'a'],
    ['Put', 'a', 'y'],
    ['Flush', 'a'],
    ['Put', 'a', 'z'],
  ]);
  t.deepEqual(commits, [['deleteOne a', 'updateMany'], ['insertOne a', 'updateMany'], ['replaceOne a']]);
  t.deepEqual(stored, ['a:yz']);
});

test('a build of the carts projection looks up no stored index entries of the carts it creates', async (t) => {
  const es = await eventStoreFor(t);
  const upserted = (store_id: number) =>
    storeUpserted(store_id, `Store ${store_id}`, '2026-04-01T09:00:00.000Z');
  await append(es, store.streamId(1), [upserted(1)]);
  await append(es, store.streamId(2), [upserted(2)]);
  const uuidOf = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;
  const created = (n: number) =>
    cart.events.CartCreated({
      cart_uuid: uuidOf(n),
      store_id: 1 + (n % 2),
      source: { channel: 'headless', partner_id: 'partner-1' },
      user_id: null,
      created_at: '2026-05-01T10:00:00.000Z',
    });
  const abandoned = cart.events.CartAbandoned({
    abandoned_at: '2026-05-01T11:00:00.000Z',
    first_item_at: '2026-05-01T10:01:00.000Z',
    item_count: 1,
  });
  // Each cart's two events in one batch of ten: every cart is new to the batch that writes it.
  for (let n = 1; n <= 200; n++) await append(es, cart.streamId(uuidOf(n)), [created(n), abandoned]);

  const { readStore, lookups } = countingStore(t);
  await project(es, readStore, cartsProjection, { batchSize: 10 });
  const carts = await readStore.collection(CARTS, cartIndexes);
  t.is(await carts.count(), 200);
  t.deepEqual(lookups, []);

  // Carts the store holds: replaced, each looked up once.
  for (let n = 1; n <= 5; n++)
    await append(es, cart.streamId(uuidOf(n)), [
      cart.events.CartCustomerIdentified({
        email: `customer${n}@example.com`,
        first_name: 'Jane',
        last_name: 'Doe',
        phone_number: '+1 303-555-0100',
        DOB: '1990-04-01T00:00:00.000Z',
        identified_at: '2026-05-01T12:00:00.000Z',
      }),
    ]);
  await project(es, readStore, cartsProjection, { batchSize: 10 });
  t.deepEqual(lookups, [1, 2, 3, 4, 5].map(uuidOf));
});

test('put answers the document as the unit holds it, stamped with the event position, and nothing for a document that reflects the event', async (t) => {
  const { readStore } = countingStore(t);
  const collection = await readStore.collection('notes', notes.collections.notes);
  await collection.bulkWrite([
    { replaceOne: { filter: { _id: 'ahead' }, replacement: { _id: 'ahead', _position: 500 }, upsert: true } },
  ]);
  const answers: Array<Doc | undefined> = [];
  const held: Array<Doc | undefined> = [];
  const putting: Projection = {
    ...notes,
    apply(e, tx) {
      const { id, text } = e.data as { id: string; text: string };
      tx.get('notes', id);
      answers.push(tx.put('notes', { _id: id, text }));
      held.push(tx.get('notes', 'a'));
    },
  };
  const event = (position: number, id: string): RecordedEvent => ({
    position,
    streamId: `note-${id}`,
    revision: 0,
    id: `e-${position}`,
    type: 'Put',
    data: { id, text: `at ${position}` },
    metadata: META,
    recordedAt: '2026-05-01T10:00:00.000Z',
  });
  await applyBatch(putting, { notes: collection }, (writes) => readStore.commit({ writes }), [
    event(100, 'a'),
    event(101, 'ahead'),
    event(102, 'b'),
  ]);
  t.deepEqual(answers, [
    { _id: 'a', text: 'at 100', _position: 100 },
    undefined,
    { _id: 'b', text: 'at 102', _position: 102 },
  ]);
  // The very object the unit holds and writes: what later events read.
  t.is(held[1], answers[0]);
  t.deepEqual(
    (await collection.find({})).map((d) => [d._id, d._position]),
    [
      ['a', 100],
      ['ahead', 500],
      ['b', 102],
    ],
  );
});
