/**
 * The write path reads from the leader (eventstore/esdb/streams.ts, application/command-handler.ts),
 * with the real client against a two-node cluster double (test/support/esdb-cluster.ts) whose follower
 * lags: it forwards appends to the leader, serves reads that do not require the leader from its stale
 * copy, and refuses the others with NotLeader naming the leader, as EventStoreDB's followers do.
 * Decisions, answers and a new stream's first position rest on what was written, however the client
 * chose its node (docs/operations.md, "EventStoreDB").
 */
import { randomUUID } from 'node:crypto';
import test, { type ExecutionContext } from 'ava';
import { createCommandHandler } from '../../application/command-handler.ts';
import * as brand from '../../domain/brand.ts';
import { eventRegistry } from '../../domain/index.ts';
import * as partner from '../../domain/partner.ts';
import { createEsdbEventStore } from '../../eventstore/esdb.ts';
import type { EventStore, NewEvent } from '../../eventstore/port.ts';
import { type ClusterDouble, startClusterDouble } from '../support/esdb-cluster.ts';

const at = '2026-05-01T12:00:00.000Z';
const meta = {
  correlationId: 'corr-1',
  causationId: null,
  actor: { type: 'platform' as const, id: 'test' },
  at,
};
const upsertBrand = (name: string) => ({
  type: 'UpsertBrand' as const,
  brand_id: 1,
  fields: { name },
  at,
});

const event = (): NewEvent => ({
  id: randomUUID(),
  type: 'BrandUpserted',
  data: {},
  metadata: {
    correlation_id: randomUUID(),
    causation_id: null,
    actor: { type: 'platform', id: 'test' },
    occurred_at: at,
    schema_version: 1,
  },
});

async function clusterFor(t: ExecutionContext): Promise<ClusterDouble> {
  const cluster = await startClusterDouble();
  t.teardown(() => cluster.close());
  return cluster;
}

/** A process's adapter (an api replica), closed after the test. */
function processOn(t: ExecutionContext, connectionString: string): EventStore {
  const store = createEsdbEventStore(connectionString);
  t.teardown(() => store.close());
  return store;
}

const connections = {
  'nodePreference=follower': (c: ClusterDouble) => c.connectionString('follower'),
  // A client on the node it found leader, which has since lost an election: nothing moves it by itself.
  'a node that is no longer the leader': (c: ClusterDouble) =>
    `esdb://127.0.0.1:${c.follower.port}?tls=false`,
};

for (const [how, connection] of Object.entries(connections)) {
  test(`${how}: a stream read after a write sees it, from the leader the lagging follower names`, async (t) => {
    const cluster = await clusterFor(t);
    const store = processOn(t, connection(cluster));
    await cluster.lag();
    const written = await store.append('brand-1', [event()], { expectedRevision: 'no_stream' });
    t.like(cluster.follower.served, { appends: 1 }, 'the follower forwarded the append to the leader');

    const [read] = await store.readStream('brand-1');
    t.is(read?.position, written.position);
    t.like(cluster.follower.served, { reads: 0, refused: 1 }, 'no stream read is served from its copy');
    t.like(cluster.leader.served, { reads: 1 });

    // The client moved its connection to the leader: the next append goes there directly.
    await store.append('brand-1', [event()], { expectedRevision: 0 });
    t.like(cluster.leader.served, { appends: 1 });
    t.like(cluster.follower.served, { appends: 1 });
  });
}

test('reads started together on the follower are each refused once, then all served by the leader', async (t) => {
  const cluster = await clusterFor(t);
  for (let i = 0; i < 20; i++) await cluster.log.append(`brand-${i}`, [event()]);
  await cluster.lag();
  const store = processOn(t, cluster.connectionString('follower'));
  const read = await Promise.all(Array.from({ length: 20 }, (_, i) => store.readStream(`brand-${i}`)));
  t.deepEqual(
    read.map((events) => events.length),
    Array.from({ length: 20 }, () => 1),
  );
  t.like(cluster.follower.served, { reads: 0, refused: 20 });
  t.like(cluster.leader.served, { reads: 20 });
});

test('the log’s head and a filtered read come from the leader: a follower settling sees what was written', async (t) => {
  const cluster = await clusterFor(t);
  const first = await cluster.log.append('webhooksub-1', [event()]);
  await cluster.lag();
  // Written after the follower stopped replicating: a webhook subscription, then a cart event.
  const created = await cluster.log.append('webhooksub-2', [event()]);
  const cart = await cluster.log.append('cart-1', [event()]);
  const store = processOn(t, cluster.connectionString('follower'));
  t.is(await store.headPosition(), cart.position);
  t.is(await store.headPosition({ streamPrefixes: ['webhooksub-'] }), created.position);
  t.deepEqual(
    (await store.readAll({ after: first.position, filter: { streamPrefixes: ['webhooksub-'] } })).map(
      (e) => e.position,
    ),
    [created.position],
  );
  t.like(cluster.follower.served, { reads: 0, refused: 1 });
  t.like(cluster.leader.served, { reads: 3 });
});

