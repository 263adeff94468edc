/**
 * The replies an EventStoreDB server sends on the Read call, as gRPC messages (the client's generated
 * classes), and a client whose Read calls they answer: everything above the wire is the client's own
 * code (its `subscribeToAll`, its `Subscription` stream) and the adapter's.
 */
import { PassThrough } from 'node:stream';
import { EventStoreDBClient } from '@eventstore/db-client';
import type persistentPb from '@eventstore/db-client/generated/persistent_pb.js';
import sharedPb from '@eventstore/db-client/generated/shared_pb.js';
import streamsPb from '@eventstore/db-client/generated/streams_pb.js';
import type { EventFilter, RecordedEvent } from '../../eventstore/port.ts';

const { ReadResp } = streamsPb;
export type Reply = InstanceType<typeof ReadResp>;
export type ReadRequest = InstanceType<typeof streamsPb.ReadReq>;

/** The server's `created` counts 100 ns ticks since the Unix epoch. */
const TICKS_PER_MS = 10_000n;

/** The fields of a recorded event as the server fills them. */
export interface RecordFields {
  id: string;
  streamId: string;
  revision: number | bigint;
  /** Commit and prepare, as 23.10+ servers send them for a self-committing event; absent when unknown. */
  position?: number | bigint;
  type: string;
  /** The data's bytes, as text. */
  data: string;
  customMetadata?: string;
  contentType?: string;
  /** 100 ns ticks since the Unix epoch. */
  created: bigint;
}

/** Fills a gRPC RecordedEvent (of the persistent or the streams service) as the server does. */
export function fillRecord<R extends InstanceType<typeof persistentPb.ReadResp.ReadEvent.RecordedEvent>>(
  record: R,
  f: RecordFields,
): R {
  const id = new sharedPb.UUID();
  id.setString(f.id);
  const stream = new sharedPb.StreamIdentifier();
  stream.setStreamName(Buffer.from(f.streamId));
  record.setId(id);
  record.setStreamIdentifier(stream);
  record.setStreamRevision(String(f.revision));
  if (f.position !== undefined) {
    record.setCommitPosition(String(f.position));
    record.setPreparePosition(String(f.position));
  }
  const metadata = record.getMetadataMap();
  metadata.set('type', f.type);
  metadata.set('content-type', f.contentType ?? 'application/json');
  metadata.set('created', String(f.created));
  record.setData(Buffer.from(f.data));
  record.setCustomMetadata(Buffer.from(f.customMetadata ?? '{}'));
  return record;
}

/** An event as a 23.10+ server sends it: self-committing, commit and prepare both its log position. */
export function eventReply(
  event: Pick<RecordedEvent, 'id' | 'streamId' | 'type' | 'revision' | 'position'> &
    Partial<Pick<RecordedEvent, 'data' | 'metadata' | 'recordedAt'>>,
): Reply {
  const record = fillRecord(new ReadResp.ReadEvent.RecordedEvent(), {
    ...event,
    data: JSON.stringify(event.data ?? {}),
    customMetadata: JSON.stringify(event.metadata ?? {}),
    created: BigInt(Date.parse(event.recordedAt ?? '2026-01-01T00:00:00Z')) * TICKS_PER_MS,
  });
  const read = new ReadResp.ReadEvent();
  read.setEvent(record);
  read.setCommitPosition(String(event.position));
  return new ReadResp().setEvent(read);
}

/** A checkpoint: live ones at an event's own position, catch-up ones at (the next record, 0). */
export function checkpointReply(commit: bigint | number, prepare: bigint | number): Reply {
  const c = new ReadResp.Checkpoint();
  c.setCommitPosition(String(commit));
  c.setPreparePosition(String(prepare));
  return new ReadResp().setCheckpoint(c);
}

export const caughtUpReply = (): Reply => new ReadResp().setCaughtUp(new ReadResp.CaughtUp());
export const confirmationReply = (): Reply =>
  new ReadResp().setConfirmation(new ReadResp.SubscriptionConfirmation().setSubscriptionId('s'));

/** A Read call's reply stream, as the client's gRPC stub returns it; `cancel` is the client's unsubscribe. */
export class Replies extends PassThrough {
  readonly #onCancel: () => void;
  constructor(onCancel: () => void = () => {}) {
    super({ objectMode: true });
    this.#onCancel = onCancel;
  }
  cancel(): void {
    this.#onCancel();
    this.destroy();
  }
  /** Writes a reply, waiting while the client holds the stream back. */
  async send(reply: Reply): Promise<void> {
    if (this.destroyed) return;
    if (!this.write(reply)) {
      await new Promise<void>((resolve) => {
        const done = () => {
          this.off('close', done);
          this.off('drain', done);
          resolve();
        };
        this.once('drain', done);
        this.once('close', done);
      });
    }
  }
}

/** The replies to a read that is not a subscription: `replies`, then the end of the call. */
export function answered(replies: Reply[]): Replies {
  const stream = new Replies();
  for (const reply of replies) stream.write(reply);
  stream.end();
  return stream;
}

/** Where a read asks to start: its (commit, prepare) position, or `start` / `end`. */
export function readStart(request: ReadRequest): { commit: bigint; prepare: bigint } | 'start' | 'end' {
  const all = request.getOptions()?.getAll();
  if (all?.hasEnd()) return 'end';
  const position = all?.getPosition();
  if (!position) return 'start';
  return { commit: BigInt(position.getCommitPosition()), prepare: BigInt(position.getPreparePosition()) };
}

/** The port filter and the predicate of a read's filter, as the adapter sends them. */
export function filterOf(request: ReadRequest): { port?: EventFilter; matches(e: RecordedEvent): boolean } {
  const f = request.getOptions()?.getFilter();
  const system = (e: RecordedEvent) => e.streamId.startsWith('$') || e.type.startsWith('$');
  const byStream = f?.getStreamIdentifier();
  if (byStream) {
    const prefixes = byStream.getPrefixList();
    if (prefixes.length === 0) return { port: { streamPrefixes: [] }, matches: () => false };
    return {
      port: { streamPrefixes: prefixes },
      matches: (e) => !system(e) && prefixes.some((p) => e.streamId.startsWith(p)),
    };
  }
  const regex = f?.getEventType()?.getRegex() ?? '^[^$].*';
  const names = /^\^\(\?:(.*)\)\$$/.exec(regex);
  const pattern = new RegExp(regex);
  const matches = (e: RecordedEvent) => !system(e) && pattern.test(e.type);
  if (names) {
    const types = names[1].split('|').map((t) => t.replace(/\\(.)/g, '$1'));
    return { port: { eventTypes: types }, matches };
  }
  if (regex === '^[^$].*') return { matches };
  return { port: { streamPrefixes: [] }, matches };
}

interface Internals {
  GRPCStreamCreator(
    service: unknown,
    name: string,
    creator: (grpc: { read(request: ReadRequest): Replies }) => Replies,
  ): () => Promise<Replies>;
}

/** A client whose Read calls `answer` serves: everything else is the client's own code. */
export function clientAnswering(answer: (request: ReadRequest) => Replies): EventStoreDBClient {
  const client = EventStoreDBClient.connectionString('esdb://127.0.0.1:1?tls=false');
  (client as unknown as Internals).GRPCStreamCreator = (_service, _name, creator) => async () =>
    creator({ read: answer });
  return client;
}
