/**
 * Delivery shards (docs/webhooks.md, "Scale"): the delivery queues are split among several delivery
 * workers by subscription. A queue `webhookdelivery-<webhook_id>_<cart_uuid>` belongs to shard
 * `fnv1a(webhook_id) mod count`, so all of a subscription's queues, hence all of a cart's deliveries to
 * it and its request slots, are one worker's; the expected revision on `AttemptStarted` still makes one
 * worker the sender of an attempt whatever the split.
 *
 * Each shard's worker keeps its working set in a collection of its own (`webhook_delivery_queues`
 * for a single shard, `webhook_delivery_queues_<i>_of_<count>` for shard i of several), with its own
 * checkpoint and guard, so that its window, its guard's pending count and an in-place upgrade of its
 * documents are those of one worker. The layout (how many shards) is kept in a collection of its own,
 * so that a start with another count takes the previous layout over (`takeLayout`).
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { FENCED, guardAt } from '../application/durable-follower.ts';
import type { Clock } from '../domain/clock.ts';
import { parseStreamId } from '../domain/webhook-delivery/vocabulary.ts';
import type {
  Collection,
  Doc,
  Fence,
  IndexSpec,
  NamedCheckpoint,
  ReadStore,
  WriteOp,
} from '../projections/read-store.ts';
import { PENDING_FIELD, QUEUE_GUARD } from './cold-queues.ts';

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

/** A worker's checkpoint name and the collection of its working set. */
export interface ShardNames {
  name: string;
  collection: string;
}

/**
 * A shard's checkpoint and collection. A single shard keeps the names of the unsharded worker, so one
 * delivery worker is exactly the layout it always was.
 */
export function shardCheckpoint(base: ShardNames, shard: Shard): ShardNames {
  if (shard.count === 1) return { name: base.name, collection: base.collection };
  const part = `${shard.index + 1}-of-${shard.count}`;
  return {
    name: `${base.name}/${part}`,
    collection: `${base.collection}_${shard.index + 1}_of_${shard.count}`,
  };
}

/** `PDS_WEBHOOK_QUEUE_WINDOW` is per process: each of its `count` shard workers holds a part of it. */
export const shardWindow = (window: number, count: number): number => Math.max(1, Math.floor(window / count));

/** The collection of the layout document, apart from every queue collection. */
export const LAYOUT_COLLECTION = 'webhook_delivery_layout';
/** `_id` of the layout document: how many shards the working set is split into (absent: one). */
export const LAYOUT = 'delivery-shards';
/** The lease held by the one start that moves the documents to a new layout. */
export const LAYOUT_LEASE = 'webhook-delivery-layout';

export interface LayoutOptions extends ShardNames {
  readStore: ReadStore;
  /** The documents' shape (a checkpoint of another is not resumed from, see durable-follower.ts). */
  version: string;
  /** The indexes of a queue collection: a new shard's is created with them, before its documents. */
  indexes?: readonly IndexSpec[];
  /**
   * Documents of version `from`: copied as they are when all are of it (the new shards' followers
   * upgrade them in place), else copied through `document` beside those of `version`.
   */
  upgrade?: { from: string; document(old: Doc): Doc };
  count: number;
  clock: Clock;
  /** Who takes the layout (the lease's holder). Default: a new id. */
  owner?: string;
  /** How long the layout lease lasts without a page copied. Default 30 s. */
  leaseMs?: number;
  /** Documents copied or deleted at a time. Default 500. */
  pageSize?: number;
  logger?: Logger;
}

export { FENCED } from '../application/durable-follower.ts';

/** Every guard of a queue collection, this release's and the earlier ones', fenced. */
const fenced = (): WriteOp[] => [QUEUE_GUARD.id, ...QUEUE_GUARD.retired].map((id) => guardAt(id, FENCED));

/** Guards and the like: a queue's `_id` (its stream) never starts with `$`. */
const queueDocs = (docs: readonly Doc[]) => docs.filter((doc) => !String(doc._id).startsWith('$'));

/** What a start found: the layout already `count`, or taken over from `previous`, resuming at `from`. */
export type LayoutTaken = { changed: false } | { changed: true; previous: number; from: number };

interface LayoutDoc extends Doc {
  count: number;
  /** The previous layout whose documents are still to delete (step d). */
  draining?: number | null;
}

/** The names of every shard of a layout of `count`. */
const layoutNames = (base: ShardNames, count: number) =>
  Array.from({ length: count }, (_, index) => shardCheckpoint(base, { index, count }));

