/**
 * The engines of the split deployment restarted under load (docs/operations.md, "Recovery";
 * docs/webhooks.md, "Order, isolation, durability"). The service runs role `all` (the APIs, the
 * projector and the dispatcher in this process) on EventStoreDB and a MongoDB replica set in
 * containers (`support/containers.ts`, as docker-compose.yml runs them), with a webhook subscription
 * to a local receiver. Platform writers take carts through a pickup and partners page through them
 * (`support/cart-traffic.ts`) while the EventStoreDB container restarts, and then the MongoDB one
 * (killed and started again on their data on disk). Then: every write is in the log once; the partner
 * read of every cart says what its events say; the webhook of every status change arrived once, in
 * cart order (again only as a new attempt after the service recorded one interrupted: an attempt whose
 * result was lost with the engine is sent again, docs/webhooks.md); and the service is ready again by
 * itself. It runs only where it can start containers, and says why it is skipped elsewhere (or fails,
 * under `PDS_REQUIRE_ENGINES=1`).
 */
import { randomBytes } from 'node:crypto';
import test, { type ExecutionContext } from 'ava';
import * as cart from '../domain/cart.ts';
import * as delivery from '../domain/webhook-delivery.ts';
import { createEsdbEventStore } from '../eventstore/esdb.ts';
import { type RecordedEvent, StreamNotFoundError } from '../eventstore/port.ts';
import {
  pickupSteps,
  startCartTraffic,
  startPartnerReads,
  type WrittenCart,
} from './support/cart-traffic.ts';
import { createWebhook, partnerCartView, seedCatalog, storeOperator } from './support/cart-world.ts';
import { startEventStore, startMongoReplicaSet, withDatabase } from './support/containers.ts';
import { containersProblem, reportMissingEngine } from './support/engines.ts';
import { startService } from './support/service.ts';
import { type ReceivedWebhook, startReceiver } from './support/webhook-receiver.ts';

const SUITE = 'engines restarted under traffic';
const STORE_ID = 1;
const MENU_PRODUCT_ID = STORE_ID * 100; // seedCatalog's menu product at the store
const CARTS = `/partner/store/v1/carts?store_id=${STORE_ID}&limit=100`;
/** Writes done between two restarts, and after the last, so that each restart falls amid traffic. */
const STEPS_BETWEEN = 40;
/** How long the service may take to be itself again after a restart. */
const RECOVERY_MS = 180_000;

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits for `check` to hold; `what` says what it waited for (and, as a function, what it last saw). */
async function eventually(
  what: string | (() => string),
  check: () => Promise<boolean> | boolean,
): Promise<void> {
  const deadline = Date.now() + RECOVERY_MS;
  while (!(await check())) {
    if (Date.now() > deadline) {
      throw new Error(
        `timed out after ${RECOVERY_MS / 1000} s waiting for ${typeof what === 'string' ? what : what()}`,
      );
    }
    await delay(100);
  }
}

/** A cart event as the steps name it: its type, and a status change's new status. */
const stepEvent = (e: RecordedEvent) =>
  e.type === 'CartStatusChanged' ? `${e.type}:${(e.data as { to: string }).to}` : e.type;

/**
 * The receiver's requests of one delivery, checked against the delivery's queue in the log: recorded
 * delivered once; received once, or again only as another attempt the log started after recording an
 * attempt interrupted; never one attempt twice. Answers how many requests beyond the first it got.
 */
function checkDelivery(
  t: ExecutionContext,
  id: string,
  requests: ReceivedWebhook[],
  queue: readonly RecordedEvent[],
): number {
  const mine = queue.filter((e) => (e.data as { delivery_id?: string }).delivery_id === id);
  const results = mine
    .filter((e) => e.type === 'WebhookDeliveryAttempted')
    .map((e) => e.data as { attempt: number; outcome: string });
  const started = mine
    .filter((e) => e.type === 'WebhookDeliveryAttemptStarted')
    .map((e) => (e.data as { attempt: number }).attempt);
  const delivered = results.filter((r) => r.outcome === 'delivered');
  const interrupted = results.filter((r) => r.outcome === 'interrupted').length;
  const attempts = requests.map((r) => Number(r.headers['x-service-delivery-attempt']));
  t.is(delivered.length, 1, `${id}: recorded delivered once`);
  t.is(new Set(attempts).size, attempts.length, `${id}: no attempt sent twice (${attempts})`);
  t.true(
    attempts.every((a) => started.includes(a)),
    `${id}: every attempt received was started in the log`,
  );
  t.true(
    delivered.length === 1 && attempts.includes(delivered[0].attempt),
    `${id}: the attempt recorded delivered was received`,
  );
  t.true(
    requests.length <= 1 + interrupted,
    `${id}: received ${requests.length} times, with ${interrupted} attempt(s) recorded interrupted`,
  );
  return requests.length - 1;
}

