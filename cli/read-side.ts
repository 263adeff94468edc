/**
 * The read side's component: the read store, and the projector where this process (or thread) owns
 * the read models. Role `all` runs it with the APIs, or splits it: the projector on a thread of its
 * own (`role-thread.ts`, docs/operations.md, "Threads"), which loads this module and not the APIs',
 * and the read store alone beside the APIs.
 */
import { Gauge } from 'prom-client';
import type { Clock } from '../domain/clock.ts';
import { allProjections } from '../projections/all.ts';
import { createProjector, type Projector } from '../projections/projector.ts';
import type { ReadStore } from '../projections/read-store.ts';
import type { Component, ServiceContext } from './compose.ts';
import { logOpened } from './dispatcher-components.ts';
import { holderGone, newLeaseOwner } from './lease-owner.ts';

/** What the read side builds for the components after it. */
export interface ReadSideShared {
  readStore?: ReadStore;
  projector?: Projector;
}

export interface ReadSideOptions {
  /**
   * Whether this process runs the projector. `auto`: where it owns the read models, i.e. role `all`
   * (the embedded `read.db`), every role with `memory` (each process its own copy, built from the
   * events at start), and the `projector` role (one at a time writes, the one holding the read
   * store's lease: docs/read-side.md, "One projector at a time"; `api` processes only read).
   * `false`: another thread runs it (role `all` with the projector thread).
   */
  project?: 'auto' | false;
  /** The read store's page cache, MiB (default `PDS_READ_STORE_CACHE_MIB`). */
  cacheMiB?: number;
  /** Resolves once this process may open the read store: after the projector thread opened it first. */
  openAfter?: Promise<void>;
  /**
   * Who this projector is in the read store's lease (`lease-owner.ts`): a projector thread started
   * again passes its last one's, so it takes the lease back at once. A name of its own by default.
   */
  leaseOwner?: string;
  /** Times the projections' lag (`lag_seconds`); tests inject theirs. */
  clock?: Clock;
}

const owns = (ctx: ServiceContext) =>
  ctx.config.readStoreUrl === 'memory' || ctx.role === 'all' || ctx.role === 'projector';

/**
 * `read.db`'s page cache on role `all`'s projector thread, MiB: the partner APIs read through the main
 * thread's connection (`PDS_READ_STORE_CACHE_MIB`); this one writes, and reads the documents it is
 * about to rewrite. `projection.rebuild` of 1,000,018 events took 26.3 s with 8 MiB and 26.2 s with
 * 32 (docs/operations.md, "Threads").
 */
export const PROJECTOR_THREAD_CACHE_MIB = 8;

/** Role `all`'s projector thread's read side: the projector, on a connection of its own. */
export function projectorThreadSide(shared: ReadSideShared, leaseOwner: string): Component {
  return readSide(shared, { leaseOwner, cacheMiB: PROJECTOR_THREAD_CACHE_MIB });
}

export function readSide(shared: ReadSideShared, options: ReadSideOptions = {}): Component {
  let projector: Projector | undefined;
  return {
    name: 'read-side',
    roles: ['api', 'projector'],
    async start(ctx) {
      // The thread that owns the file creates (or replaces) it; this one opens what it left.
      await options.openAfter;
      const readStore = await ctx.openReadStore(ctx.config.readStoreUrl, {
        cacheMiB: options.cacheMiB ?? ctx.config.readStoreCacheMiB,
      });
      shared.readStore = readStore;
      // A store on a server (MongoDB) can be out of reach after the start: every role that reads it
      // needs it (docs/operations.md, "Health").
      if (readStore.ping) {
        ctx.readiness.add('read_store', async () => {
          await readStore.ping?.();
          return true;
        });
      }
      if ((options.project ?? 'auto') === false || !owns(ctx)) return;
      logOpened(readStore, ctx.logger, { store: 'read store', holds: 'read models are' });
      projector = createProjector({
        store: ctx.eventStore,
        readStore,
        projections: allProjections({ deliveryLogRetentionMs: ctx.config.deliveryLogRetentionMs }),
        onError: (name, err) => ctx.logger.error({ err, projection: name }, 'projection failed'),
        ...(options.clock && { clock: options.clock }),
        logger: ctx.logger,
        supervisor: ctx.supervisor,
        lease: {
          owner: options.leaseOwner ?? newLeaseOwner(),
          ttlMs: ctx.config.projectorLeaseMs,
          holderGone,
        },
      });
      shared.projector = projector;
      registerGauges(projector, ctx);
      registerLeaseGauges(projector, ctx);
      const p = projector;
      ctx.readiness.add('projections_caught_up', projectionsReadiness(p));
      await projector.start();
      // Not awaited: the process serves /healthz while the read models catch up; /readyz says when.
      const started = Date.now();
      p.caughtUp.then(() => {
        ctx.logger.info({ ms: Date.now() - started, projections: p.names() }, 'read models caught up');
      });
    },
    async stop() {
      try {
        await projector?.stop();
      } finally {
        // Closed even when the projector could not save its progress (the read store out of reach).
        await shared.readStore?.close();
      }
    },
  };
}

