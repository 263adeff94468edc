/**
 * Traffic that rides out an engine outage, for the engine restart test: platform writers take carts
 * of a store operator's site through a pickup, step by step, while partner readers page through that
 * operator's carts.
 *
 * Every write is conditional on the cart's revision (`If-Match`, docs/write-side.md): a write answered
 * 5xx or not at all is sent again, and a repeat that finds the cart moved on by exactly that step's
 * events counts the step as done (the first try was applied and its answer lost). So no step is
 * applied twice and none is skipped, whatever the engines do, and the log must hold each cart's steps
 * exactly once.
 */
import { randomUUID } from 'node:crypto';
import type { Caller } from './cart-world.ts';

const P = '/platform/v1';
/** Pause before a write or read is tried again after a 5xx or no answer. */
const RETRY_PAUSE_MS = 250;

interface Step {
  name: string;
  method: string;
  path: (uuid: string) => string;
  body: (uuid: string) => unknown;
  /** The events the step appends, a status change as `CartStatusChanged:<to>`. */
  events: string[];
}

/** The steps of a pickup for a cart of store `storeId` on partner `partnerId`'s site. */
export function pickupSteps(storeId: number, menuProductId: number, partnerId: string): Step[] {
  const status = (to: string): Step => ({
    name: `move to ${to}`,
    method: 'POST',
    path: (uuid) => `${P}/carts/${uuid}/status`,
    body: () => ({ status: to }),
    events: [`CartStatusChanged:${to}`],
  });
  return [
    {
      name: 'create',
      method: 'POST',
      path: () => `${P}/carts`,
      body: (uuid) => ({ uuid, store_id: storeId, source: { channel: 'embedded', partner_id: partnerId } }),
      events: ['CartCreated'],
    },
    {
      name: 'add an item',
      method: 'POST',
      path: (uuid) => `${P}/carts/${uuid}/items`,
      body: () => ({ menu_product_id: menuProductId, price_id: 'gram', count: 2 }),
      events: ['CartItemAdded'],
    },
    {
      name: 'identify the customer',
      method: 'PUT',
      path: (uuid) => `${P}/carts/${uuid}/customer`,
      body: () => ({ email: 'ana@example.com', first_name: 'Ana', last_name: 'Lee' }),
      events: ['CartCustomerIdentified'],
    },
    {
      name: 'check out',
      method: 'POST',
      path: (uuid) => `${P}/carts/${uuid}/checkout`,
      body: () => ({ reservation_mode: 'pickup', reservation_start_window: '2026-03-01 10:00' }),
      events: ['CartCheckedOut', 'CartStatusChanged:verification'],
    },
    status('preparing'),
    status('ready_for_pickup'),
    status('finished'),
  ];
}

/** A cart the traffic wrote: its uuid and the revision the service answered for its last step. */
export interface WrittenCart {
  uuid: string;
  revision: number;
}

export interface CartTraffic {
  /** Steps done so far, over all carts; throws what stopped a writer, if one stopped. */
  steps(): number;
  /** Writes sent again after a 5xx or no answer. */
  retries(): number;
  /** Lets each writer finish its cart, then answers every cart written. */
  stop(): Promise<WrittenCart[]>;
  /** Each cart written so far with the revision its last acknowledged step was answered with (a copy). */
  acknowledged(): WrittenCart[];
  /** Stops the writers at once, a write under way given up (the service was killed); answers every cart written. */
  abandon(): Promise<WrittenCart[]>;
}

/** A writer's write given up by `abandon()`. */
class Abandoned extends Error {}

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * `writers` platform writers, each taking new carts through `steps` one after the other (`pauseMs`
 * between writes) until `stop()`. A write that gets no success by `deadline` (epoch ms) stops its
 * writer with an error, as does any answer but 2xx, 5xx or the 412 of a repeat described above.
 */