/** Starts the engines, the receiver and the service on them, with a catalog, a store operator and a subscription. */
async function deployment(t: ExecutionContext) {
  const started = await Promise.allSettled([startEventStore(), startMongoReplicaSet()]);
  for (const engine of started) if (engine.status === 'fulfilled') t.teardown(() => engine.value.stop());
  const [esdb, mongo] = started.map((engine) => {
    if (engine.status === 'rejected') throw engine.reason;
    return engine.value;
  });
  const receiver = await startReceiver(t);
  const s = await startService(t, {
    env: {
      PDS_EVENT_STORE: esdb.url,
      PDS_READ_STORE: withDatabase(mongo.url, 'pds'),
      PDS_OPERATOR_TOKEN: randomBytes(24).toString('base64url'),
      PDS_SECRET_KEY: randomBytes(32).toString('base64'),
      PDS_ALLOW_PRIVATE_WEBHOOK_URLS: 'true',
      PDS_WEBHOOK_TIMEOUT: '5s',
      // Enough attempts to outlast both restarts: a parked delivery would be a lost webhook.
      PDS_WEBHOOK_RETRY_SCHEDULE: '0s,500ms,1s,2s,2s,2s,2s,2s,2s,2s,2s,2s',
    },
  });
  await seedCatalog(s, [STORE_ID]);
  const { partnerId, key } = await storeOperator(s, 'Restart Test Shop', STORE_ID);
  const hook = await createWebhook(s, receiver.url, [STORE_ID]);
  // The key is known to the partner APIs once its partner is projected.
  await eventually('the partner key', async () => {
    const res = await fetch(`${s.base}${CARTS}`, { headers: { authorization: `Bearer ${key}` } });
    await res.body?.cancel();
    return res.status === 200;
  });
  return { esdb, mongo, receiver, s, partnerId, key, webhookId: hook.id };
}

const problem = await containersProblem();

