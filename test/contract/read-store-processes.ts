/**
 * The ReadStore contract for two processes on one store (two stores opened on the same file or
 * database): what one leaves behind and the other finds. Every adapter passes it; the MongoDB run is
 * at the end of read-store-mongo.test.ts.
 */
import { randomUUID } from 'node:crypto';
import type { ExecutionContext, TestFn } from 'ava';
import type { Collection, Doc, ReadStore } from '../../projections/read-store.ts';

/** Two stores on one file or database, closed (and it removed) after the test. */
export type OpenTwo = (t: ExecutionContext) => Promise<[ReadStore, ReadStore]>;

const prefix = () => `c${randomUUID().replaceAll('-', '').slice(0, 12)}`;

async function seed(c: Collection, docs: readonly Doc[]): Promise<void> {
  await c.bulkWrite(
    docs.map((d) => ({ replaceOne: { filter: { _id: d._id }, replacement: d, upsert: true } })),
  );
}

const ids = (docs: readonly Doc[]) => docs.map((d) => d._id);

export function readStoreProcessesContract(test: TestFn, adapter: string, openTwo: OpenTwo): void {
  const name = (title: string) => `${adapter}: ${title}`;

  test(
    name('shadows a crashed rebuild left are dropped by the next projector; live and its own shadows stay'),
    async (t) => {
      const [crashed, next] = await openTwo(t);
      const p = prefix();
      const live = await crashed.collection(`${p}_items`);
      await seed(live, [{ _id: 'first' }]);
      const promoted = await crashed.createShadow(`${p}_items`);
      await seed(promoted, [{ _id: 'promoted' }]);
      await crashed.promote([promoted]);
      // A rebuild the crash interrupted: its shadows are neither promoted nor dropped.
      const left = [await crashed.createShadow(`${p}_items`), await crashed.createShadow(`${p}_other`)];
      await seed(left[0], [{ _id: 'orphan' }]);

      const mine = await next.createShadow(`${p}_items`);
      await seed(mine, [{ _id: 'mine' }]);
      t.is(await next.dropOrphanShadows(), 2);
      t.is(await next.dropOrphanShadows(), 0, 'none left');
      const served = await next.collection(`${p}_items`);
      t.deepEqual(ids(await served.find({})), ['promoted'], 'the live copy stays');
      t.deepEqual(ids(await mine.find({})), ['mine'], 'a running rebuild of its own stays');
      await next.promote([mine]);
      t.deepEqual(ids(await served.find({})), ['mine']);
      t.is(await next.dropOrphanShadows(), 0, 'a promoted shadow is live, not an orphan');
    },
  );
}
