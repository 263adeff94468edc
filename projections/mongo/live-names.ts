/**
 * Which physical collection serves each logical name of the MongoDB read store: one pointer document,
 * moved by a promote, and each process's cached copy of it.
 *
 * Live names. A logical collection name resolves to a physical collection through one pointer
 * document (`_live`): a name without a pointer is its own physical collection (so a store written
 * before pointers existed keeps working), a shadow is a new physical collection `<name>__gen_<hex>`,
 * and `promote` changes the pointers of all its shadows in one write, in the transaction that also
 * stores its checkpoints. MongoDB can't rename collections in a transaction, and renaming one at a
 * time let readers see a mix of old and new collections; with one document, a reader resolves every
 * name from one version. The replaced collections are kept for `retiredGraceMs` and dropped after it
 * (by a timer in the promoting process, and by the next start or promote of any process: retired.ts).
 *
 * Each process caches the pointers for `liveNamesTtlMs` (1 s by default). The trade-off: reading the
 * pointer with every query would cost a second round trip per query (a partner page of 20 is one);
 * with the cache, a process pays one small read per second, and a process other than the promoting
 * one (an `api` replica) switches to the new collections up to one TTL after the promote, all of them
 * at once. The promoting process switches at once. The grace period (5 min by default) must exceed
 * the TTL plus the longest query plus clock skew between processes, so no reader still resolving the
 * old pointers meets a dropped collection (MongoDB would answer it as an empty one).
 */
import type { ClientSession, Collection as MongoCollection } from 'mongodb';
import type { Clock } from '../../domain/clock.ts';

export const LIVE = '_live';
/** The one pointer document: every logical name's physical collection, and the retired ones. */
export const POINTERS_ID = 'collections';

/** Which physical collection serves each logical name; a name absent from it is its own collection. */
export interface LiveNames {
  version: number;
  physical: ReadonlyMap<string, string>;
}

export interface LiveNameCache {
  /** The pointers, read again when the copy is `maxAgeMs` old or more (or the clock went back). */
  get(maxAgeMs?: number): Promise<LiveNames>;
  /** Takes pointers this process just wrote (after its own promote), so it switches at once. */
  set(names: LiveNames): void;
}

/**
 * A per-process copy of the pointers. Concurrent reads share one fetch, and a fetched copy older
 * than the one held (a read that started before this process's promote) is not taken.
 */
export function liveNameCache(fetch: () => Promise<LiveNames>, clock: Clock, ttlMs: number): LiveNameCache {
  let held: { names: LiveNames; at: number } | undefined;
  let pending: Promise<LiveNames> | undefined;
  const take = (names: LiveNames, at: number): LiveNames => {
    if (!held || names.version >= held.names.version) held = { names, at };
    else held = { names: held.names, at };
    return held.names;
  };
  return {
    get(maxAgeMs = ttlMs) {
      const now = clock.now().getTime();
      if (held && now - held.at >= 0 && now - held.at < maxAgeMs) return Promise.resolve(held.names);
      pending ??= fetch()
        .then((names) => take(names, now))
        .finally(() => {
          pending = undefined;
        });
      return pending;
    },
    set(names) {
      take(names, clock.now().getTime());
    },
  };
}

export interface PointerDoc {
  _id: string;
  version: number;
  live: Array<{ name: string; physical: string }>;
  /** Collections replaced by a promote, dropped once `since` is a grace period old. */
  retired: Array<{ physical: string; since: string }>;
}

export function namesOf(doc: PointerDoc | null): LiveNames {
  return {
    version: doc?.version ?? 0,
    physical: new Map((doc?.live ?? []).map(({ name, physical }) => [name, physical])),
  };
}

/**
 * Points each logical name of `moves` at its shadow in one write, retiring the collections they
 * replace. Reads the pointers inside the transaction: a concurrent promote makes one of the two
 * conflict, and the driver runs it again on the other's result.
 */
export async function movePointers(
  pointers: MongoCollection<PointerDoc>,
  clock: Clock,
  moves: ReadonlyArray<{ live: string; physical: string }>,
  session: ClientSession,
): Promise<LiveNames> {
  const doc = await pointers.findOne({ _id: POINTERS_ID }, { session });
  const current = new Map(namesOf(doc).physical);
  const since = clock.now().toISOString();
  const retired = [...(doc?.retired ?? [])];
  for (const { live, physical } of moves) {
    retired.push({ physical: current.get(live) ?? live, since });
    current.set(live, physical);
  }
  const version = (doc?.version ?? 0) + 1;
  const live = [...current].map(([name, physical]) => ({ name, physical }));
  await pointers.replaceOne({ _id: POINTERS_ID }, { version, live, retired }, { upsert: true, session });
  return { version, physical: current };
}
