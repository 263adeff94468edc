/**
 * The abandonment timer (docs/write-side.md, "Abandonment") on a temporary embedded store and a manual clock:
 * exactly one CartAbandoned at first_item_at + 6 h, none for carts checked out or emptied, a new
 * period after a refill, the expected-revision guard (a changed cart, two timers racing), deadlines
 * restored from the events after a stop, and the restore time for 10,000 pending carts.
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { type CommandMetadata, createCommandHandler } from '../../application/command-handler.ts';
import { GUARD } from '../../application/durable-follower.ts';
import {
  ABANDONMENT_ACTOR,
  ABANDONMENT_FOLLOWER,
  type AbandonmentTimer,
  createAbandonmentTimer,
  type Tracked,
  trackCart,
  trackedDeadline,
} from '../../dispatcher/abandonment.ts';
import * as cart from '../../domain/cart.ts';
import { manualClock } from '../../domain/clock.ts';
import { fold } from '../../domain/decider.ts';
import { eventRegistry } from '../../domain/index.ts';
import type { EventStore, NewEvent, RecordedEvent } from '../../eventstore/port.ts';
import { openSqliteEventStore } from '../../eventstore/sqlite.ts';
import type { ReadStore } from '../../projections/read-store.ts';
import { openSqliteReadStore } from '../../projections/sqlite/read-store.ts';
import { startService } from '../support/service.ts';

const T0 = '2026-03-01T10:00:00.000Z';
const HOUR = 3_600_000;
const SIX_HOURS = 6 * HOUR;

type ManualClock = ReturnType<typeof manualClock>;

async function tempDir(t: ExecutionContext): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-abandon-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** An embedded store in a temp dir; `again()` opens a second connection to the same file (another process). */
async function tempStore(t: ExecutionContext): Promise<{ store: EventStore; again(): Promise<EventStore> }> {
  const dir = await tempDir(t);
  const file = path.join(dir, 'events.db');
  const opened: EventStore[] = [];
  const open = async () => {
    const s = await openSqliteEventStore(file);
    opened.push(s);
    return s;
  };
  t.teardown(async () => {
    for (const s of opened.reverse()) await s.close();
  });
  return { store: await open(), again: open };
}

/** A timer with its own read store by default: a new process whose working set starts empty. */
function timer(
  t: ExecutionContext,
  store: EventStore,
  clock: ManualClock,
  readStore: ReadStore = openSqliteReadStore(':memory:'),
): AbandonmentTimer {
  const a = createAbandonmentTimer({ store, readStore, clock, abandonAfterMs: SIX_HOURS });
  t.teardown(() => a.stop());
  a.start();
  return a;
}

/** Drives carts through the cart decider and the command handler, as the platform API does. */
function carts(store: EventStore, clock: ManualClock) {
  const commands = createCommandHandler(store, eventRegistry);
  const meta = (correlationId: string = randomUUID()): CommandMetadata => ({
    correlationId,
    causationId: null,
    actor: { type: 'platform', id: 'test' },
    at: clock.now().toISOString(),
  });
  const run = (uuid: string, command: cart.CartCommand, correlationId?: string) =>
    commands.handle(cart.streamId(uuid), cart.decider, command, meta(correlationId));
  const at = () => clock.now().toISOString();
  return {
    async create(uuid = randomUUID()): Promise<string> {
      await run(uuid, {
        type: 'CreateCart',
        cart_uuid: uuid,
        store_id: 1,
        source: { channel: 'headless', partner_id: 'p-1' },
        user_id: null,
        at: at(),
        context: { store_exists: true },
      });
      return uuid;
    },
    add: (uuid: string, menuProductId = 1, count = 1, correlationId?: string) =>
      run(
        uuid,
        {
          type: 'AddCartItem',
          menu_product_id: menuProductId,
          price_id: 'gram',
          count,
          at: at(),
          context: { line: lineContext(menuProductId) },
        },
        correlationId,
      ),
    remove: (uuid: string, menuProductId = 1) =>
      run(uuid, { type: 'RemoveCartItem', menu_product_id: menuProductId, at: at() }),
    quantity: (uuid: string, menuProductId: number, count: number) =>
      run(uuid, { type: 'ChangeCartItemQuantity', menu_product_id: menuProductId, count, at: at() }),
    checkOut: (uuid: string) =>
      run(uuid, {
        type: 'CheckOutCart',
        reservation_mode: 'pickup',
        promo_code: null,
        at: at(),
        context: { store: { pickup: true, delivery: true, curbside_enabled: false } },
      }),
  };
}

