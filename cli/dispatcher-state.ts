/**
 * The dispatcher's working state (`PDS_DISPATCHER_STORE`), which every dispatcher component, and each
 * delivery thread's, opens first; and the timer queues tests drive on a manual clock.
 */
import type { Logger } from 'pino';
import type { ReadStore } from '../projections/read-store.ts';
import type { SqliteReadStore } from '../projections/sqlite/read-store.ts';
import type { Component } from './compose.ts';

/** What the dispatcher's components build for each other (and find of the read side's, in role `all`). */
export interface DispatcherShared {
  readStore?: ReadStore;
  /** The dispatcher's working state (`PDS_DISPATCHER_STORE`): the read store itself, or a file of its own. */
  dispatcherStore?: ReadStore;
}

/**
 * The timer queues of the running components (abandonment, webhook retries). Tests that move an
 * injected clock call `tick()` to run what fell due, instead of waiting for real timers.
 */
export interface Timers {
  ticks: Array<() => Promise<number>>;
}

export const createTimers = (): Timers => ({ ticks: [] });

/** Runs every component's due timers; resolves with how many ran. */
export async function tickTimers(timers: Timers): Promise<number> {
  let ran = 0;
  for (const tick of timers.ticks) ran += await tick();
  return ran;
}

/** Says when a store starts empty and why (a new or replaced file): what it holds is rebuilt from the events. */
export function logOpened(
  readStore: ReadStore,
  logger: Logger,
  what: { store: 'read store' | 'dispatcher store'; holds: 'read models are' | 'its working state is' },
): void {
  if (!('opened' in readStore)) return;
  const { state, reason } = (readStore as SqliteReadStore).opened;
  if (state === 'replaced')
    logger.warn({ reason }, `${what.store} replaced: ${what.holds} rebuilt from the events`);
  else if (state === 'created')
    logger.info({ reason }, `${what.store} created: ${what.holds} built from the events`);
}

/**
 * `dispatcher.db`'s page cache, in MiB, on the dispatcher thread or process: its working set is on its
 * heap (the queues in the window, the pending carts), and the store is written at each checkpoint and
 * read along the due index when the window has room. The read store's 32 MiB filled in
 * `webhook.fanout` for no more deliveries a second (docs/operations.md, "Threads").
 */
export const DISPATCHER_STORE_CACHE_MIB = 8;

/**
 * The dispatcher's working state (pending carts, delivery queues): the read store when
 * `PDS_DISPATCHER_STORE` names it and this process has it open, else a store of its own (by default
 * `dispatcher.db` beside a SQLite read store, docs/operations.md, "Threads"), with a page cache of
 * `cacheMiB` (default `DISPATCHER_STORE_CACHE_MIB`).
 */
export function dispatcherState(shared: DispatcherShared, options: { cacheMiB?: number } = {}): Component {
  let own: ReadStore | undefined;
  return {
    name: 'dispatcher-state',
    roles: ['dispatcher'],
    async start(ctx) {
      const url = ctx.config.dispatcherStoreUrl;
      if (url === ctx.config.readStoreUrl && shared.readStore) {
        shared.dispatcherStore = shared.readStore;
        return;
      }
      const store = await ctx.openReadStore(url, {
        cacheMiB: options.cacheMiB ?? DISPATCHER_STORE_CACHE_MIB,
      });
      own = store;
      shared.dispatcherStore = store;
      // On a server (MongoDB), the dispatcher needs it reachable (docs/operations.md, "Health").
      if (store.ping) {
        ctx.readiness.add('dispatcher_store', async () => {
          await store.ping?.();
          return true;
        });
      }
      logOpened(own, ctx.logger, { store: 'dispatcher store', holds: 'its working state is' });
    },
    async stop() {
      await own?.close();
    },
  };
}