test('two api replicas on a lagging follower decide on the stream as written: no needless conflict', async (t) => {
  const cluster = await clusterFor(t);
  const one = createCommandHandler(processOn(t, cluster.connectionString('follower')), eventRegistry);
  const other = createCommandHandler(processOn(t, cluster.connectionString('follower')), eventRegistry);
  await cluster.lag();

  // A new stream's first position is its one event's: the append's own answer.
  const created = await one.handle(brand.streamId(1), brand.decider, upsertBrand('Kiva'), meta);
  t.is(created.revision, 0);
  t.is(created.firstPosition, created.position);
  t.is(cluster.leader.served.reads, 1, 'the load before the decision, and no read after the append');

  // The other replica keeps no state of the brand: it reads it, from the leader, and decides on it.
  const renamed = await other.handle(brand.streamId(1), brand.decider, upsertBrand('Kiva Confections'), meta);
  t.is(renamed.revision, 1);
  t.is(renamed.firstPosition, created.position);
  t.is(other.conflicts(), 0, 'decided on the stream as written, not on the follower’s empty copy');

  // A no-op is answered on what was written too: nothing appended, the stream's revision.
  const again = await other.handle(brand.streamId(1), brand.decider, upsertBrand('Kiva Confections'), meta);
  t.deepEqual(again.events, []);
  t.is(again.revision, 1);
  t.deepEqual(
    (await cluster.log.readStream(brand.streamId(1))).map((e) => e.revision),
    [0, 1],
  );
  t.is(cluster.follower.served.reads, 0);
});

test('a new partner’s two-event first append reads its first position from the leader', async (t) => {
  const cluster = await clusterFor(t);
  const commands = createCommandHandler(processOn(t, cluster.connectionString('follower')), eventRegistry);
  await cluster.lag();
  const partnerId = randomUUID();
  const registered = await commands.handle(
    partner.streamId(partnerId),
    partner.decider,
    {
      type: 'RegisterPartner',
      partner_id: partnerId,
      name: 'Kiva Marketing',
      kind: 'brand',
      brand_ids: [7],
      store_ids: [],
      all_brands: false,
      key: { key_id: 'key_aaaaaaaaaaaa', key_hash: 'a'.repeat(64), key_prefix: 'pds_key_aaaa' },
      unknown_brand_ids: [],
      unknown_store_ids: [],
      at,
    },
    meta,
  );
  const written = await cluster.log.readStream(partner.streamId(partnerId));
  t.deepEqual(
    written.map((e) => e.type),
    ['PartnerRegistered', 'PartnerKeyIssued'],
  );
  t.is(registered.firstPosition, written[0].position);
  t.is(registered.position, written[1].position);
  t.is(cluster.follower.served.reads, 0);
});

test('an idempotent repeat answers the first write’s position, read from the leader', async (t) => {
  const cluster = await clusterFor(t);
  const store = processOn(t, cluster.connectionString('follower'));
  await cluster.lag();
  const batch = [event(), event()];
  const first = await store.append('brand-1', batch, { expectedRevision: 'no_stream' });
  // The same write again (its answer was lost): the server answers it with no position.
  const again = await store.append('brand-1', batch, { expectedRevision: 'no_stream' });
  t.deepEqual(again, first);
  t.is((await cluster.log.readStream('brand-1')).length, 2);
  t.is(cluster.follower.served.reads, 0);
});

test('the double’s follower serves reads that do not require the leader from its stale copy', async (t) => {
  // What the adapter's stream reads would meet without `requires-leader`: the model, checked with the client.
  const cluster = await clusterFor(t);
  const { EventStoreDBClient } = await import('@eventstore/db-client');
  const client = EventStoreDBClient.connectionString(cluster.connectionString('follower'));
  t.teardown(() => client.dispose());
  await cluster.log.append('brand-1', [event()]);
  await cluster.lag();
  await cluster.log.append('brand-1', [event()]);
  const revisions = async (requiresLeader: boolean) => {
    const out: bigint[] = [];
    for await (const r of client.readStream('brand-1', { requiresLeader }))
      out.push(r.event?.revision ?? -1n);
    return out;
  };
  t.deepEqual(await revisions(false), [0n], 'the follower holds the first event only');
  t.like(cluster.follower.served, { reads: 1 });
  cluster.catchUp();
  t.deepEqual(await revisions(false), [0n, 1n], 'caught up, it holds both');
});