const lineContext = (menuProductId: number) => ({
  product_id: menuProductId,
  store_id: 1,
  name: `Product ${menuProductId}`,
  brand: 'Brand 1',
  brand_id: 1,
  kind: 'flower' as const,
  kind_subtype: null,
  lineage: 'hybrid' as const,
  image_urls: [],
  unit_price: '10.00',
  discounted_unit_price: '10.00',
  special_id: null,
  special_title: null,
});

async function eventsOf(store: EventStore, uuid: string): Promise<RecordedEvent[]> {
  return store.readStream(cart.streamId(uuid));
}
async function abandonedEvents(store: EventStore, uuid: string): Promise<RecordedEvent[]> {
  return (await eventsOf(store, uuid)).filter((e) => e.type === 'CartAbandoned');
}
async function countAbandoned(store: EventStore): Promise<number> {
  let n = 0;
  let after = 0;
  for (;;) {
    const page = await store.readAll({ after, maxCount: 1000, filter: { eventTypes: ['CartAbandoned'] } });
    if (page.length === 0) return n;
    n += page.length;
    after = page[page.length - 1].position;
  }
}

// ---------------------------------------------------------------------------------------------------

test('an idle cart gets exactly one CartAbandoned at first_item_at + 6 h, not a millisecond before', async (t) => {
  const { store } = await tempStore(t);
  const clock = manualClock(T0);
  const c = carts(store, clock);
  const uuid = await c.create();
  clock.advance(60_000);
  const correlation = randomUUID();
  const first = await c.add(uuid, 1, 2, correlation);
  const firstItemAt = clock.now().toISOString();
  clock.advance(2 * HOUR);
  await c.add(uuid, 2, 1); // a second line does not move the deadline
  await c.quantity(uuid, 1, 3);

  const a = timer(t, store, clock);
  await a.caughtUp;
  const deadline = Date.parse(firstItemAt) + SIX_HOURS;
  t.is(a.pending(), 1);
  t.is(a.dueAt(cart.streamId(uuid))?.getTime(), deadline);

  clock.set(new Date(deadline - 1));
  t.is(await a.tick(), 0);
  t.deepEqual(await abandonedEvents(store, uuid), []);

  clock.set(new Date(deadline));
  t.is(await a.tick(), 1);
  const abandoned = await abandonedEvents(store, uuid);
  t.is(abandoned.length, 1);
  const [e] = abandoned;
  const firstEvent = (await eventsOf(store, uuid)).find((x) => x.type === 'CartItemAdded');
  t.is(firstEvent?.revision, first.revision);
  t.deepEqual(e.data, {
    abandoned_at: new Date(deadline).toISOString(),
    first_item_at: firstItemAt,
    item_count: 4,
  });
  t.like(e.metadata, {
    actor: ABANDONMENT_ACTOR,
    causation_id: firstEvent?.id,
    correlation_id: correlation,
    occurred_at: new Date(deadline).toISOString(),
    schema_version: 1,
  });
  t.is(a.pending(), 0);
  t.is(a.tracked(), 0, 'an abandoned cart is dropped from memory');
  t.like(a.stats(), { abandoned: 1, refused: 0, stale: 0, errors: 0 });

  // Later ticks, later events and a second timer started afresh never add another.
  clock.advance(24 * HOUR);
  await c.add(uuid, 3, 1);
  await a.settle();
  t.is(await a.tick(), 0);
  const b = timer(t, store, clock);
  await b.caughtUp;
  t.is(b.pending(), 0);
  t.is(await b.tick(), 0);
  t.is((await abandonedEvents(store, uuid)).length, 1);
});

