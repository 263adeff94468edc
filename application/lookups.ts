/**
 * The facts a command looks up in other streams (a cart line's menu product, product and brand; the
 * cart's store), kept folded so that a command does not read and fold each of those streams again
 * (docs/write-side.md, "Lookups"). A cart takes a command per item, and each read the same few streams.
 *
 * A bounded cache (least recently used out) of stream states, kept true by a follower of the cached
 * streams' prefixes from the log's head at start (the cache starts empty, so nothing older matters):
 * an event of a cached stream drops its entry. A state read while its stream changed is not kept (the
 * follower's note of the change is later than the read). While the follower is down nothing is kept,
 * and what was kept is dropped. A write of this process drops its entry at once (`written`), so a
 * command after a catalog write's answer sees it; another process's write is seen once the follower
 * has applied it, as with the store specials.
 */
import { LRUCache } from 'lru-cache';
import type { Decider, DomainEvent } from '../domain/decider.ts';
import type { EventRegistry } from '../domain/events.ts';
import type { EventStore } from '../eventstore/port.ts';
import { createFollower } from './follower.ts';
import { readState } from './read-state.ts';
import type { Supervisor } from './supervisor.ts';

/** States kept; a catalog's hot streams fit many times over. */
const MAX_STATES = 20_000;
/** Changes remembered for reads in flight. */
const MAX_CHANGES = 10_000;

export interface LookupsOptions {
  store: EventStore;
  registry: EventRegistry;
  /** The stream prefixes cached, e.g. `menuproduct-`. */
  prefixes: readonly string[];
  supervisor?: Supervisor;
  /** Told when the follower's subscription drops (it is opened again after a pause). */
  onDrop?(error: unknown): void;
  maxStates?: number;
  maxChanges?: number;
}

interface Kept {
  decider: unknown;
  state: unknown;
}

export class Lookups {
  readonly #options: LookupsOptions;
  readonly #states: LRUCache<string, Kept>;
  /** The position of the last change of each stream seen lately; the oldest is forgotten first. */
  readonly #changes: LRUCache<string, number>;
  /** Changes up to this position may have been forgotten. */
  #forgottenUpTo = 0;
  #live = false;
  readonly #follower;

  constructor(options: LookupsOptions) {
    this.#options = options;
    this.#states = new LRUCache({ max: options.maxStates ?? MAX_STATES });
    this.#changes = new LRUCache({
      max: options.maxChanges ?? MAX_CHANGES,
      dispose: (at, _streamId, reason) => {
        if (reason === 'evict') this.#forgottenUpTo = Math.max(this.#forgottenUpTo, at);
      },
    });
    this.#follower = createFollower({
      name: 'lookups',
      store: options.store,
      filter: { streamPrefixes: [...options.prefixes] },
      supervisor: options.supervisor,
      apply: (events) => {
        for (const e of events) this.#changed(e.streamId, e.position);
      },
      onDrop: (error) => {
        this.#live = false;
        this.#states.clear();
        options.onDrop?.(error);
      },
      onCaughtUp: () => {
        this.#live = true;
      },
    });
  }

  /** Follows the log from its head now. */
  async start(): Promise<void> {
    this.#follower.start(await this.#options.store.headPosition());
    await this.#follower.caughtUp;
  }

  stop(): Promise<void> {
    return this.#follower.stop();
  }

  /** The stream's state now, from the cache or read (and kept when that is safe). */
  async load<S, E extends DomainEvent>(
    streamId: string,
    decider: Pick<Decider<unknown, E, S>, 'initialState' | 'evolve'>,
  ): Promise<S> {
    const hit = this.#states.get(streamId);
    if (hit && hit.decider === decider) return hit.state as S;
    const readFrom = this.#follower.position();
    const loaded = await readState(this.#options.store, this.#options.registry, streamId, decider);
    const changedAt = this.#changes.peek(streamId);
    const fresh =
      this.#live &&
      readFrom >= this.#forgottenUpTo &&
      (changedAt === undefined || changedAt <= loaded.position);
    if (fresh && this.#cached(streamId)) {
      this.#states.set(streamId, { decider, state: loaded.state });
    }
    return loaded.state;
  }

  /**
   * This process wrote `streamId` at `position`: its kept state is dropped now. A write of a stream
   * that is never kept (a cart's) is not remembered: it would only push the catalog's changes out.
   */
  written(streamId: string, position: number): void {
    if (this.#cached(streamId)) this.#changed(streamId, position);
  }

  #cached(streamId: string): boolean {
    return this.#options.prefixes.some((p) => streamId.startsWith(p));
  }

  #changed(streamId: string, position: number): void {
    this.#states.delete(streamId);
    // Set again, the stream's change becomes the most recent (an evicted one moves `#forgottenUpTo`).
    this.#changes.set(streamId, Math.max(position, this.#changes.peek(streamId) ?? 0));
  }
}
