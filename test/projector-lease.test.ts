/**
 * One projector at a time (docs/read-side.md, "One projector at a time"), as two real `pds serve
 * --role projector` processes on one data dir (one `events.db`, one `read.db`) with a 1 s lease, and an
 * `api` process taking writes: the second stands by (ready, saying so, writing nothing) while the
 * first holds the lease; `kill -9` of the holder in the middle of the writes, and the other takes
 * over once the lease has run out. The read models end exactly as one projector builds them from the
 * log: every document, with its `_position`, and every checkpoint's position and count of events.
 */
import path from 'node:path';
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

test('a second projector stands by while the first holds the lease, takes over once a killed holder’s lease runs out, and the read models end as one projector builds them', async (t) => {
  t.timeout(90_000);
  const dir = await childDataDir(t, 'pds-lease-');
  const first = await serveChild(t, dir, LEASE, serve('projector'));
  const second = await serveChild(t, dir, LEASE, serve('projector')); // ready: standing by
  const api = await serveChild(t, dir, {}, serve('api'));

  // The first holds the lease and projects; the second says it stands by, and rebuilds nothing.
  const [held, standing] = [await readyz(first), await readyz(second)];
  t.is(held.checks.projections_caught_up, 'ok');
  t.is(standing.code, 200, 'a projector standing by is ready');
  t.is(standing.checks.projections_caught_up, 'standby');
  const firstToken = gauge(await metrics(first), 'pds_projector_lease_token');
  t.true(firstToken >= 1);
  t.is(gauge(await metrics(first), 'pds_projector_lease_held'), 1);
  t.is(gauge(await metrics(second), 'pds_projector_lease_held'), 0);
  t.true((await projections(second)).every((p) => p.state === 'standby'));
  const refused = await second.api.call('POST', '/admin/v1/projections/carts/rebuild');
  t.is(refused.status, 409);
  t.like(await refused.json(), { code: 'projector_standing_by' });

  // Writes go on while the holder is killed in their middle.
  await seedCatalog(api.api, [1, 2]);
  const carts: WorldCart[] = [];
  for (let i = 0; i < 6; i++) carts.push(await createCart(api.api, 1 + (i % 2)));
  let added = 0;
  const writes = (async () => {
    for (let round = 0; round < 8; round++) {
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
  await killChild(first);
  await writes;

  await until(
    'the second holds the lease',
    async () => gauge(await metrics(second), 'pds_projector_lease_held') === 1,
  );
  t.true(gauge(await metrics(second), 'pds_projector_lease_token') > firstToken, 'a higher token');
  const events = await openSqliteEventStore(path.join(dir, 'events.db'));
  t.teardown(() => events.close());
  const head = await events.headPosition();
  await until('the second has applied everything', async () => {
    const all = await projections(second);
    return all.every((p) => p.state === 'live' && p.lag_events === 0) && (await readyz(second)).code === 200;
  });
  t.is((await readyz(second)).checks.projections_caught_up, 'ok');

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
  t.true((twoProjectors.documents.carts ?? []).length === 6);
});