test('a cart checked out before the deadline, or emptied, is never abandoned; a refill starts a new period', async (t) => {
  const { store } = await tempStore(t);
  const clock = manualClock(T0);
  const c = carts(store, clock);
  const a = timer(t, store, clock);
  await a.caughtUp;

  const checkedOut = await c.create();
  const emptied = await c.create();
  const refilled = await c.create();
  const empty = await c.create();
  await c.add(checkedOut);
  await c.add(emptied, 1);
  await c.add(emptied, 2);
  await c.add(refilled);
  await a.settle();
  t.is(a.pending(), 3);
  t.is(a.tracked(), 3, 'the empty cart is not held');

  clock.advance(HOUR);
  await c.checkOut(checkedOut);
  await c.remove(emptied, 1);
  await a.settle();
  t.is(a.pending(), 2, 'one line left: still pending');
  await c.remove(emptied, 2);
  await c.remove(refilled);
  await a.settle();
  t.is(a.pending(), 0);
  t.is(a.tracked(), 0, 'checked-out and emptied carts leave the working set');

  clock.advance(2 * HOUR); // T0 + 3 h
  await c.add(refilled, 5);
  const refillAt = clock.now().getTime();
  await a.settle();
  t.is(a.dueAt(cart.streamId(refilled))?.getTime(), refillAt + SIX_HOURS);

  clock.set(new Date(Date.parse(T0) + SIX_HOURS)); // the first period's end: nothing
  t.is(await a.tick(), 0);
  clock.set(new Date(refillAt + SIX_HOURS - 1));
  t.is(await a.tick(), 0);
  clock.set(new Date(refillAt + SIX_HOURS));
  t.is(await a.tick(), 1);
  clock.advance(48 * HOUR);
  t.is(await a.tick(), 0);

  t.deepEqual(await abandonedEvents(store, checkedOut), []);
  t.deepEqual(await abandonedEvents(store, emptied), []);
  t.deepEqual(await abandonedEvents(store, empty), []);
  const [e] = await abandonedEvents(store, refilled);
  t.like(e.data, { first_item_at: new Date(refillAt).toISOString(), item_count: 1 });
  t.is(await countAbandoned(store), 1);
  t.like(a.stats(), { abandoned: 1, refused: 0, errors: 0, streamReads: 0 });
});

test('the tracked deadline agrees with the cart decider after every event', async (t) => {
  const { store } = await tempStore(t);
  const clock = manualClock(T0);
  const c = carts(store, clock);
  let seed = 42;
  const random = () => {
    seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
    return seed / 2 ** 31;
  };
  for (let n = 0; n < 20; n++) {
    const uuid = await c.create();
    const held = new Set<number>();
    for (let step = 0; step < 15; step++) {
      clock.advance(Math.floor(random() * HOUR));
      const mp = 1 + Math.floor(random() * 3);
      const r = random();
      if (r < 0.5) {
        await c.add(uuid, mp);
        held.add(mp);
      } else if (held.has(mp) && r < 0.8) {
        await c.remove(uuid, mp);
        held.delete(mp);
      } else if (held.has(mp)) await c.quantity(uuid, mp, 1 + Math.floor(random() * 5));
      const recorded = await eventsOf(store, uuid);
      let tracked: Tracked | 'closed' | undefined;
      for (const e of recorded) tracked = trackCart(tracked as Tracked | undefined, e);
      const state = fold(
        cart.decider,
        recorded.map((e) => eventRegistry.parse(e.type, e.data, 1) as cart.CartEvent),
      );
      const expected = cart.abandonmentDeadline(state, SIX_HOURS);
      const got = trackedDeadline(tracked as Tracked, SIX_HOURS);
      t.is(got === null ? null : new Date(got).toISOString(), expected, `cart ${n} step ${step}`);
    }
    if (n % 2 === 0 && held.size > 0) {
      await c.checkOut(uuid);
      let tracked: Tracked | 'closed' | undefined;
      for (const e of await eventsOf(store, uuid)) {
        if (tracked !== 'closed') tracked = trackCart(tracked, e);
      }
      t.is(tracked, 'closed');
    }
  }
});