/**
 * `projections_caught_up` in `/readyz`. The holder of the lease is ready once every projection has
 * caught up since it took the lease (again: after losing it and taking it back, its projections catch
 * up from their checkpoints first). A projector standing by for another is ready, as `standby`: it is
 * what a rolling deploy starts before it stops the holder
 * (docs/read-side.md, "One projector at a time"). One that stands by for no one (the store did not
 * answer) is not.
 */
export function projectionsReadiness(projector: Pick<Projector, 'lease' | 'isCaughtUp'>) {
  return (): boolean | 'standby' => {
    const lease = projector.lease();
    return lease.holding ? projector.isCaughtUp() : lease.holder !== null && 'standby';
  };
}

/**
 * One `status()` for all the calls made while it runs. The registry collects its gauges together, and
 * each status asks the log for every projection's lag: four gauges made that four per scrape
 * (docs/operations.md, "Projections").
 */
function sharedStatus(projector: Pick<Projector, 'status'>): Projector['status'] {
  let running: ReturnType<Projector['status']> | undefined;
  return () => {
    running ??= projector.status().finally(() => {
      running = undefined;
    });
    return running;
  };
}

/** Each projection's checkpoint, lag and rebuild progress, read from the projector at every scrape. */
export function registerGauges(
  projector: Pick<Projector, 'status'>,
  ctx: Pick<ServiceContext, 'registry'>,
): void {
  const status = sharedStatus(projector);
  const gauge = (
    name: string,
    help: string,
    pick: (s: Awaited<ReturnType<Projector['status']>>[number]) => number,
  ) =>
    new Gauge({
      name,
      help,
      labelNames: ['projection'],
      registers: [ctx.registry],
      async collect() {
        for (const s of await status()) this.set({ projection: s.name }, pick(s));
      },
    });
  gauge('pds_projection_checkpoint', 'global position of the last event applied', (s) => s.checkpoint);
  gauge('pds_projection_lag_events', 'events after the checkpoint not yet applied', (s) => s.lag_events);
  gauge('pds_projection_lag_seconds', 'age of the oldest event not yet applied', (s) => s.lag_seconds);
  gauge('pds_projection_rebuild_percent', 'progress of a running rebuild (0 when none)', (s) =>
    s.state === 'rebuilding' ? (s.progress?.percent ?? 0) : 0,
  );
  gauge(
    'pds_projection_failed',
    'whether a projection is failed (1) and retrying; why is its error in GET /admin/v1/projections',
    (s) => (s.state === 'failed' ? 1 : 0),
  );
  gauge(
    'pds_projection_rebuild_failed',
    'whether the last rebuild of a projection failed (1) and none succeeded since; why is its rebuild_failure in GET /admin/v1/projections',
    (s) => (s.rebuild_failure ? 1 : 0),
  );
}

/** Whether this projector holds the read store's lease (and with which token) or stands by. */
export function registerLeaseGauges(
  projector: Pick<Projector, 'lease'>,
  ctx: Pick<ServiceContext, 'registry'>,
): void {
  new Gauge({
    name: 'pds_projector_lease_held',
    help: 'whether this projector holds the read store lease and projects (1), or stands by (0)',
    registers: [ctx.registry],
    collect() {
      this.set(projector.lease().holding ? 1 : 0);
    },
  });
  new Gauge({
    name: 'pds_projector_lease_token',
    help: 'the fencing token of the lease this projector holds (0 while it stands by); each take-over raises it',
    registers: [ctx.registry],
    collect() {
      this.set(projector.lease().token ?? 0);
    },
  });
}
