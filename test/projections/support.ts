/** Helpers for read-model tests: a temporary embedded event store, realistic metadata, a projector run. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ExecutionContext } from 'ava';
import type { DomainEvent } from '../../domain/decider.ts';
import { eventRegistry } from '../../domain/index.ts';
import * as store from '../../domain/store.ts';
import type { EventStore } from '../../eventstore/port.ts';
import { openSqliteEventStore } from '../../eventstore/sqlite.ts';
import { createProjector, type Projection } from '../../projections/projector.ts';
import type { Collection, Doc, IndexSpec, ReadStore, WriteOp } from '../../projections/read-store.ts';
import { rawEvent } from '../support/raw-events.ts';

export async function eventStoreFor(t: ExecutionContext): Promise<EventStore> {
  const dir = mkdtempSync(join(tmpdir(), 'pds-proj-'));
  const store = await openSqliteEventStore(join(dir, 'events.db'));
  t.teardown(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return store;
}

/**
 * Appends `count` events to 37 `thing-` streams, one an append: `Counted` with a kind of five, and every
 * 50th a `Renamed` (the tallies projections of the projector tests).
 */
export async function seedThings(store: EventStore, count: number, offset = 0): Promise<void> {
  for (let i = offset; i < offset + count; i++) {
    await store.append(`thing-${i % 37}`, [
      rawEvent(i % 50 === 49 ? 'Renamed' : 'Counted', { kind: `k${i % 5}`, n: i }),
    ]);
  }
}

/** Appends domain events with the metadata the command handler writes; answers the last position. */
export async function append(
  store: EventStore,
  streamId: string,
  events: DomainEvent[],
  at = '2026-05-01T10:00:00.000Z',
): Promise<number> {
  const result = await store.append(
    streamId,
    events.map((e) => ({
      type: e.type,
      data: e.data,
      metadata: {
        correlation_id: `corr-${streamId}`,
        causation_id: null,
        actor: { type: 'platform' as const, id: 'platform-test' },
        occurred_at: at,
        schema_version: eventRegistry.versionOf(e.type),
      },
    })),
  );
  return result.position;
}

/** Runs the projection until it has caught up with the log, then stops it. */
export async function project(
  store: EventStore,
  readStore: ReadStore,
  projection: Projection,
  options: { batchSize?: number } = {},
): Promise<void> {
  let failure: Error | undefined;
  const projector = createProjector({
    store,
    readStore,
    projections: [projection],
    batchSize: options.batchSize,
    onError: (_name, err) => {
      failure = err;
    },
  });
  await projector.start();
  await Promise.race([
    projector.caughtUp,
    new Promise((_, reject) =>
      setTimeout(() => reject(failure ?? new Error('projector did not catch up')), 10_000),
    ),
  ]);
  await projector.stop();
  if (failure) throw failure;
}

/**
 * Rebuilds the projection as an operator's rebuild does: a projector over the read store (its live
 * copies caught up first), then `rebuild`, whose shadows are built in bulk and promoted
 * (docs/read-side.md, "How a build writes its shadows").
 */
export async function rebuildThrough(
  store: EventStore,
  readStore: ReadStore,
  projection: Projection,
  options: { batchSize?: number } = {},
): Promise<void> {
  const projector = createProjector({
    store,
    readStore,
    projections: [projection],
    batchSize: options.batchSize,
  });
  try {
    await projector.start();
    await projector.caughtUp;
    await projector.rebuild(projection.name);
  } finally {
    await projector.stop();
  }
}

/**
 * What every declared index answers: each collection's documents (ids) in the order of each of its
 * indexes, and those its first field holds each value of, by index. Equal for two builds whose finds
 * answer alike.
 */
export async function indexViews(readStore: ReadStore, projection: Projection): Promise<unknown[]> {
  const out: unknown[] = [];
  for (const [name, indexes] of Object.entries(projection.collections)) {
    const c = await readStore.collection(name, indexes);
    const all = await c.find({});
    for (const index of indexes) {
      const [first] = index.keys[0];
      const ordered = await c.find({}, { sort: index.keys });
      const values = [
        ...new Set(all.flatMap((d) => [d[first]].flat()).map((v) => JSON.stringify(v ?? null))),
      ];
      const byValue = [];
      for (const v of values) byValue.push([v, (await c.find({ [first]: JSON.parse(v) })).map((d) => d._id)]);
      out.push([name, index.keys, ordered.map((d) => d._id), byValue]);
    }
  }
  return out;
}