/** A store whose subscription deliveries can be held back, so the timer's view goes stale on purpose. */
function gated(store: EventStore): { store: EventStore; hold(): void; release(): void } {
  let gate: Promise<void> = Promise.resolve();
  let open: () => void = () => {};
  const wrapped: EventStore = Object.create(store);
  wrapped.subscribeToAll = (options, handlers) =>
    store.subscribeToAll(options, {
      ...handlers,
      async onEvents(events) {
        await gate;
        await handlers.onEvents(events);
      },
    });
  return {
    store: wrapped,
    hold() {
      gate = new Promise((r) => {
        open = r;
      });
    },
    release: () => open(),
  };
}

test('expected-revision guard: a cart changed since the timer saw it is re-read and re-evaluated, never written blindly', async (t) => {
  const { store } = await tempStore(t);
  const clock = manualClock(T0);
  const c = carts(store, clock);
  const g = gated(store);
  const a = timer(t, g.store, clock);
  t.teardown(() => g.release()); // runs before the timer's stop, which waits for the held delivery
  await a.caughtUp;

  const stillDue = await c.create();
  const checkedOut = await c.create();
  await c.add(stillDue, 1);
  await c.add(checkedOut, 1);
  await a.settle();
  t.is(a.pending(), 2);

  // The timer's subscription is held back: it has not seen these writes when the deadline comes.
  g.hold();
  clock.advance(SIX_HOURS - 60_000);
  await c.add(stillDue, 2, 4); // does not move the deadline, but changes the revision
  await c.checkOut(checkedOut);
  clock.advance(60_000);
  // Both fire, both are refused as stale; the changed cart, still due, is fired again at its new
  // revision (by this tick's next pass, or by the real timer: tick waits for it either way).
  t.true((await a.tick()) >= 2);
  t.like(a.stats(), { abandoned: 1, stale: 2, refused: 0, errors: 0 });

  const [e] = await abandonedEvents(store, stillDue);
  t.is(e.revision, 3, 'appended after the change it had not seen');
  t.like(e.data, { item_count: 5 });
  t.deepEqual(await abandonedEvents(store, checkedOut), []);
  t.is(a.pending(), 0);

  g.release();
  await a.settle();
  t.is(a.pending(), 0);
  t.is(a.tracked(), 0);
  t.is(await countAbandoned(store), 1);
});

test('two timers on one store (two processes) racing for the same carts write exactly one CartAbandoned each', async (t) => {
  const { store, again } = await tempStore(t);
  const other = await again();
  const clock = manualClock(T0);
  const c = carts(store, clock);
  const uuids: string[] = [];
  for (let i = 0; i < 30; i++) {
    const uuid = await c.create();
    await c.add(uuid);
    uuids.push(uuid);
  }
  const a = timer(t, store, clock);
  const b = timer(t, other, clock);
  await Promise.all([a.caughtUp, b.caughtUp]);
  t.is(a.pending(), 30);
  t.is(b.pending(), 30);

  clock.advance(SIX_HOURS);
  await Promise.all([a.tick(), b.tick()]);
  for (const uuid of uuids) t.is((await abandonedEvents(store, uuid)).length, 1, uuid);
  t.is(await countAbandoned(store), 30);
  const sa = a.stats();
  const sb = b.stats();
  t.is(sa.abandoned + sb.abandoned, 30);
  t.is(sa.errors + sb.errors, 0);
  t.log(`timer a abandoned ${sa.abandoned} (stale ${sa.stale}), timer b ${sb.abandoned} (stale ${sb.stale})`);
  await Promise.all([a.settle(), b.settle()]);
  t.is(a.pending() + b.pending(), 0);
});

