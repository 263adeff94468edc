/**
 * One projector at a time (docs/read-side.md, "One projector at a time"), as two real `pds serve
 * --role projector` processes on one data dir (one `events.db`, one `read.db`) with a 1 s lease, and an
 * `api` process taking writes. The second stands by (ready, saying so, writing nothing) while the
 * first holds the lease. In the middle of the writes the holder is frozen (SIGSTOP: a process that
 * still runs, so the other waits for its lease to run out) and takes over; thawed, the old holder
 * learns from the store that it lost the lease and stands by. Then the new holder is killed
 * (`kill -9`), and the first takes over again, at its next try since that process is gone. The read
 * models end exactly as one projector builds them from the log: every document, with its
 * `_position`, and every checkpoint's position and count of events.
 */
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { isDeepStrictEqual } from 'node:util';
import test from 'ava';
import { openSqliteEventStore } from '../eventstore/sqlite.ts';
import { allProjections } from '../projections/all.ts';
import { createProjector, type ProjectionStatus } from '../projections/projector.ts';
import type { Doc, ReadStore } from '../projections/read-store.ts';
import { openSqliteReadStore } from '../projections/sqlite/read-store.ts';
import { addItem, createCart, seedCatalog, type WorldCart } from './support/cart-world.ts';
import { type Child, childDataDir, killChild, serveChild } from './support/child-service.ts';
import { metrics, readyz, until } from './support/probes.ts';

const LEASE = { PDS_PROJECTOR_LEASE: '1s' };
const serve = (role: string) => ['cli/pds.ts', 'serve', '--role', role];

async function projections(child: Child): Promise<ProjectionStatus[]> {
  const res = await child.api.call('GET', '/admin/v1/projections');
  if (res.status !== 200) throw new Error(`GET /admin/v1/projections: ${res.status}`);
  return ((await res.json()) as { projections: ProjectionStatus[] }).projections;
}

/** A gauge's value in a `/metrics` text (NaN when absent). */
function gauge(text: string, name: string): number {
  return Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1]);
}

/**
 * Freezes `child` (SIGSTOP) at a moment it holds no write lock on `file`. SQLite's locks belong to the
 * process: one stopped inside a commit would hold the file's write lock against every other writer,
 * the other projector's lease included, for as long as it stays stopped. So: stop it, see whether the
 * lock is free (a write transaction begun and rolled back at once), and if not, let it finish its
 * commit and try again.
 */
async function freezeBetweenCommits(child: Child, file: string): Promise<void> {
  const db = new DatabaseSync(file);
  db.exec('PRAGMA busy_timeout = 0');
  try {
    for (let attempt = 0; attempt < 500; attempt++) {
      child.process.kill('SIGSTOP');
      try {
        db.exec('BEGIN IMMEDIATE');
        db.exec('ROLLBACK');
        return;
      } catch {
        child.process.kill('SIGCONT');
        await new Promise((r) => setTimeout(r, 5));
      }
    }
    throw new Error('the holder was always inside a commit');
  } finally {
    db.close();
  }
}

/** Every document of every read model, in `_id` order, `_position` included, and every checkpoint. */
async function readModels(readStore: ReadStore) {
  const documents: Record<string, Doc[]> = {};
  const checkpoints: Record<string, { position: number; events: number } | undefined> = {};
  for (const projection of allProjections()) {
    const saved = await readStore.getCheckpoint(projection.name);
    checkpoints[projection.name] = saved && { position: saved.position, events: saved.events };
    for (const name of Object.keys(projection.collections)) {
      documents[name] = await (await readStore.collection(name)).find({}, { sort: [['_id', 1]] });
    }
  }
  return { documents, checkpoints };
}

