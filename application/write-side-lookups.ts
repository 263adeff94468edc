/**
 * The platform API's lookups and store specials (docs/write-side.md, "Lookups"), built in the
 * background (docs/operations.md, "Health"): the lookups' follower starts at the log's head, which is
 * read again after a pause while the event store does not answer, and the specials' follower catches
 * up, resubscribing by itself. Built once, they stay built; a follower that drops later only makes
 * them staler. `settled` lets a process's start wait for them while the store answers, and go on
 * without them at the first setback: an `api` replica starting during an EventStoreDB outage serves
 * partner reads meanwhile.
 */
import type { EventRegistry } from '../domain/events.ts';
import type { EventStore } from '../eventstore/port.ts';
import { Lookups } from './lookups.ts';
import { createStoreSpecials, type StoreSpecials } from './store-specials.ts';
import { Supervisor } from './supervisor.ts';

export interface WriteSideLookupsOptions {
  store: EventStore;
  registry: EventRegistry;
  /** The stream prefixes the lookups keep, e.g. `menuproduct-`. */
  prefixes: readonly string[];
  /** Paces the tries and the followers' resubscriptions, and reports their health. */
  supervisor?: Supervisor;
  /** Told of each failure on the way: the log's head not read, or a follower's subscription dropped. */
  onSetback?(error: unknown): void;
}

export interface WriteSideLookups {
  readonly lookups: Lookups;
  readonly specials: StoreSpecials;
  /** Whether both have caught up once. */
  built(): boolean;
  /** Resolves once built, or at the first setback, whichever comes first. */
  readonly settled: Promise<'built' | 'setback'>;
  /** Resolves once built; rejects when stopped first. */
  readonly whenBuilt: Promise<void>;
  stop(): Promise<void>;
}

export function buildWriteSideLookups(options: WriteSideLookupsOptions): WriteSideLookups {
  const { store, registry, prefixes } = options;
  const supervisor = options.supervisor ?? new Supervisor();
  const setback = Promise.withResolvers<'setback'>();
  const onSetback = (error: unknown) => {
    setback.resolve('setback');
    options.onSetback?.(error);
  };
  const specials = createStoreSpecials(store, registry, supervisor, onSetback);
  const lookups = new Lookups({ store, registry, prefixes, supervisor, onDrop: onSetback });
  let built = false;
  let stopped = false;
  let retry: NodeJS.Timeout | undefined;
  let retried: (() => void) | undefined;

  /** Starts the lookups' follower at the head, asking again after a growing pause while the store does not answer. */
  async function startLookups(): Promise<void> {
    for (let failures = 0; !stopped; failures++) {
      try {
        await lookups.start();
        return;
      } catch (err) {
        if (stopped) return;
        onSetback(err);
        await new Promise<void>((resolve) => {
          retried = resolve;
          retry = setTimeout(resolve, supervisor.delay(failures));
        });
      }
    }
  }

  const whenBuilt = Promise.all([startLookups(), specials.caughtUp]).then(() => {
    if (stopped) throw new Error('the write side lookups stopped before they were built');
    built = true;
  });
  whenBuilt.catch(() => {});

  return {
    lookups,
    specials,
    built: () => built,
    settled: Promise.race([whenBuilt.then(() => 'built' as const), setback.promise]),
    whenBuilt,
    async stop() {
      stopped = true;
      clearTimeout(retry);
      retried?.();
      await lookups.stop();
      await specials.stop();
    },
  };
}