test('deadlines are restored from the events: carts that fell due while no timer ran are abandoned once at start', async (t) => {
  const { store } = await tempStore(t);
  const clock = manualClock(T0);
  const c = carts(store, clock);
  const first = timer(t, store, clock);
  await first.caughtUp;
  const overdue1 = await c.create();
  const overdue2 = await c.create();
  const checkedOut = await c.create();
  const notYet = await c.create();
  await c.add(overdue1);
  await c.add(overdue2);
  await c.add(checkedOut);
  clock.advance(5 * HOUR);
  await c.add(notYet);
  await c.checkOut(checkedOut);
  await first.settle();
  t.is(first.pending(), 3);
  await first.stop();

  // Nothing runs for a while: the deadlines of two carts pass.
  clock.set(new Date(Date.parse(T0) + 8 * HOUR));
  const second = timer(t, store, clock);
  await second.caughtUp;
  await second.tick(); // the real timer may have started them already; tick waits for those too
  t.is((await abandonedEvents(store, overdue1)).length, 1);
  t.is((await abandonedEvents(store, overdue2)).length, 1);
  t.deepEqual(await abandonedEvents(store, checkedOut), []);
  t.deepEqual(await abandonedEvents(store, notYet), []);
  const [late] = await abandonedEvents(store, overdue1);
  t.like(late.data, { abandoned_at: clock.now().toISOString(), first_item_at: T0 });
  t.is(second.pending(), 1);
  t.is(second.dueAt(cart.streamId(notYet))?.getTime(), Date.parse(T0) + 11 * HOUR);

  // A third start finds nothing more to do for them.
  await second.stop();
  const third = timer(t, store, clock);
  await third.caughtUp;
  t.is(await third.tick(), 0);
  t.is(third.pending(), 1);
  t.is(await countAbandoned(store), 2);
});

test('through the platform API on a running service: one CartAbandoned at the deadline', async (t) => {
  const clock = manualClock(T0);
  const s = await startService(t, { clock, env: { PDS_ABANDON_AFTER: '6h' } });
  const call = async (method: string, url: string, body?: unknown) => {
    const r = await s.call(method, url, body);
    if (r.status >= 300) t.fail(`${method} ${url} answered ${r.status}: ${await r.text()}`);
    return r;
  };
  const P = '/platform/v1';
  await call('PUT', `${P}/stores/1`, {
    name: 'Green Door',
    address: '843 Howard St',
    city: 'San Francisco',
    state: 'CA',
    zip: '94103',
    lat: 37.7816,
    long: -122.4048,
    pickup: true,
    delivery: true,
  });
  await call('PUT', `${P}/brands/1`, { name: 'Brand 1' });
  await call('PUT', `${P}/products/1`, { name: 'Product 1', brand_id: 1, kind: 'flower', lineage: 'hybrid' });
  await call('PUT', `${P}/stores/1/menu_products/1`, { product_id: 1, prices: { gram: '10.00' } });
  const idle = randomUUID();
  const bought = randomUUID();
  for (const uuid of [idle, bought]) {
    await call('POST', `${P}/carts`, {
      uuid,
      store_id: 1,
      source: { channel: 'headless', partner_id: 'p-1' },
    });
    await call('POST', `${P}/carts/${uuid}/items`, { menu_product_id: 1, price_id: 'gram', count: 2 });
  }
  clock.advance(HOUR);
  await call('POST', `${P}/carts/${bought}/checkout`, { reservation_mode: 'pickup' });

  const ready = (await (await fetch(`${s.base}/readyz`)).json()) as { checks: Record<string, string> };
  t.is(ready.checks.abandonment_timers_restored, 'ok');

  // The service runs its own timer on its real timer; this one (another process, in effect) is driven by hand.
  const store = await s.openStore();
  const a = timer(t, store, clock);
  await a.caughtUp;
  t.is(a.pending(), 1);
  clock.set(new Date(Date.parse(T0) + SIX_HOURS - 1));
  t.is(await a.tick(), 0);
  clock.set(new Date(Date.parse(T0) + SIX_HOURS));
  t.is(await a.tick(), 1);
  t.is((await abandonedEvents(store, idle)).length, 1);
  t.deepEqual(await abandonedEvents(store, bought), []);

  const metrics = await (await fetch(`${s.base}/metrics`)).text();
  t.regex(metrics, /^pds_abandonment_timers_pending \d+$/m);
});