export function startCartTraffic(
  api: Caller,
  options: { writers: number; steps: Step[]; pauseMs: number; deadline: number },
): CartTraffic {
  const { steps, pauseMs, deadline } = options;
  const carts: WrittenCart[] = [];
  let done = 0;
  let retried = 0;
  let stopping = false;
  let abandoned = false;
  let failure: Error | undefined;

  async function write(uuid: string, step: Step, revision: number): Promise<number> {
    for (let tries = 1; ; tries++) {
      let status = 0;
      let text = '';
      try {
        const res = await api.call(step.method, step.path(uuid), step.body(uuid), {
          'if-match': `"${revision}"`,
        });
        status = res.status;
        text = await res.text();
      } catch (err) {
        text = (err as Error).message;
      }
      if (status >= 200 && status < 300) return (JSON.parse(text) as { revision: number }).revision;
      if (status === 412 && tries > 1) {
        const current = (JSON.parse(text) as { current_revision: number }).current_revision;
        if (current === revision + step.events.length) return current;
      }
      if (status !== 0 && status < 500) {
        throw new Error(`${step.name} of cart ${uuid} (If-Match ${revision}) answered ${status}: ${text}`);
      }
      if (abandoned) throw new Abandoned();
      if (Date.now() > deadline) {
        throw new Error(`${step.name} of cart ${uuid} still failing at the deadline: ${status} ${text}`);
      }
      retried += 1;
      await delay(RETRY_PAUSE_MS);
    }
  }

  async function writer(): Promise<void> {
    while (!stopping && !failure) {
      const cart: WrittenCart = { uuid: randomUUID(), revision: -1 };
      for (const step of steps) {
        cart.revision = await write(cart.uuid, step, cart.revision);
        // Counted once it is in the log: a cart is listed as soon as its creation is.
        if (step === steps[0]) carts.push(cart);
        done += 1;
        await delay(pauseMs);
      }
    }
  }

  const running = Promise.all(
    Array.from({ length: options.writers }, () =>
      writer().catch((err: unknown) => {
        if (!(err instanceof Abandoned)) failure ??= err as Error;
      }),
    ),
  );
  return {
    steps() {
      if (failure) throw failure;
      return done;
    },
    retries: () => retried,
    async stop() {
      stopping = true;
      await running;
      if (failure) throw failure;
      return carts;
    },
    acknowledged: () => carts.map((c) => ({ ...c })),
    async abandon() {
      stopping = true;
      abandoned = true;
      await running;
      if (failure) throw failure;
      return carts;
    },
  };
}

/** What the partner readers got: successful reads, and the others by status (0: no answer). */
export interface PartnerReadCounts {
  ok: number;
  failed: Record<number, number>;
}

export interface PartnerReads {
  /** Successful reads of every page that began after `since` (`Date.now()`). */
  okSince(since: number): number;
  stop(): Promise<PartnerReadCounts>;
}

/**
 * `readers` partners paging through `path` (a list answer, walked page by page with its
 * `next_cursor`) with API key `key` until `stop()`, `pauseMs` apart, each request given up after
 * `timeoutMs`. A failed read is counted, not thrown: reads fail while the read store is down.
 */
export function startPartnerReads(
  base: string,
  key: string,
  path: string,
  options: { readers: number; pauseMs: number; timeoutMs: number },
): PartnerReads {
  const counts: PartnerReadCounts = { ok: 0, failed: {} };
  const okAt: number[] = [];
  let stopping = false;

  async function walk(): Promise<number> {
    let cursor: string | null = null;
    do {
      const url = new URL(`${base}${path}`);
      if (cursor) url.searchParams.set('cursor', cursor);
      const res: Response | undefined = await fetch(url, {
        headers: { authorization: `Bearer ${key}` },
        signal: AbortSignal.timeout(options.timeoutMs),
      }).catch(() => undefined);
      if (res?.status !== 200) {
        await res?.body?.cancel();
        return res?.status ?? 0;
      }
      cursor = ((await res.json()) as { next_cursor: string | null }).next_cursor;
    } while (cursor);
    return 200;
  }

  async function reader(): Promise<void> {
    while (!stopping) {
      const began = Date.now();
      const status = await walk().catch(() => 0);
      if (status === 200) {
        counts.ok += 1;
        okAt.push(began);
      } else {
        counts.failed[status] = (counts.failed[status] ?? 0) + 1;
        await delay(RETRY_PAUSE_MS);
      }
      await delay(options.pauseMs);
    }
  }

  const running = Promise.all(Array.from({ length: options.readers }, reader));
  return {
    okSince: (since) => okAt.filter((at) => at >= since).length,
    async stop() {
      stopping = true;
      await running;
      return counts;
    },
  };
}
