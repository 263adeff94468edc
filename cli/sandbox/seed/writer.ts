/**
 * How the sandbox seeder writes: records go through a record sink a chunk at a time, their events are
 * counted, progress is reported, and the event loop gets a turn now and then. The steps that decide
 * each kind of record (catalog, partners, carts) write through one `SeedWriter`.
 */
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import type { CommandMetadata } from '../../../application/command-handler.ts';
import type { Decider, DomainEvent } from '../../../domain/decider.ts';
import type { Actor } from '../../../eventstore/port.ts';
import type { RecordSink } from '../record-sink.ts';
import type { SeedOptions } from './types.ts';

export const PLATFORM: Actor = { type: 'platform', id: 'platform' };
export const OPERATOR: Actor = { type: 'operator', id: 'operator' };

/** Records whose appends are in flight together (see `SeedWriter.each`). */
const SEED_CHUNK = 250;

/** One seeding's writes: the sink, the counts so far and the progress report. */
export class SeedWriter {
  readonly sink: RecordSink;
  /** Events written by this run. */
  events = 0;
  /** Carts found already there (a resumed or concurrent seeding), skipped as a whole. */
  cartsSkipped = 0;
  /** What is being written now, as the progress report names it. */
  phase = 'stores';
  private readonly runId: string;
  private readonly total: number;
  private readonly signal: AbortSignal | undefined;
  private readonly onProgress: SeedOptions['onProgress'];
  private done = 0;
  private reported = '';
  private lastYield = performance.now();

  constructor(
    sink: RecordSink,
    runId: string,
    total: number,
    options: Pick<SeedOptions, 'signal' | 'onProgress'>,
  ) {
    this.sink = sink;
    this.runId = runId;
    this.total = total;
    this.signal = options.signal;
    this.onProgress = options.onProgress;
  }

  /** A command's metadata: by default the platform's, in the seeding's own correlation. */
  meta(at: string, actor: Actor = PLATFORM, correlationId = this.runId): CommandMetadata {
    return { correlationId, causationId: null, actor, at };
  }

  /** Decides a command through the sink and counts the events it decided. */
  async run<C, E extends DomainEvent, S>(
    streamId: string,
    decider: Decider<C, E, S>,
    command: C,
    metadata: CommandMetadata,
  ) {
    const result = await this.sink.run(streamId, decider, command, metadata);
    this.events += result.events.length;
    return result;
  }

  /**
   * Writes records a chunk at a time: the records of a chunk are decided one by one, and their appends
   * are in flight together, so the embedded store commits them in one transaction (its group commit)
   * and each follower wakes once per chunk rather than once per record. The results come back in the
   * records' order.
   */
  async each<T, R>(items: readonly T[], write: (item: T, index: number) => Promise<R>): Promise<R[]> {
    const results: R[] = [];
    for (let i = 0; i < items.length; i += SEED_CHUNK) {
      this.signal?.throwIfAborted();
      const chunk = items.slice(i, i + SEED_CHUNK);
      results.push(...(await Promise.all(chunk.map((item, j) => write(item, i + j)))));
      await this.step(chunk.length);
    }
    return results;
  }

  /** After each chunk: progress (at each new phase, then now and then), a chance to stop, a pause. */
  async step(records: number): Promise<void> {
    this.done += records;
    this.signal?.throwIfAborted();
    const now = performance.now();
    if (this.phase !== this.reported) {
      this.reported = this.phase;
      this.report();
    }
    // Appends to the embedded store never wait for I/O: without a pause, a seeding process would
    // answer no HTTP request and deliver no subscription until the end.
    if (now - this.lastYield > 20) {
      this.lastYield = now;
      this.report();
      await yieldToLoop();
    }
  }

  private report(): void {
    this.onProgress?.({ phase: this.phase, done: this.done, total: this.total });
  }

  /** Reports the seeding written through. */
  finish(): void {
    this.onProgress?.({ phase: 'done', done: this.total, total: this.total });
  }
}