/** A store that counts the cart events its subscriptions hand out and the streams read. */
function counted(store: EventStore): { store: EventStore; events: () => number; streamReads: () => number } {
  let events = 0;
  let streamReads = 0;
  const wrapped: EventStore = Object.create(store);
  wrapped.subscribeToAll = (options, handlers) =>
    store.subscribeToAll(options, {
      ...handlers,
      onEvents(batch) {
        events += batch.length;
        return handlers.onEvents(batch);
      },
    });
  wrapped.readStream = (streamId, options) => {
    streamReads += 1;
    return store.readStream(streamId, options);
  };
  return { store: wrapped, events: () => events, streamReads: () => streamReads };
}

/** Cart events written after `position`. */
async function cartEventsAfter(store: EventStore, position: number): Promise<number> {
  return (await store.readAll({ after: position, filter: { streamPrefixes: ['cart-'] } })).length;
}

test('a restart resumes from the read store: pending carts come back, only later cart events are read, nothing is lost', async (t) => {
  const { store } = await tempStore(t);
  const clock = manualClock(T0);
  const c = carts(store, clock);
  const readStore = openSqliteReadStore(':memory:');
  const first = timer(t, store, clock, readStore);
  await first.caughtUp;
  const abandoned = await c.create();
  await c.add(abandoned);
  const emptyAtStop = await c.create();
  clock.advance(HOUR);
  const stillPending = await c.create();
  await c.add(stillPending, 1);
  await c.add(stillPending, 2);
  const checkedOutWhileDown = await c.create();
  await c.add(checkedOutWhileDown);
  await first.settle();
  clock.set(new Date(Date.parse(T0) + SIX_HOURS));
  t.is(await first.tick(), 1);
  await first.settle();
  t.is(first.tracked(), 2);
  await first.stop();
  const checkpoint = (await readStore.getCheckpoint(ABANDONMENT_FOLLOWER.name))?.position ?? 0;
  t.is(checkpoint, await store.headPosition());

  // While no timer runs: a checkout, a first item in a cart created before (its stream is read), an
  // item put in the abandoned cart (read too: it stays abandoned), and a new cart.
  await c.checkOut(checkedOutWhileDown);
  await c.add(emptyAtStop, 3);
  await c.add(abandoned, 4);
  const created = await c.create();
  await c.add(created);

  const o = counted(store);
  const second = timer(t, o.store, clock, readStore);
  await second.caughtUp;
  t.deepEqual(second.resumed(), { position: checkpoint, documents: 2 });
  t.is(o.events(), await cartEventsAfter(store, checkpoint), 'only the events after the checkpoint');
  t.is(o.streamReads(), 2, 'the streams of the two carts the timer did not hold that took an item');
  t.is(second.tracked(), 3);
  t.is(second.dueAt(cart.streamId(stillPending))?.getTime(), Date.parse(T0) + HOUR + SIX_HOURS);
  t.is(second.dueAt(cart.streamId(emptyAtStop))?.getTime(), Date.parse(T0) + 2 * SIX_HOURS);
  t.is(second.dueAt(cart.streamId(created))?.getTime(), Date.parse(T0) + 2 * SIX_HOURS);
  t.is(second.dueAt(cart.streamId(checkedOutWhileDown)), undefined);
  t.is(second.dueAt(cart.streamId(abandoned)), undefined);

  clock.set(new Date(Date.parse(T0) + 2 * SIX_HOURS));
  t.is(await second.tick(), 3);
  t.is((await abandonedEvents(store, abandoned)).length, 1);
  t.deepEqual(await abandonedEvents(store, checkedOutWhileDown), []);
  t.like((await abandonedEvents(store, stillPending))[0]?.data, { item_count: 2 });
  t.is(await countAbandoned(store), 4);
  await second.settle();
  t.is(second.tracked(), 0);
  await second.stop(); // commits what it applied
  t.deepEqual(
    await (await readStore.collection(ABANDONMENT_FOLLOWER.collection)).count({ _id: { $ne: GUARD } }),
    0,
  );
});

