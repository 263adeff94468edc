/**
 * Catch-up subscriptions of the EventStoreDB adapter, on the client's `subscribeToAll`: events in
 * batches with back-pressure, the server's checkpoints told as progress, and the caught-up signal once
 * everything sent before it was handed over.
 *
 * The server's checkpoints say how far its filter has read past events it did not send: every 32
 * events it considers, and when it reaches the end. They are told to `onProgress` after the events the
 * server sent before them, so a follower of rarely written streams moves on with the log instead of
 * staying at its last event (docs/read-side.md, "Progress past other streams' events"). A live
 * checkpoint is an event's own position. A catch-up one names the record the server reads next, which
 * is no event's position (a subscription resumed there would start between two records): the last
 * record before it is looked up instead, for the last catch-up checkpoint before the caught-up signal
 * and at most once a second before it.
 */
import type { AllStreamResolvedEvent, EventStoreDBClient, Position } from '@eventstore/db-client';
import {
  type CatchUpHandlers,
  type CatchUpSubscription,
  type CatchUpSubscriptionOptions,
  EventStoreError,
  EventStoreUnavailableError,
  type RecordedEvent,
} from '../port.ts';
import { DEFAULT_BATCH_SIZE, handlerScope, type Running, settleable } from './client.ts';
import { mapError } from './errors.ts';
import {
  checkpointPosition,
  isBeyond,
  isNextRecordBound,
  positionOf,
  readPositionOf,
  serverFilter,
  toRecorded,
  visible,
} from './translate.ts';

/**
 * What the subscription hands its handlers, in the order the server sent it: an event, or a checkpoint
 * (the server considered the log through `progress`). Every item the stream hands over gets a sequence
 * number; a checkpoint carries that of the last item sent before it.
 */
type Item = { seq: number; event: RecordedEvent; progress?: undefined } | { seq: number; progress: number };
type Subscription = ReturnType<EventStoreDBClient['subscribeToAll']>;
/** The port position of the last record before a position (`read-all.ts`). */
type RecordBefore = (bound: Position) => Promise<number | undefined>;

/** Shortest time between two look-ups of a catch-up checkpoint's record while catching up. */
const RESOLVE_EVERY_MS = 1_000;

export function createCatchUp(client: EventStoreDBClient, running: Running, recordBefore: RecordBefore) {
  return {
    subscribeToAll(options: CatchUpSubscriptionOptions, handlers: CatchUpHandlers): CatchUpSubscription {
      const catchUp = new CatchUp(options, handlers, running, recordBefore);
      catchUp.attach(
        client.subscribeToAll({
          fromPosition: readPositionOf(options.from ?? 'start'),
          filter: serverFilter(options.filter, (_sub, position) => catchUp.checkpoint(position)),
        }),
      );
      return catchUp;
    },
  };
}

class CatchUp implements CatchUpSubscription {
  readonly #options: CatchUpSubscriptionOptions;
  readonly #handlers: CatchUpHandlers;
  readonly #running: Running;
  readonly #recordBefore: RecordBefore;
  readonly #maxBatch: number;
  /** Events at or before it are dropped: a position start is inclusive on the server. */
  readonly #after: Position | undefined;
  readonly #caughtUp = settleable();
  readonly #done = settleable();
  /** Lets `stop()` called from inside a handler skip waiting for that very handler. */
  readonly #scope = {};
  readonly #entry = { stop: () => this.stop() };
  #sub!: Subscription;
  #received = 0;
  /** Items delivered (their handler call resolved) or dropped by the filters here. */
  #settled = 0;
  /** Items that must be settled before caught up: those the server sent before its caught-up signal. */
  #caughtUpAt: number | undefined;
  #isCaughtUp = false;
  readonly #queue: Item[] = [];
  /** Checkpoints waiting for the events sent before them (see `checkpoint`). */
  readonly #early: Array<{ seq: number; progress: number }> = [];
  /** The last catch-up checkpoint not looked up yet, and when the last look-up started. */
  #catchUpBound: { seq: number; position: Position } | undefined;
  #lookedUpAt = Number.NEGATIVE_INFINITY;
  /** Look-ups under way: caught up waits for them, so it comes with the progress they find. */
  #lookingUp = 0;
  #pumping: Promise<void> | undefined;
  #lastPosition: number | undefined;
  /** The furthest position told: the last event handed over, or checkpoint. */
  #told: number;
  #stopped = false;