/**
 * Makes `count` the layout before a shard's worker starts (each of the new layout's workers may call
 * it; the one holding the layout lease does the change, the others wait for it). The change:
 * (a) the new layout's collections are emptied (what an earlier attempt copied), (b) every document
 * of the previous layout's collections is copied, page by page, into the collection of the shard its
 * subscription hashes to (the pending working set, never the history), (c) one commit moves the
 * layout document, fences the previous layout's guards (a worker of it still running has every commit
 * refused from then on: it logs "working state not stored" and writes no document; it may still send,
 * one sender per attempt as ever), and sets each new shard's checkpoint and guard at the lowest
 * checkpoint of the previous layout, with its pending count, then (d) the previous collections'
 * documents but their guard are deleted. A crash before (c) leaves the previous layout as it was (the
 * next start does it again); after it, the next start finishes (d).
 */
export async function takeLayout(options: LayoutOptions): Promise<LayoutTaken> {
  const { readStore, count } = options;
  const layouts = await readStore.collection<LayoutDoc>(LAYOUT_COLLECTION);
  const leaseMs = options.leaseMs ?? 30_000;
  const owner = options.owner ?? `delivery-layout-${randomUUID()}`;
  for (;;) {
    const doc = await layouts.findOne({ _id: LAYOUT });
    const previous = doc?.count ?? 1;
    if (previous === count && !doc?.draining) return { changed: false };
    const lease = await readStore.acquireLease(LAYOUT_LEASE, owner, leaseMs);
    if (!lease.acquired) {
      // Another start is changing it: its outcome is read again shortly.
      await sleep(Math.min(250, Math.max(10, lease.expiresInMs)));
      continue;
    }
    try {
      const now = await layouts.findOne({ _id: LAYOUT });
      const from = now?.count ?? 1;
      if (from === count) {
        if (now?.draining) await drain(options, layouts, now.draining, lease.fence);
        return { changed: false };
      }
      const taken = await moveDocuments(options, layouts, from, lease.fence);
      await drain(options, layouts, from, lease.fence);
      return taken;
    } finally {
      await readStore.releaseLease(lease.fence).catch(() => {});
    }
  }
}

/** What the previous layout stored: where the new one resumes, and the version its documents are. */
async function previousCheckpoints(options: LayoutOptions, previous: number) {
  const { readStore, version } = options;
  const stored = await Promise.all(
    layoutNames(options, previous).map((names) => readStore.getCheckpoint(names.name)),
  );
  // Nothing stored yet (a first start): each new shard starts from the first event on its own.
  const fresh = stored.every((checkpoint) => checkpoint === undefined);
  const from = fresh ? 0 : Math.min(...stored.map((s) => s?.position ?? 0));
  const versions = new Set(stored.flatMap((s) => (s?.version === undefined ? [] : [s.version])));
  // Documents of an unknown shape: each new shard's checkpoint keeps that version, so that its worker
  // discards them and rebuilds its share from the first event (durable-follower.ts); documents all of
  // the version upgraded in place keep it, upgraded by each new shard's follower.
  const unknown = [...versions].find((v) => v !== version && v !== options.upgrade?.from);
  const upgradable =
    options.upgrade !== undefined && versions.size === 1 && versions.has(options.upgrade.from);
  const target = unknown ?? (upgradable ? (options.upgrade?.from as string) : version);
  // Mixed with documents of this version: those of the upgraded one are upgraded as they are copied.
  const upgradeOf = (index: number) =>
    target === version && stored[index]?.version === options.upgrade?.from
      ? options.upgrade?.document
      : undefined;
  return { fresh, from, target, copy: unknown === undefined, upgradeOf };
}

