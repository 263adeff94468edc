/**
 * The measures behind the ReadStore contract's MongoDB rules (test/contract/read-store-differences.ts),
 * checked against their sources without a server: the port's string order against UTF-8 bytes, the
 * SQLite adapter's document size against the `mongodb` driver's BSON, how the MongoDB adapter names the
 * size refusals of its driver and server (its own contract run needs a server), and what the projector does with
 * a document that outgrows the limit (docs/read-side.md, "Read stores").
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import fc from 'fast-check';
import { BSON, MongoInvalidArgumentError, MongoServerError } from 'mongodb';
import { openSqliteEventStore } from '../../eventstore/sqlite.ts';
import { firstTooLarge, writeFailure } from '../../projections/mongo/translate.ts';
import { createProjector, type Projection } from '../../projections/projector.ts';
import {
  compareStrings,
  type Doc,
  DocumentTooLargeError,
  MAX_DOCUMENT_BYTES,
  type WriteOp,
} from '../../projections/read-store.ts';
import { bsonSize } from '../../projections/sqlite/document-size.ts';
import { openSqliteReadStore } from '../../projections/sqlite/read-store.ts';

const sign = (n: number) => Math.sign(n);

test('compareStrings is UTF-8 byte order (code point order), where JavaScript’s < is not', (t) => {
  fc.assert(
    fc.property(fc.string({ unit: 'binary' }), fc.string({ unit: 'binary' }), (a, b) => {
      const bytes = Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
      return sign(compareStrings(a, b)) === bytes && sign(compareStrings(b, a)) === -bytes;
    }),
    { numRuns: 5_000 },
  );
  t.true(compareStrings('😀', '\uFFFD') > 0);
  t.true('😀' < '\uFFFD', 'UTF-16 code units disagree');
  t.true(compareStrings('\uE000', '𝒜') < 0);
  t.is(compareStrings('a', 'a'), 0);
  t.true(compareStrings('a', 'ab') < 0);
});

test('the SQLite adapter’s BSON size is the driver’s for JSON documents, and never less for others', (t) => {
  const driver = (doc: Doc) => BSON.calculateObjectSize(doc, { ignoreUndefined: true });
  fc.assert(
    fc.property(fc.dictionary(fc.string(), fc.jsonValue()), (fields) => {
      const doc = JSON.parse(JSON.stringify({ ...fields, _id: 'x' })) as Doc;
      return bsonSize(doc) === driver(doc);
    }),
    { numRuns: 2_000 },
  );
  const odd: Doc[] = [
    { _id: 1, at: new Date('2026-01-01T00:00:00.000Z') },
    { _id: 2, list: [undefined, 1, undefined], gone: undefined },
    { _id: 3, z: -0, n: Number.NaN, big: 2 ** 40, small: -(2 ** 31) },
    { _id: 'é', nested: { deep: [{ a: [true, null, 'ü'] }] } },
  ];
  for (const doc of odd) t.true(bsonSize(doc) >= driver(doc), JSON.stringify(doc));
  t.is(
    bsonSize({ _id: 3, z: -0, big: 2 ** 40, small: -(2 ** 31) }),
    driver({ _id: 3, z: -0, big: 2 ** 40, small: -(2 ** 31) }),
  );
});

test('the MongoDB adapter refuses a replacement too large to send before sending it, naming it', (t) => {
  const replace = (id: string, bytes: number): WriteOp => ({
    replaceOne: { filter: { _id: id }, replacement: { _id: id, text: 'x'.repeat(bytes - 27) }, upsert: true },
  });
  const size = (op: WriteOp) =>
    BSON.calculateObjectSize('replaceOne' in op ? op.replaceOne.replacement : {}, { ignoreUndefined: true });
  t.is(size(replace('a', 1000)), 1000);
  t.is(firstTooLarge('menu', [replace('a', 1000), replace('b', MAX_DOCUMENT_BYTES - 1024)]), undefined);
  const over = firstTooLarge('menu', [replace('a', 1000), replace('b', MAX_DOCUMENT_BYTES + 1)]);
  t.is(over?.index, 1);
  t.like(over?.error, {
    name: 'DocumentTooLargeError',
    collection: 'menu',
    id: 'b',
    bytes: MAX_DOCUMENT_BYTES + 1,
  });
  // Within the limit, but its write statement (the driver's measure) is not: refused the same way.
  const sliver = firstTooLarge('menu', [replace('c', MAX_DOCUMENT_BYTES - 8)]);
  t.is(sliver?.index, 0);
  t.true((sliver?.error.bytes ?? 0) >= MAX_DOCUMENT_BYTES);
});

test('the MongoDB adapter refuses an insert the driver would refuse for its size before sending it, naming it', (t) => {
  const insert = (id: string, bytes: number): WriteOp => ({
    insertOne: { document: { _id: id, text: 'x'.repeat(bytes - 27) } },
  });
  const size = (op: WriteOp) =>
    BSON.calculateObjectSize('insertOne' in op ? op.insertOne.document : {}, { ignoreUndefined: true });
  t.is(size(insert('a', 1000)), 1000);
  // The driver refuses an insert's document at the limit itself (its statement is the document).
  t.is(firstTooLarge('menu', [insert('a', 1000), insert('b', MAX_DOCUMENT_BYTES - 1)]), undefined);
  const at = firstTooLarge('menu', [insert('a', 1000), insert('b', MAX_DOCUMENT_BYTES)]);
  t.is(at?.index, 1);
  t.like(at?.error, {
    name: 'DocumentTooLargeError',
    collection: 'menu',
    id: 'b',
    bytes: MAX_DOCUMENT_BYTES,
  });
  // The driver's refusal, should it come, names the largest document of the write.
  const driver = new MongoInvalidArgumentError('Document is larger than the maximum size 16777216');
  t.like(writeFailure(driver, 'menu', [insert('a', 1000), insert('b', 5000)]), {
    name: 'DocumentTooLargeError',
    id: 'b',
    bytes: 5000,
  });
  const duplicate = new MongoServerError({ code: 11000, errmsg: 'E11000 duplicate key' });
  t.is(writeFailure(duplicate, 'menu', [insert('a', 1000)]), duplicate);
});

test('the MongoDB adapter names the server’s and the driver’s size refusals; other failures pass as they are', (t) => {
  const ops: WriteOp[] = [
    { deleteOne: { filter: { _id: 'x' } } },
    { updateOne: { filter: { _id: 'grow' }, update: { $set: { more: 'text' } } } },
  ];
  for (const code of [17419, 17420, 10334, 7655103]) {
    const bulk = Object.assign(new MongoServerError({ code, errmsg: 'too large' }), {
      writeErrors: [{ code, index: 1, errmsg: 'Resulting document after update is larger than 16777216' }],
    });
    const named = writeFailure(bulk, 'notes', ops);
    t.true(named instanceof DocumentTooLargeError, String(code));
    t.like(named, { collection: 'notes', id: 'grow', cause: bulk });
  }
  const driver = new MongoInvalidArgumentError('Document is larger than the maximum size 16777216');
  t.like(writeFailure(driver, 'notes', ops), { name: 'DocumentTooLargeError', collection: 'notes' });
  const duplicate = new MongoServerError({ code: 11000, errmsg: 'E11000 duplicate key' });
  t.is(writeFailure(duplicate, 'notes', ops), duplicate);
  const other = new Error('refused');
  t.is(writeFailure(other, 'notes', ops), other);
});

test('a projection whose document outgrows 16 MiB fails loudly: failed, named, and nothing of the batch stored', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'pds-size-'));
  const events = await openSqliteEventStore(join(dir, 'events.db'));
  const readStore = openSqliteReadStore(':memory:');
  t.teardown(async () => {
    await readStore.close();
    await events.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const chunk = 'x'.repeat(6 * 1024 * 1024);
  const notes: Projection = {
    name: 'notes',
    version: 1,
    collections: { notes: [] },
    filter: { streamPrefixes: ['note-'] },
    prefetch: (e) => [['notes', e.streamId]],
    apply(e, tx) {
      const doc = tx.get<Doc & { text: string }>('notes', e.streamId);
      tx.put('notes', { _id: e.streamId, text: `${doc?.text ?? ''}${chunk}` });
    },
  };
  const meta = {
    correlation_id: randomUUID(),
    causation_id: null,
    actor: { type: 'system' as const, id: 'test' },
    occurred_at: '2026-01-01T00:00:00.000Z',
    schema_version: 1,
  };
  const grow = { type: 'Grown', data: {}, metadata: meta };
  for (let i = 0; i < 2; i++) await events.append('note-1', [grow]);
  const errors: Error[] = [];
  const projector = createProjector({
    store: events,
    readStore,
    projections: [notes],
    batchSize: 1,
    onError: (_name, err) => errors.push(err),
  });
  t.teardown(() => projector.stop());
  await projector.start();
  await projector.caughtUp;
  const stored = await (await readStore.collection('notes')).findOne({ _id: 'note-1' });
  t.is(String(stored?.text).length, 2 * chunk.length);

  // The third chunk takes the document over the limit (18 MiB).
  await events.append('note-1', [grow]);
  for (let i = 0; i < 500 && errors.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
  const [status] = await projector.status();
  t.is(status.state, 'failed');
  t.regex(status.error ?? '', /document "note-1" of notes is over 16777216 bytes/);
  t.is(errors[0]?.name, 'DocumentTooLargeError');
  t.is(status.checkpoint, 2, 'the checkpoint stays before the event');
  t.is((await readStore.getCheckpoint('notes'))?.position, 2);
  const after = await (await readStore.collection('notes')).findOne({ _id: 'note-1' });
  t.is(String(after?.text).length, 2 * chunk.length, 'the document is as the last batch left it');
  t.true(3 * chunk.length > MAX_DOCUMENT_BYTES);
});