  constructor(
    options: CatchUpSubscriptionOptions,
    handlers: CatchUpHandlers,
    running: Running,
    recordBefore: RecordBefore,
  ) {
    this.#options = options;
    this.#handlers = handlers;
    this.#running = running;
    this.#recordBefore = recordBefore;
    this.#maxBatch = Math.max(1, options.maxBatchSize ?? DEFAULT_BATCH_SIZE);
    const from = options.from ?? 'start';
    this.#after = typeof from === 'object' ? positionOf(from.after) : undefined;
    this.#told = typeof from === 'object' ? from.after : 0;
    running.add(this.#entry);
  }

  get caughtUp(): Promise<void> {
    return this.#caughtUp.promise;
  }

  get done(): Promise<void> {
    return this.#done.promise;
  }

  lastPosition(): number | undefined {
    return this.#lastPosition;
  }

  attach(sub: Subscription): void {
    this.#sub = sub;
    sub.on('data', (resolved: AllStreamResolvedEvent) => this.#receive(resolved));
    sub.on('caughtUp', () => {
      // Events the server sent before the signal were handed over or still sit in the stream buffer.
      this.#caughtUpAt ??= this.#received + sub.readableLength;
      this.#lookUp();
      this.#checkCaughtUp();
    });
    sub.on('error', (err) => this.#fail(mapError(err)));
    sub.on('close', () =>
      this.#fail(new EventStoreUnavailableError('the $all subscription was closed by the server')),
    );
  }

  /**
   * A server checkpoint, for a handler that takes progress. The client calls this as it reads the
   * server's reply, possibly before the events the server sent ahead of it have left the stream's
   * buffer: it is queued behind them, as the caught-up signal is counted.
   */
  checkpoint(position: Position): void {
    if (this.#stopped || !this.#handlers.onProgress) return;
    const seq = this.#received + this.#sub.readableLength;
    const at = checkpointPosition(position);
    if (at !== undefined) {
      this.#early.push({ seq, progress: at });
      this.#release();
    } else if (isNextRecordBound(position)) {
      this.#catchUpBound = { seq, position };
      if (performance.now() - this.#lookedUpAt >= RESOLVE_EVERY_MS) this.#lookUp();
    }
  }

  /**
   * Looks up the record before the last catch-up checkpoint, and tells its position as progress once
   * the events sent before the checkpoint are in. A look-up that fails tells nothing: the next one, or
   * a live checkpoint, will.
   */
  #lookUp(): void {
    const bound = this.#catchUpBound;
    if (!bound) return;
    this.#catchUpBound = undefined;
    this.#lookedUpAt = performance.now();
    this.#lookingUp += 1;
    this.#recordBefore(bound.position)
      .then(
        (at) => {
          if (at === undefined || this.#stopped) return;
          this.#early.push({ seq: bound.seq, progress: at });
          this.#early.sort((a, b) => a.seq - b.seq);
          this.#release();
        },
        () => undefined,
      )
      .finally(() => {
        this.#lookingUp -= 1;
        this.#checkCaughtUp();
      });
  }

  async stop(): Promise<void> {
    const current = this.#pumping;
    if (!this.#stopped) this.#end();
    if (current && handlerScope.getStore() !== this.#scope) await current;
  }

  #receive(resolved: AllStreamResolvedEvent): void {
    if (this.#stopped) return;
    const seq = ++this.#received;
    const event = resolved.event;
    try {
      if (
        event &&
        (!this.#after || isBeyond(event.position, this.#after, true)) &&
        visible(event, this.#options.filter)
      ) {
        this.#enqueue({ seq, event: toRecorded(event) });
      } else if (this.#queue.length === 0 && !this.#pumping) {
        this.#settled = seq;
        this.#checkCaughtUp();
      }
      this.#release();
    } catch (err) {
      this.#fail(mapError(err));
    }
  }

  /** Queues the checkpoints whose preceding events have all been received. */
  #release(): void {
    while (this.#early.length > 0 && this.#early[0].seq <= this.#received) {
      this.#enqueue(this.#early.shift() as Item);
    }
  }

  #enqueue(item: Item): void {
    this.#queue.push(item);
    // Not settled until handed over (a checkpoint looked up late may come after the signal).
    this.#settled = Math.min(this.#settled, item.seq - 1);
    // Back-pressure: hold the stream once a full batch waits for the handler.
    if (this.#queue.length >= this.#maxBatch) this.#sub.pause();
    this.#pumping ??= this.#pump();
  }

  async #pump(): Promise<void> {
    // Yield once so `#pumping` is set before anything below can clear it.
    await Promise.resolve();
    try {
      // The loop test and the `finally` run in one turn: an item queued meanwhile is never stranded.
      while (this.#queue.length > 0 && !this.#stopped) {
        await this.#deliver();
        if (this.#stopped) return;
        // A checkpoint at the head still counts as pending: caught up waits for the last one before it.
        this.#settled = this.#queue.length > 0 ? this.#queue[0].seq - 1 : this.#received;
        this.#checkCaughtUp();
      }
    } catch (err) {
      // A handler error ends the subscription with that very error.
      this.#fail(err instanceof Error ? err : new Error(String(err)));
    } finally {
      this.#pumping = undefined;
    }
  }

  /** Hands over the queue's head: a batch of the events before the next checkpoint, or that checkpoint. */
  async #deliver(): Promise<void> {
    const queue = this.#queue;
    const head = queue[0];
    if (head.progress !== undefined) {
      queue.shift();
      if (this.#sub.isPaused()) this.#sub.resume();
      if (head.progress <= this.#told) return;
      this.#told = head.progress;
      await handlerScope.run(this.#scope, () => this.#handlers.onProgress?.(head.progress));
      return;
    }
    let n = 1;
    while (n < queue.length && n < this.#maxBatch && queue[n].progress === undefined) n += 1;
    const batch = queue.splice(0, n) as Array<Extract<Item, { event: RecordedEvent }>>;
    if (this.#sub.isPaused()) this.#sub.resume();
    await handlerScope.run(this.#scope, () => this.#handlers.onEvents(batch.map((b) => b.event)));
    if (this.#stopped) return;
    this.#lastPosition = batch[batch.length - 1].event.position;
    this.#told = Math.max(this.#told, this.#lastPosition);
  }

  #checkCaughtUp(): void {
    if (this.#isCaughtUp || this.#stopped || this.#caughtUpAt === undefined || this.#lookingUp > 0) return;
    if (this.#settled < this.#caughtUpAt) return;
    this.#isCaughtUp = true;
    try {
      this.#handlers.onCaughtUp?.();
    } catch (err) {
      this.#fail(err instanceof Error ? err : new Error(String(err)));
      return;
    }
    this.#caughtUp.resolve();
  }

  #end(err?: Error): void {
    this.#stopped = true;
    this.#running.delete(this.#entry);
    this.#queue.length = 0;
    this.#early.length = 0;
    this.#catchUpBound = undefined;
    void this.#sub.unsubscribe().catch(() => {});
    this.#caughtUp.reject(err ?? new EventStoreError('the subscription stopped before it caught up'));
    if (err) this.#done.reject(err);
    else this.#done.resolve();
  }

  #fail(err: Error): void {
    if (!this.#stopped) this.#end(err);
  }
}
