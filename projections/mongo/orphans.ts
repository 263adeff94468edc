/**
 * Shadows of the MongoDB read store that a crashed rebuild left: physical collections named as shadows
 * (`<name>__gen_<hex>`) that no pointer names live, that no promote retired (kept for readers for a
 * grace period, retired.ts), and that this store did not create (a rebuild of its own still running).
 * Nothing else would ever drop them, and each is a copy of a read model.
 */
import type { Db, Collection as MongoCollection } from 'mongodb';
import { isShadowName } from './collections.ts';
import { FROM_PRIMARY } from './connection.ts';
import { POINTERS_ID, type PointerDoc } from './live-names.ts';

/**
 * Drops the orphan shadows; `own` names the shadows of this store, and `fenced` throws once the
 * caller's lease is lost (asked before each drop). Returns how many were dropped.
 */
export async function dropOrphanShadows(
  db: Db,
  pointers: MongoCollection<PointerDoc>,
  own: ReadonlySet<string>,
  fenced: () => Promise<void>,
): Promise<number> {
  // The collections first, then the pointers: a shadow promoted in between is named by the pointers
  // read after it, never dropped as an orphan.
  // From the primary: a secondary behind it could lack a promote, and name a live collection an orphan.
  const listed = await db
    .listCollections({}, { nameOnly: true, readPreference: FROM_PRIMARY.readPreference })
    .toArray();
  const doc = await pointers.findOne({ _id: POINTERS_ID }, FROM_PRIMARY);
  const kept = new Set([
    ...(doc?.live ?? []).map((l) => l.physical),
    ...(doc?.retired ?? []).map((r) => r.physical),
  ]);
  const orphans = listed
    .map((c) => c.name)
    .filter((name) => isShadowName(name) && !kept.has(name) && !own.has(name));
  for (const name of orphans) {
    await fenced();
    await db.dropCollection(name); // a missing one is no error
  }
  return orphans.length;
}
