/**
 * A unit of work applies each event through one `tx` and one attempt for the whole batch
 * (projections/unit-of-work.ts, `Attempt`): what an abandoned attempt wrote is never kept, the next
 * event starts from nothing, and a `tx` kept past its event refuses to be used.
 */
import test, { type ExecutionContext } from 'ava';
import type { RecordedEvent } from '../../eventstore/port.ts';
import type { Projection, ProjectionTx } from '../../projections/projector.ts';
import type { Doc } from '../../projections/read-store.ts';
import { openSqliteReadStore } from '../../projections/sqlite/read-store.ts';
import { applyBatch } from '../../projections/unit-of-work.ts';
import { META } from '../support/raw-events.ts';

type Note = Doc & { text: string };

/**
 * `Append` adds its text to note `id`, then reads note `also` (never prefetched, so the first attempt
 * stops there and the event is applied again); `Drop` deletes note `id`, then reads `also` too;
 * `Attempt` writes a note named by how many attempts the projection has made so far, then reads
 * `also`: only the one of the attempt that completes may be stored.
 */
function notes(kept: ProjectionTx[]): Projection {
  let attempts = 0;
  return {
    name: 'notes',
    version: 1,
    collections: { notes: [] },
    filter: { streamPrefixes: ['note-'] },
    apply(e, tx) {
      kept.push(tx);
      attempts += 1;
      const { id, text, also } = e.data as { id: string; text?: string; also?: string };
      if (e.type === 'Attempt') tx.put('notes', { _id: `${id}@${attempts}`, text: text ?? '' });
      else if (e.type === 'Append') {
        const before = tx.get<Note>('notes', id);
        tx.put('notes', { _id: id, text: `${before?.text ?? ''}${text}` });
      } else tx.delete('notes', id);
      if (also) tx.get('notes', also);
    },
  };
}

async function run(
  t: ExecutionContext,
  steps: Array<[type: string, id: string, text?: string, also?: string]>,
) {
  const readStore = openSqliteReadStore(':memory:');
  t.teardown(() => readStore.close());
  const collection = await readStore.collection('notes', []);
  const kept: ProjectionTx[] = [];
  const events: RecordedEvent[] = steps.map(([type, id, text, also], i) => ({
    position: 10 + i,
    streamId: `note-${id}`,
    revision: i,
    id: `e-${i}`,
    type,
    data: { id, text, also },
    metadata: META,
    recordedAt: '2026-05-01T10:00:00.000Z',
  }));
  await applyBatch(notes(kept), { notes: collection }, (writes) => readStore.commit({ writes }), events);
  const stored = (await collection.find({})).map((d) => `${d._id}:${(d as Note).text}`).sort();
  return { stored, kept };
}

test('an attempt stopped to fetch what it missed keeps none of its writes: each event counts once', async (t) => {
  const { stored } = await run(t, [
    ['Append', 'a', 'x', 'b'],
    ['Append', 'a', 'y'],
    ['Append', 'c', 'z', 'd'],
    ['Append', 'a', 'w', 'e'],
  ]);
  t.deepEqual(stored, ['a:xyw', 'c:z']);
});

test('the writes of an abandoned attempt never reach the store, nor the next event', async (t) => {
  const { stored } = await run(t, [
    ['Attempt', 'a', 'x', 'b'],
    ['Attempt', 'c', 'y'],
  ]);
  // Attempts 1 (stopped at b) and 2 (applied) of the first event, 3 of the second.
  t.deepEqual(stored, ['a@2:x', 'c@3:y']);
});

test('a delete of an abandoned attempt is not kept, and the next event sees the document', async (t) => {
  const { stored } = await run(t, [
    ['Append', 'a', 'x'],
    ['Drop', 'a', undefined, 'b'],
    ['Append', 'a', 'y', 'c'],
  ]);
  t.deepEqual(stored, ['a:y']);
});

test('a tx kept past its event refuses to be used', async (t) => {
  const { kept } = await run(t, [['Append', 'a', 'x']]);
  const tx = kept[0];
  t.throws(() => tx.event, { message: /used its tx outside apply/ });
  t.throws(() => tx.put('notes', { _id: 'b', text: '' }), { message: /used its tx outside apply/ });
  t.throws(() => tx.delete('notes', 'a'), { message: /used its tx outside apply/ });
});
