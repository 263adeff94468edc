/**
 * Delivery shards (docs/webhooks.md, "Scale"): the delivery queues are split among several delivery
 * workers by subscription. A queue `webhookdelivery-<webhook_id>_<cart_uuid>` belongs to shard
 * `fnv1a(webhook_id) mod count`, so all of a subscription's queues, hence all of a cart's deliveries to
 * it and its request slots, are one worker's; the expected revision on `AttemptStarted` still makes one
 * worker the sender of an attempt whatever the split.
 *
 * Each shard's worker keeps its working set in the one shared collection of queue documents, under a
 * checkpoint and a guard document of its own. The layout (how many shards) is kept there too, so that a
 * start with another count (`PDS_WEBHOOK_DELIVERY_THREADS` changed across a restart) takes the previous
 * layout over: each new shard resumes from the lowest checkpoint of the previous layout and restores
 * the documents whose subscription now hashes to it. No pending queue is lost (every document is some
 * new shard's), and the events between the old checkpoints are applied again at most, which the
 * worker skips where its documents reflect them already.
 */
import type { Logger } from 'pino';
import { GUARD } from '../application/durable-follower.ts';
import type { Clock } from '../domain/clock.ts';
import { parseStreamId } from '../domain/webhook-delivery/vocabulary.ts';
import type { NamedCheckpoint, ReadStore, WriteOp } from '../projections/read-store.ts';

/** One worker's part of the delivery queues: shard `index` of `count`. */
export interface Shard {
  index: number;
  count: number;
}

/** FNV-1a, 32 bits, over the UTF-16 code units: stable across processes, versions and machines. */
export function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash;
}

/** The shard of a subscription's queues among `count`. */
export const shardOf = (webhookId: string, count: number): number => fnv1a(webhookId) % count;

/** Whether a delivery queue's stream is the shard's (any other stream is not). */
export function ownsStream(shard: Shard): (stream: string) => boolean {
  if (shard.count === 1) return (stream) => parseStreamId(stream) !== null;
  return (stream) => {
    const parsed = parseStreamId(stream);
    return parsed !== null && shardOf(parsed.webhook_id, shard.count) === shard.index;
  };
}

/**
 * A shard's checkpoint and guard document. A single shard keeps the names of the unsharded worker, so
 * one delivery worker is exactly the layout it always was.
 */
export function shardCheckpoint(base: string, shard: Shard): { name: string; guard: string } {
  if (shard.count === 1) return { name: base, guard: GUARD };
  const part = `${shard.index + 1}-of-${shard.count}`;
  return { name: `${base}/${part}`, guard: `${GUARD}/${part}` };
}

/** `_id` of the layout document: how many shards the working set is split into (absent: one). */
export const LAYOUT = '$layout';

export interface LayoutOptions {
  readStore: ReadStore;
  /** The shared collection of queue documents, and the checkpoints' base name. */
  collection: string;
  name: string;
  /** The documents' shape (a checkpoint of another is not resumed from, see durable-follower.ts). */
  version: string;
  count: number;
  clock: Clock;
  logger?: Logger;
}

/** A fenced guard's position: past any checkpoint, so that every commit through it is refused. */
export const FENCED = Number.MAX_SAFE_INTEGER;

/** The guard document `_id` set to `position`, whatever it was. */
const guardAt = (id: string, position: number): WriteOp => ({
  replaceOne: { filter: { _id: id }, replacement: { _id: id, position }, upsert: true },
});

/** What a start found: the layout already `count`, or taken over from `previous`, resuming at `from`. */
export type LayoutTaken = { changed: false } | { changed: true; previous: number; from: number };

/**
 * Makes `count` the layout before a shard's worker starts (each of the new layout's workers may call
 * it; the first does the change). The change is one commit: the layout document moved from the
 * previous count to this one (a conditional upsert, refused whole when another worker changed it
 * first), each new shard's checkpoint and guard set to the lowest checkpoint of the previous layout
 * (0, the first event, when one of its shards never stored one), and the previous layout's guards
 * fenced: a worker of it still running has every commit refused from then on (it logs "working state
 * not stored") and writes no document; it may still send, one sender per attempt as ever.
 */
export async function takeLayout(options: LayoutOptions): Promise<LayoutTaken> {
  const { readStore, count, name, version } = options;
  const c = await readStore.collection(options.collection);
  for (let tries = 0; ; tries++) {
    const doc = await c.findOne({ _id: LAYOUT });
    const previous = typeof doc?.count === 'number' ? doc.count : 1;
    if (previous === count) return { changed: false };
    const stored = await Promise.all(
      Array.from({ length: previous }, (_, index) =>
        readStore.getCheckpoint(shardCheckpoint(name, { index, count: previous }).name),
      ),
    );
    // Nothing stored yet (a first start): each new shard starts from the first event on its own.
    const fresh = stored.every((checkpoint) => checkpoint === undefined);
    const from = fresh ? 0 : Math.min(...stored.map((s) => s?.position ?? 0));
    // Documents of another shape: each new shard's checkpoint keeps that version, so that its worker
    // discards its own share of them and rebuilds it from the first event (durable-follower.ts).
    const stale = stored.find((s) => s !== undefined && s.version !== version);
    const updated_at = options.clock.now().toISOString();
    const ops: WriteOp[] = [
      {
        updateOne: {
          filter: { _id: LAYOUT, count: previous },
          update: { $set: { count, updated_at } },
          upsert: true,
        },
      },
    ];
    const checkpoints: NamedCheckpoint[] = [];
    // The previous layout's workers may still run (a rolling deploy changing the count, dispatchers of
    // a release before the shards): their guards are fenced, so each of their commits is refused whole
    // and no document of this layout is ever moved back by a worker behind it.
    for (let index = 0; index < previous; index++)
      ops.push(guardAt(shardCheckpoint(name, { index, count: previous }).guard, FENCED));
    for (let index = 0; index < count; index++) {
      const names = shardCheckpoint(name, { index, count });
      // A guard fenced by an earlier change away from this layout is reset with it.
      ops.push(guardAt(names.guard, from));
      if (fresh) continue;
      checkpoints.push({
        name: names.name,
        checkpoint: { position: from, events: 0, updated_at, version: stale ? stale.version : version },
      });
    }
    try {
      await readStore.commit({ writes: [{ collection: c, ops }], checkpoints });
      options.logger?.info(
        { follower: name, previous, shards: count, resumed_after: from },
        'delivery shards changed: the new layout resumes from the lowest checkpoint of the previous one',
      );
      return { changed: true, previous, from };
    } catch (err) {
      // Another worker of the new layout changed it first: read again (a failing store: give up).
      if (tries >= 3) throw err;
    }
  }
}