test('a second projector stands by while the first holds the lease, takes over from a frozen holder once its lease ran out and from a killed one at once, and the read models end as one projector builds them', async (t) => {
  t.timeout(90_000);
  const dir = await childDataDir(t, 'pds-lease-');
  const first = await serveChild(t, dir, LEASE, serve('projector'));
  const second = await serveChild(t, dir, LEASE, serve('projector')); // ready: standing by
  const api = await serveChild(t, dir, {}, serve('api'));
  const held = async (child: Child) => gauge(await metrics(child), 'pds_projector_lease_held') === 1;
  const token = async (child: Child) => gauge(await metrics(child), 'pds_projector_lease_token');

  // The first holds the lease and projects; the second says it stands by, and rebuilds nothing.
  const [holding, standing] = [await readyz(first), await readyz(second)];
  t.is(holding.checks.projections_caught_up, 'ok');
  t.is(standing.code, 200, 'a projector standing by is ready');
  t.is(standing.checks.projections_caught_up, 'standby');
  const firstToken = await token(first);
  t.true(firstToken >= 1);
  t.true(await held(first));
  t.false(await held(second));
  t.true((await projections(second)).every((p) => p.state === 'standby'));
  const refused = await second.api.call('POST', '/admin/v1/projections/carts/rebuild');
  t.is(refused.status, 409);
  t.like(await refused.json(), { code: 'projector_standing_by' });

  // Writes go on while the holders are frozen, thawed and killed.
  await seedCatalog(api.api, [1, 2]);
  const carts: WorldCart[] = [];
  for (let i = 0; i < 6; i++) carts.push(await createCart(api.api, 1 + (i % 2)));
  let added = 0;
  const writes = (async () => {
    for (let round = 0; round < 12; round++) {
      for (const cart of carts) {
        await addItem(api.api, cart, 1 + round);
        added += 1;
      }
    }
  })();
  await until('some items are added', () => added >= 12);
  await until('the holder has projected some of them', async () =>
    (await projections(first)).some((p) => p.name === 'carts' && p.events_applied > 6),
  );

  await freezeBetweenCommits(first, path.join(dir, 'read.db'));
  const frozenAt = performance.now();
  await until('the second holds the lease', () => held(second));
  // The frozen holder renewed at most a third of the lease before: it had two thirds left at least.
  t.true(performance.now() - frozenAt >= 600, 'taken over only once the lease ran out');
  const secondToken = await token(second);
  t.true(secondToken > firstToken);
  first.process.kill('SIGCONT');
  await until('the thawed holder stands by', async () => !(await held(first)));
  await until(
    'it says so, ready',
    async () => (await readyz(first)).checks.projections_caught_up === 'standby',
  );
  t.is((await readyz(first)).code, 200);

  await until('more items are added', () => added >= 36);
  await killChild(second);
  await until('the first holds the lease again', () => held(first));
  t.true((await token(first)) > secondToken);
  await writes;

  const events = await openSqliteEventStore(path.join(dir, 'events.db'));
  t.teardown(() => events.close());
  const head = await events.headPosition();
  await until('the first has applied everything', async () => {
    const all = await projections(first);
    return all.every((p) => p.state === 'live' && p.lag_events === 0) && (await readyz(first)).code === 200;
  });
  t.is((await readyz(first)).checks.projections_caught_up, 'ok');

  // One projector's build of the same log, from the start.
  const alone = openSqliteReadStore(':memory:');
  t.teardown(() => alone.close());
  const single = createProjector({ store: events, readStore: alone, projections: allProjections() });
  await single.start();
  await single.caughtUp;
  await single.stop();
  const oneProjector = await readModels(alone);
  const built = openSqliteReadStore(path.join(dir, 'read.db'));
  t.teardown(() => built.close());
  // A checkpoint moved past others' events is stored within a second (docs/read-side.md, "Projections and checkpoints").
  await until('the stored checkpoints have moved past the last events', async () =>
    isDeepStrictEqual((await readModels(built)).checkpoints, oneProjector.checkpoints),
  ).catch(() => undefined);
  const twoProjectors = await readModels(built);
  t.deepEqual(twoProjectors.documents, oneProjector.documents, 'nothing lost, nothing applied twice');
  t.deepEqual(twoProjectors.checkpoints, oneProjector.checkpoints, 'every event counted once');
  t.is(twoProjectors.checkpoints.carts?.position, head);
  t.is(twoProjectors.documents.carts?.length, 6);
});