if (problem !== undefined) {
  reportMissingEngine(test, SUITE, `no containers to restart: ${problem}`);
} else {
  test('EventStoreDB and then MongoDB restarted amid writes, subscriptions and partner reads: nothing lost, each webhook once, ready again by itself', async (t) => {
    t.timeout(20 * 60_000);
    const { esdb, mongo, receiver, s, partnerId, key, webhookId } = await deployment(t);

    const traffic = startCartTraffic(s, {
      writers: 3,
      steps: pickupSteps(STORE_ID, MENU_PRODUCT_ID, partnerId),
      pauseMs: 25,
      deadline: Date.now() + 10 * 60_000,
    });
    const reads = startPartnerReads(s.base, key, CARTS, { readers: 2, pauseMs: 50, timeoutMs: 60_000 });
    const writesGoOn = async (what: string) => {
      const from = traffic.steps();
      await eventually(`writes after ${what}`, () => traffic.steps() >= from + STEPS_BETWEEN);
    };
    let carts: WrittenCart[];
    try {
      await writesGoOn('the start');
      await esdb.container.restart();
      await writesGoOn('the EventStoreDB restart');
      await mongo.container.restart();
      const restarted = Date.now();
      await eventually('a partner read after the MongoDB restart', () => reads.okSince(restarted) > 0);
      await writesGoOn('the MongoDB restart');
    } finally {
      const counts = await reads.stop();
      t.log(`partner reads: ${counts.ok} whole walks, failed by status: ${JSON.stringify(counts.failed)}`);
      carts = await traffic.stop();
    }
    t.log(`${carts.length} carts, ${traffic.steps()} writes, ${traffic.retries()} sent again`);

    // Ready again by itself, every subscription back and every read model caught up.
    let readiness = '';
    await eventually(
      () => `/readyz 200, last ${readiness}`,
      async () => {
        const res = await s.call('GET', '/readyz');
        readiness = `${res.status} ${await res.text()}`;
        return res.status === 200;
      },
    );
    let projections = '';
    await eventually(
      () => `the read models caught up, last ${projections}`,
      async () => {
        const res = await s.call('GET', '/admin/v1/projections');
        projections = await res.text();
        if (res.status !== 200) return false;
        const { projections: all } = JSON.parse(projections) as {
          projections: Array<{ state: string; lag_events: number }>;
        };
        return all.every((p) => p.state === 'live' && p.lag_events === 0);
      },
    );
    const metrics = await (await s.call('GET', '/metrics')).text();
    t.regex(metrics, /^pds_subscription_resubscriptions_total\{[^}]*\} [1-9]/m, 'the restarts were felt');
    t.regex(s.logs(), /subscription dropped: subscribing again/);

    // Every write in the log once: each cart's stream holds its steps' events, in order, nothing twice.
    const log = createEsdbEventStore(esdb.url);
    t.teardown(() => log.close());
    const steps = pickupSteps(STORE_ID, MENU_PRODUCT_ID, partnerId).flatMap((step) => step.events);
    const streams = new Map<string, RecordedEvent[]>();
    for (const c of carts) {
      const events = await log.readStream(cart.streamId(c.uuid));
      t.deepEqual(events.map(stepEvent), steps, `cart ${c.uuid}`);
      t.is(events.at(-1)?.revision, c.revision, `cart ${c.uuid}: the last revision the platform answered`);
      streams.set(c.uuid, events);
    }
    const ids = [...streams.values()].flat().map((e) => e.id);
    t.is(new Set(ids).size, ids.length, 'no event id twice');

    // The partner read of every cart says what its events say.
    const expected = new Map(carts.map((c) => [c.uuid, 'finished, 1 line(s)']));
    t.deepEqual(await partnerCartView(s.base, key, STORE_ID), expected);

    // Each status change's webhook: delivered once, in cart order, sent again only after an interruption.
    const expectedIds = new Map<string, { uuid: string; status: string }>();
    for (const [uuid, events] of streams) {
      for (const e of events.filter((x) => x.type === 'CartStatusChanged')) {
        expectedIds.set(delivery.deliveryId(webhookId, e.id), {
          uuid,
          status: (e.data as { to: string }).to,
        });
      }
    }
    const queues = new Map<string, RecordedEvent[]>();
    await eventually('every webhook recorded delivered', async () => {
      for (const c of carts) {
        const queue = await log.readStream(delivery.streamId(webhookId, c.uuid)).catch((err: unknown) => {
          if (err instanceof StreamNotFoundError) return [];
          throw err;
        });
        queues.set(c.uuid, queue);
      }
      const deliveredIds = new Set(
        [...queues.values()]
          .flat()
          .filter(
            (e) =>
              e.type === 'WebhookDeliveryAttempted' &&
              (e.data as { outcome: string }).outcome === 'delivered',
          )
          .map((e) => (e.data as { delivery_id: string }).delivery_id),
      );
      return [...expectedIds.keys()].every((id) => deliveredIds.has(id));
    });
    const byId = Map.groupBy(receiver.received, (r) => String(r.headers['x-service-webhook-id']));
    t.deepEqual(
      [...byId.keys()].filter((id) => !expectedIds.has(id)),
      [],
      'no webhook not owed',
    );
    let again = 0;
    for (const [id, { uuid }] of expectedIds) {
      again += checkDelivery(t, id, byId.get(id) ?? [], queues.get(uuid) ?? []);
    }
    t.log(`${expectedIds.size} webhooks, ${again} sent again after an interrupted attempt`);
    const firstArrivals = [
      ...new Set(receiver.received.map((r) => String(r.headers['x-service-webhook-id']))),
    ];
    for (const c of carts) {
      t.deepEqual(
        firstArrivals
          .filter((id) => expectedIds.get(id)?.uuid === c.uuid)
          .map((id) => expectedIds.get(id)?.status),
        ['verification', 'preparing', 'ready_for_pickup', 'finished'],
        `cart ${c.uuid}: its webhooks in order`,
      );
    }
  });
}