test('start-up is bounded by the working set: with hundreds of settled carts in history a restart reads the events after the checkpoint and holds the pending carts only', async (t) => {
  const { store } = await tempStore(t);
  const clock = manualClock(T0);
  const c = carts(store, clock);
  const readStore = openSqliteReadStore(':memory:');
  const first = timer(t, store, clock, readStore);
  await first.caughtUp;
  for (let i = 0; i < 100; i++) {
    const checkedOut = await c.create();
    await c.add(checkedOut);
    await c.checkOut(checkedOut);
    const emptied = await c.create();
    await c.add(emptied);
    await c.remove(emptied);
    await c.create(); // never given an item
    const idle = await c.create();
    await c.add(idle);
  }
  await first.settle();
  clock.set(new Date(Date.parse(T0) + SIX_HOURS));
  t.is(await first.tick(), 100); // the idle ones are abandoned
  clock.advance(HOUR);
  const pending: string[] = [];
  for (let i = 0; i < 5; i++) {
    const uuid = await c.create();
    await c.add(uuid);
    pending.push(uuid);
  }
  await first.settle();
  await first.stop();
  const history = await cartEventsAfter(store, 0);
  t.true(history > 1_000, `${history} cart events in history`);
  const stored = await readStore.collection(ABANDONMENT_FOLLOWER.collection);
  t.is(await stored.count({ _id: { $ne: GUARD } }), 5, 'the read store holds the pending carts only');

  const later = await c.create();
  await c.add(later);

  const o = counted(store);
  const second = timer(t, o.store, clock, readStore);
  await second.caughtUp;
  t.is(o.events(), 2, 'the two cart events written after the checkpoint');
  t.is(o.streamReads(), 0);
  t.is(second.resumed().documents, 5);
  t.is(second.tracked(), 6);
  t.is(second.pending(), 6);
  for (const uuid of [...pending, later]) t.truthy(second.dueAt(cart.streamId(uuid)), uuid);
});

test('two timers sharing one read store (two dispatchers on one MongoDB): one CartAbandoned each, and a start from that store holds the carts still pending', async (t) => {
  const { store, again } = await tempStore(t);
  const other = await again();
  const clock = manualClock(T0);
  const c = carts(store, clock);
  const readStore = openSqliteReadStore(':memory:');
  const a = timer(t, store, clock, readStore);
  const b = timer(t, other, clock, readStore);
  await Promise.all([a.caughtUp, b.caughtUp]);
  const due: string[] = [];
  for (let i = 0; i < 20; i++) {
    const uuid = await c.create();
    await c.add(uuid);
    due.push(uuid);
  }
  clock.advance(HOUR);
  const later = await c.create();
  await c.add(later);
  await Promise.all([a.settle(), b.settle()]);
  clock.set(new Date(Date.parse(T0) + SIX_HOURS));
  await Promise.all([a.tick(), b.tick()]);
  for (const uuid of due) t.is((await abandonedEvents(store, uuid)).length, 1, uuid);
  await Promise.all([a.settle(), b.settle()]);
  await Promise.all([a.stop(), b.stop()]);

  const third = timer(t, store, clock, readStore);
  await third.caughtUp;
  t.is(third.tracked(), 1);
  t.is(third.dueAt(cart.streamId(later))?.getTime(), Date.parse(T0) + HOUR + SIX_HOURS);
  clock.set(new Date(Date.parse(T0) + HOUR + SIX_HOURS));
  t.is(await third.tick(), 1);
  t.is(await countAbandoned(store), 21);
});