/** Every document of every collection of the projection, by `_id`, without `_position` unless `positions`. */
export async function snapshot(
  readStore: ReadStore,
  projection: Projection,
  options: { positions?: boolean } = {},
): Promise<Record<string, Doc[]>> {
  const out: Record<string, Doc[]> = {};
  for (const [name, indexes] of Object.entries(projection.collections)) {
    const docs = await (await readStore.collection(name, indexes)).find({});
    out[name] = options.positions ? docs : docs.map(withoutPosition);
  }
  return out;
}

export function withoutPosition<T extends Doc>(doc: T): T {
  const { _position: _, ...rest } = doc;
  return rest as T;
}

/**
 * Resets a projection's checkpoint, so the next projector replays the whole log over its documents
 * (the version stays: the documents are of this code, so no rebuild).
 */
export async function resetCheckpoint(readStore: ReadStore, name: string): Promise<void> {
  const { version } = (await readStore.getCheckpoint(name)) ?? {};
  await readStore.setCheckpoint(name, {
    position: 0,
    events: 0,
    updated_at: '2026-05-01T00:00:00.000Z',
    ...(version === undefined ? {} : { version }),
  });
}

/** The read store, with every write operation recorded. */
export function recording(inner: ReadStore): { readStore: ReadStore; writes: WriteOp[] } {
  const writes: WriteOp[] = [];
  const inners = new WeakMap<Collection, Collection>();
  const innerOf = (c: Collection) => inners.get(c) ?? c;
  const wrap = <T extends Doc>(c: Collection<T>): Collection<T> => {
    const wrapped = wrapCollection(c);
    inners.set(wrapped as Collection, c as Collection);
    return wrapped;
  };
  const wrapCollection = <T extends Doc>(c: Collection<T>): Collection<T> => ({
    name: c.name,
    findOne: (f) => c.findOne(f),
    findByIds: (ids, options) => c.findByIds(ids, options),
    find: (f, o) => c.find(f, o),
    count: (f) => c.count(f),
    async bulkWrite(ops) {
      writes.push(...(ops as readonly WriteOp[]));
      await c.bulkWrite(ops);
    },
  });
  const readStore: ReadStore = {
    kind: inner.kind,
    collection: async <T extends Doc>(name: string, indexes?: readonly IndexSpec[]) =>
      wrap(await inner.collection<T>(name, indexes)),
    createShadow: (name, indexes, options) => inner.createShadow(name, indexes, options),
    finishBulk: (shadow, fence) => inner.finishBulk(shadow, fence),
    promote: (shadows, checkpoints, fence) => inner.promote(shadows, checkpoints, fence),
    dropShadow: (shadow, fence) => inner.dropShadow(shadow, fence),
    dropOrphanShadows: (fence) => inner.dropOrphanShadows(fence),
    getCheckpoint: (name) => inner.getCheckpoint(name),
    setCheckpoint: (name, checkpoint, fence) => inner.setCheckpoint(name, checkpoint, fence),
    commit: ({ writes: list, checkpoints, fence }) => {
      for (const { ops } of list) writes.push(...(ops as readonly WriteOp[]));
      return inner.commit({
        writes: list.map(({ collection, ops }) => ({ collection: innerOf(collection), ops })),
        checkpoints,
        fence,
      });
    },
    acquireLease: (lease, owner, ttlMs, from) => inner.acquireLease(lease, owner, ttlMs, from),
    renewLease: (fence, ttlMs) => inner.renewLease(fence, ttlMs),
    releaseLease: (fence) => inner.releaseLease(fence),
    close: () => inner.close(),
  };
  return { readStore, writes };
}

/** A store's `StoreUpserted` in Denver, with its name and time (the carts read model's store names). */
export const storeUpserted = (store_id: number, name: string, upserted_at: string) =>
  store.events.StoreUpserted({
    store_id,
    name,
    display_name: null,
    store_url: null,
    address: '100 Main St',
    city: 'Denver',
    state: 'CO',
    zip: '80202',
    lat: 39.7392,
    long: -104.9903,
    phone: null,
    time_zone: 'America/Denver',
    recreational: true,
    medical: false,
    pickup: true,
    delivery: false,
    curbside: true,
    working_hours: [],
    upserted_at,
  });