/** Steps (a) to (c) of `takeLayout`, under the layout lease (`fence`: refused once it is lost). */
async function moveDocuments(
  options: LayoutOptions,
  layouts: Collection<LayoutDoc>,
  previous: number,
  fence: Fence,
): Promise<LayoutTaken> {
  const { readStore, count, logger } = options;
  const page = options.pageSize ?? 500;
  const oldNames = layoutNames(options, previous);
  const newNames = layoutNames(options, count);
  const olds = await Promise.all(oldNames.map((n) => readStore.collection(n.collection)));
  // Opened with their indexes while empty: a collection's indexes are built before its documents.
  const news = await Promise.all(newNames.map((n) => readStore.collection(n.collection, options.indexes)));
  const { fresh, from, target, copy, upgradeOf } = await previousCheckpoints(options, previous);
  // (a) What an earlier attempt copied goes: the previous layout's documents are copied again.
  for (const c of news)
    await eachPage(c, page, (docs) =>
      commitPage(options, [{ collection: c, ops: deletes(queueDocs(docs)) }], fence),
    );
  // (b) Every queue document to the collection of its subscription's shard.
  const pending = new Array<number>(count).fill(0);
  if (copy) {
    for (const [i, c] of olds.entries()) {
      const upgrade = upgradeOf(i) ?? ((doc: Doc) => doc);
      await eachPage(c, page, async (docs) => {
        const ops: WriteOp[][] = news.map(() => []);
        for (const doc of docs) {
          const id = String(doc._id);
          const parsed = parseStreamId(id);
          if (id.startsWith('$') || !parsed) continue;
          const index = shardOf(parsed.webhook_id, count);
          ops[index].push({ replaceOne: { filter: { _id: id }, replacement: upgrade(doc), upsert: true } });
          pending[index] += Array.isArray(doc.deliveries) ? doc.deliveries.length : 0;
        }
        await commitPage(
          options,
          news.map((c, i) => ({ collection: c, ops: ops[i] })),
          fence,
        );
      });
    }
  }
  // (c) One commit: the layout, the fences, the new guards and checkpoints.
  const updated_at = options.clock.now().toISOString();
  const checkpoints: NamedCheckpoint[] = fresh
    ? []
    : newNames.map((n) => ({
        name: n.name,
        checkpoint: { position: from, events: 0, updated_at, version: target },
      }));
  await readStore.commit({
    writes: [
      {
        collection: layouts as Collection,
        ops: [
          {
            updateOne: {
              filter: { _id: LAYOUT, count: previous },
              update: { $set: { count, draining: previous, updated_at } },
              upsert: true,
            },
          },
        ],
      },
      // The previous layout's workers may still run (a rolling deploy changing the count): each of
      // their commits is refused whole, and no document of this layout is moved back by one behind it.
      ...olds.map((c) => ({ collection: c, ops: fenced() })),
      // A guard fenced by an earlier change away from this layout is reset with it; those of the
      // earlier releases are fenced in each.
      ...news.map((c, i) => ({
        collection: c,
        ops: [
          guardAt(QUEUE_GUARD.id, from, { [PENDING_FIELD]: pending[i] }),
          ...QUEUE_GUARD.retired.map((id) => guardAt(id, FENCED)),
        ],
      })),
    ],
    checkpoints,
    fence,
  });
  logger?.info(
    { follower: options.name, previous, shards: count, resumed_after: from },
    'delivery shards changed: the new layout resumes from the lowest checkpoint of the previous one',
  );
  return { changed: true, previous, from };
}

/** Step (d): the previous layout's documents but their fenced guard go, then the layout says so. */
async function drain(
  options: LayoutOptions,
  layouts: Collection<LayoutDoc>,
  previous: number,
  fence: Fence,
): Promise<void> {
  const { readStore } = options;
  const page = options.pageSize ?? 500;
  for (const names of layoutNames(options, previous)) {
    const c = await readStore.collection(names.collection);
    await eachPage(c, page, (docs) =>
      commitPage(options, [{ collection: c, ops: deletes(queueDocs(docs)) }], fence),
    );
  }
  await readStore.commit({
    writes: [
      {
        collection: layouts as Collection,
        ops: [
          {
            updateOne: { filter: { _id: LAYOUT, draining: previous }, update: { $set: { draining: null } } },
          },
        ],
      },
    ],
    fence,
  });
}

const deletes = (docs: readonly Doc[]): WriteOp[] =>
  docs.map((doc) => ({ deleteOne: { filter: { _id: doc._id } } }));

/** One page's writes under the layout lease, held on for the next page (refused once it is lost). */
async function commitPage(
  options: LayoutOptions,
  writes: ReadonlyArray<{ collection: Collection; ops: readonly WriteOp[] }>,
  fence: Fence,
) {
  const live = writes.filter((w) => w.ops.length > 0);
  if (live.length === 0) return;
  await options.readStore.commit({ writes: live, fence });
  await options.readStore.renewLease(fence, options.leaseMs ?? 30_000);
}

/** Hands every document of `c` to `visit`, a page at a time, in `_id` order. */
async function eachPage(c: Collection, size: number, visit: (docs: Doc[]) => Promise<void>): Promise<void> {
  for (let after: unknown[] | undefined; ; ) {
    const docs = await c.find({}, { sort: [['_id', 1]], limit: size, after });
    await visit(docs);
    if (docs.length < size) return;
    after = [docs[docs.length - 1]._id];
  }
}