test('restore: 10,000 pending carts are rebuilt from the events quickly', async (t) => {
  const { store } = await tempStore(t);
  const clock = manualClock(T0);
  const N = 10_000;
  const metadata = (at: string) => ({
    correlation_id: randomUUID(),
    causation_id: null,
    actor: { type: 'platform' as const, id: 'test' },
    occurred_at: at,
    schema_version: 1,
  });
  const base = Date.parse(T0);
  const appendStarted = performance.now();
  const writes: Promise<unknown>[] = [];
  for (let i = 0; i < N; i++) {
    const uuid = randomUUID();
    const at = new Date(base + i * 1000).toISOString();
    const toEvent = (e: { type: string; data: unknown }): NewEvent => ({ ...e, metadata: metadata(at) });
    writes.push(
      store.append(
        cart.streamId(uuid),
        [
          toEvent(
            cart.events.CartCreated({
              cart_uuid: uuid,
              store_id: 1,
              source: { channel: 'headless', partner_id: null },
              user_id: null,
              created_at: at,
            }),
          ),
          toEvent(
            cart.events.CartItemAdded({
              ...lineContext(1),
              menu_product_id: 1,
              price_id: 'gram',
              count: 1,
              added_at: at,
            }),
          ),
        ],
        { expectedRevision: 'no_stream' },
      ),
    );
    if (writes.length >= 500) await Promise.all(writes.splice(0));
  }
  await Promise.all(writes);
  t.log(`appended ${N} carts (${2 * N} events) in ${Math.round(performance.now() - appendStarted)} ms`);

  const heapBefore = process.memoryUsage().heapUsed;
  const started = performance.now();
  const a = timer(t, store, clock);
  await a.caughtUp;
  const ms = performance.now() - started;
  const heapAfter = process.memoryUsage().heapUsed;
  t.log(
    `restored ${a.pending()} pending abandonment timers in ${Math.round(ms)} ms ` +
      `(heap +${Math.round((heapAfter - heapBefore) / 1024 / 1024)} MB, not collected)`,
  );
  console.log(`abandonment restore: ${N} pending carts in ${Math.round(ms)} ms`);
  t.is(a.pending(), N);
  t.true(ms < 5_000, `restore took ${Math.round(ms)} ms`);
  t.is(a.dueAt(cart.streamId(randomUUID())), undefined);
  clock.set(new Date(base + SIX_HOURS + 4_999_000)); // the first 5,000 are due
  t.is(await a.tick(), 5_000);
  t.is(a.pending(), N - 5_000);
  t.is(await countAbandoned(store), 5_000);
});

test('two timers that both read the cart before either writes: the store refuses the second append', async (t) => {
  const { store, again } = await tempStore(t);
  const other = await again();
  const clock = manualClock(T0);
  const c = carts(store, clock);
  const uuid = await c.create();
  await c.add(uuid);
  // Each timer's append waits until both have decided, so both append on the same expected revision.
  let arrived = 0;
  let bothDecided: () => void = () => {};
  const barrier = new Promise<void>((r) => {
    bothDecided = r;
  });
  const withBarrier = (s: EventStore): EventStore => {
    const wrapped: EventStore = Object.create(s);
    wrapped.append = async (streamId, events, options) => {
      if (++arrived === 2) bothDecided();
      await barrier;
      return s.append(streamId, events, options);
    };
    return wrapped;
  };
  const a = timer(t, withBarrier(store), clock);
  const b = timer(t, withBarrier(other), clock);
  await Promise.all([a.caughtUp, b.caughtUp]);
  clock.advance(SIX_HOURS);
  await Promise.all([a.tick(), b.tick()]);
  t.is(arrived, 2);
  t.is((await abandonedEvents(store, uuid)).length, 1);
  t.is(a.stats().abandoned + b.stats().abandoned, 1);
  t.is(a.stats().stale + b.stats().stale, 1);
  t.is(a.stats().errors + b.stats().errors, 0);
});
