/**
 * What the service costs EventStoreDB's server as the log grows, on a model of that server around the
 * embedded store (test/support/esdb-server-model.ts): the service's reads charged what the server
 * scans for them, its catch-up subscriptions the EventStoreDB adapter's own, with the server's
 * checkpoints. Fanning cart events out to webhooks, and a `/metrics` scrape, must cost the same with
 * ten thousand events of history as with a million: the dispatcher's view of the webhook
 * subscriptions, whose streams are written rarely, once searched back from the head to their last
 * event for every cart event it fanned out, and the lag gauges walked from each projection's
 * checkpoint (docs/read-side.md, "Progress past other streams' events").
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { openSqliteEventStore } from '../eventstore/sqlite.ts';
import { checkedOut, createWebhook, move, PICKUP_MOVES, seedCatalog } from './support/cart-world.ts';
import { esdbServerModel, type ModelledStore, type ServerCosts } from './support/esdb-server-model.ts';
import { readyz, until } from './support/probes.ts';
import { rawEvent } from './support/raw-events.ts';
import { startService } from './support/service.ts';
import { startReceiver } from './support/webhook-receiver.ts';

const CARTS = 6;
/** Status changes per cart: checkout, then the pickup moves; each is one webhook. */
const WEBHOOKS = CARTS * (1 + PICKUP_MOVES.length);
const HISTORY_BATCH = 5_000;

interface Measured {
  fanOut: ServerCosts;
  scrape: ServerCosts;
}

/**
 * A service whose webhook subscription and catalog were written before `history` events of other
 * streams, then started on the model: what fanning out the status changes of a few carts, and then
 * one scrape, cost the server.
 */
async function measure(t: ExecutionContext, history: number): Promise<Measured> {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'pds-costs-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const receiver = await startReceiver(t);
  // On the model too: what the service stores (checkpoints, working sets) holds the model's positions.
  const first = await startService(t, { dataDir, wrapStore: esdbServerModel });
  await seedCatalog(first, [1]);
  await createWebhook(first, receiver.url, [1]);
  await first.service.stop();

  const events = await openSqliteEventStore(path.join(dataDir, 'events.db'));
  for (let i = 0; i < history / HISTORY_BATCH; i++) {
    await events.append(
      `other-${i}`,
      Array.from({ length: HISTORY_BATCH }, () => rawEvent('Other')),
    );
  }
  await events.close();

  let model: ModelledStore | undefined;
  const s = await startService(t, {
    dataDir,
    wrapStore: (inner) => {
      model = esdbServerModel(inner);
      return model;
    },
  });
  await until('the service is ready', async () => (await readyz(s)).code === 200, 60_000);
  const server = model as ModelledStore;
  server.reset();
  for (let i = 0; i < CARTS; i++) {
    const cart = await checkedOut(s, 1);
    for (const status of PICKUP_MOVES) {
      await move(s, cart, status, status === 'with_review' ? { rating: 4 } : {});
    }
  }
  await receiver.waitFor(WEBHOOKS, 30_000);
  const fanOut = { ...server.costs };
  server.reset();
  const scraped = await s.call('GET', '/metrics');
  t.is(scraped.status, 200);
  await scraped.text();
  return { fanOut, scrape: { ...server.costs } };
}

test('fanning out cart events and a /metrics scrape cost the server the same at 10,000 and 1,000,000 events', async (t) => {
  t.timeout(180_000);
  const small = await measure(t, 10_000);
  const large = await measure(t, 1_000_000);
  const perWebhook = (m: Measured) =>
    `${Math.round((m.fanOut.reads / WEBHOOKS) * 10) / 10} reads of ` +
    `${Math.round((m.fanOut.scanned / WEBHOOKS) * 10) / 10} events`;
  t.log(
    `per fanned-out cart event (with the commands that made them): ` +
      `${perWebhook(small)} at 10k, ${perWebhook(large)} at 1M; ` +
      `a scrape: ${small.scrape.reads} reads of ${small.scrape.scanned} events at 10k, ` +
      `${large.scrape.reads} reads of ${large.scrape.scanned} events at 1M`,
  );
  // Flat: a fan-out never reads the history, only each cart and what follows the followers' progress.
  t.true(large.fanOut.scanned <= small.fanOut.scanned * 1.25 + 200, JSON.stringify({ small, large }));
  t.true(large.scrape.scanned <= small.scrape.scanned * 1.25 + 200, JSON.stringify({ small, large }));
  t.true(large.scrape.reads <= small.scrape.reads + 2, JSON.stringify({ small, large }));
});
