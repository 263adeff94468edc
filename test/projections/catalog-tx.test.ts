/**
 * The catalog's view of the unit of work (projections/read-models/catalog/support.ts, `catalogTx`):
 * what it hands the projector to stamp, and when `save` writes. A document is stored with
 * `_position` last whatever path wrote it, so a rebuild writes the same bytes as the live projection
 * (docs/read-side.md, "Projections and checkpoints").
 */
import test, { type ExecutionContext } from 'ava';
import type { RecordedEvent } from '../../eventstore/port.ts';
import type { Projection } from '../../projections/projector.ts';
import { catalogTx } from '../../projections/read-models/catalog/support.ts';
import type { Collection, Doc, WriteOp } from '../../projections/read-store.ts';
import { openSqliteReadStore } from '../../projections/sqlite/read-store.ts';
import { applyBatch } from '../../projections/unit-of-work.ts';
import { META } from '../support/raw-events.ts';

type Step = { op: 'save' | 'patch'; doc: Doc };

/** `save` or `patch` (the stored document, patched with `doc`'s fields) of the document `doc._id`. */
const steps: Projection = {
  name: 'steps',
  version: 1,
  collections: { docs: [] },
  filter: { streamPrefixes: ['step-'] },
  apply(e, tx) {
    const ctx = catalogTx(tx);
    const { op, doc } = e.data as Step;
    if (op === 'save') return ctx.save('docs', doc);
    const stored = ctx.get<Doc>('docs', doc._id);
    if (stored) ctx.patch('docs', stored, doc);
  },
};

/** Applies each step as a batch of its own; answers how many writes each committed, and the stored document. */
async function run(t: ExecutionContext, list: Step[]) {
  const readStore = openSqliteReadStore(':memory:');
  t.teardown(() => readStore.close());
  const docs = await readStore.collection('docs', []);
  const writes: number[] = [];
  for (const [i, step] of list.entries()) {
    const event: RecordedEvent = {
      position: 10 + i,
      streamId: 'step-1',
      revision: i,
      id: `e-${i}`,
      type: 'Step',
      data: step,
      metadata: META,
      recordedAt: '2026-05-01T10:00:00.000Z',
    };
    await applyBatch(
      steps,
      { docs },
      async (w) => {
        writes.push(w.reduce((n, { ops }) => n + ops.length, 0));
        const mine = w.map(({ ops }): { collection: Collection; ops: WriteOp[] } => ({
          collection: docs,
          ops,
        }));
        await readStore.commit({ writes: mine });
      },
      [event],
    );
  }
  const [stored] = await docs.findByIds(['a']);
  return { writes, stored };
}

test('a patch that adds a field stores the document with its stamp last, as a rebuild would', async (t) => {
  const { stored } = await run(t, [
    { op: 'save', doc: { _id: 'a', name: 'x' } },
    { op: 'patch', doc: { _id: 'a', rating: 4 } },
  ]);
  t.deepEqual(Object.keys(stored ?? {}), ['_id', 'name', 'rating', '_position']);
  t.is(stored?._position, 11);
});

test('a patch of fields the document has keeps their order and moves the stamp', async (t) => {
  const { stored } = await run(t, [
    { op: 'save', doc: { _id: 'a', name: 'x', rating: 1 } },
    { op: 'patch', doc: { _id: 'a', rating: 4 } },
  ]);
  t.deepEqual(Object.entries(stored ?? {}), [
    ['_id', 'a'],
    ['name', 'x'],
    ['rating', 4],
    ['_position', 11],
  ]);
});

test('save writes only a document that differs but for the stamp: a changed, added or removed field', async (t) => {
  const { writes, stored } = await run(t, [
    { op: 'save', doc: { _id: 'a', name: 'x', tags: [1, 2] } },
    { op: 'save', doc: { _id: 'a', name: 'x', tags: [1, 2] } },
    { op: 'save', doc: { _id: 'a', name: 'x', tags: [1, 2], _position: 3 } },
    { op: 'save', doc: { _id: 'a', name: 'x', tags: [1, 3] } },
    { op: 'save', doc: { _id: 'a', name: 'x', tags: [1, 3], extra: null } },
    { op: 'save', doc: { _id: 'a', name: 'x', tags: [1, 3] } },
  ]);
  // Each batch commits its checkpoint; only the changes carry a write.
  t.deepEqual(writes, [1, 0, 0, 1, 1, 1]);
  t.deepEqual(stored, { _id: 'a', name: 'x', tags: [1, 3], _position: 15 });
});
