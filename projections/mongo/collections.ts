/**
 * The physical collections of the MongoDB read store: created (with their indexes) before any
 * transaction touches them, named for a new shadow, and their driver handles kept by name.
 */
import { randomBytes } from 'node:crypto';
import { type Db, type Collection as MongoCollection, MongoServerError } from 'mongodb';
import type { Doc, IndexSpec } from '../read-store.ts';

const NAMESPACE_EXISTS = 48;
const GENERATION_SEPARATOR = '__gen_';
const SHADOW_NAME = new RegExp(`${GENERATION_SEPARATOR}[0-9a-f]{12}$`);

/** A random suffix for a new physical collection: unique without scanning what exists. */
const generation = () => randomBytes(6).toString('hex');

/** The physical name of a new shadow of `name`: `<name>__gen_<hex>`. */
export function shadowName(name: string): string {
  return `${name}${GENERATION_SEPARATOR}${generation()}`;
}

/** Whether a physical collection is a shadow, or a promoted one (named by `shadowName`). */
export function isShadowName(physical: string): boolean {
  return SHADOW_NAME.test(physical);
}

/** Creates the collection unless it exists, so no transaction has to (see transaction.ts). */
export async function ensureCollection(db: Db, name: string): Promise<void> {
  try {
    await db.createCollection(name);
  } catch (err) {
    // Servers before 7.0 refuse to create an existing collection; later ones accept it.
    if (!(err instanceof MongoServerError && err.code === NAMESPACE_EXISTS)) throw err;
  }
}

/** Creates the declared indexes (on a new shadow, or a collection without documents). */
export async function ensureIndexes(
  coll: MongoCollection<Doc>,
  indexes: readonly IndexSpec[],
): Promise<void> {
  for (const spec of indexes) {
    // createIndex with the same keys and options is a no-op, so declaring indexes again is idempotent.
    const keys = new Map(spec.keys.map(([field, direction]) => [field, direction] as const));
    await coll.createIndex(keys, spec.unique ? { unique: true } : {});
  }
}

/**
 * Creates a shadow of the collection `name` with `indexes`, named in `own` (the store's own shadows,
 * which an orphan sweep keeps: orphans.ts) before it exists, and no longer once its creation failed:
 * no rebuild will write or promote it, and the next sweep drops what was made of it. Returns its
 * physical name.
 */
export async function createShadowCollection(
  db: Db,
  name: string,
  indexes: readonly IndexSpec[],
  own: Set<string>,
): Promise<string> {
  const physical = shadowName(name);
  own.add(physical);
  try {
    // Created explicitly: a rebuild that writes nothing must still promote to an empty collection.
    await ensureCollection(db, physical);
    await ensureIndexes(db.collection(physical), indexes);
  } catch (err) {
    own.delete(physical);
    throw err;
  }
  return physical;
}

/**
 * Creates the declared indexes on a live collection only while it holds no document: one that holds
 * documents keeps the indexes it has. An index is never built over a live collection's documents
 * (a long build on a large one, and a new unique index its documents break would stop the start); a
 * rebuild brings it (docs/read-side.md, "Upgrades of read models"). A document written between the
 * look and the build is indexed with it, as MongoDB builds indexes on a collection being written.
 */
export async function ensureIndexesIfEmpty(
  coll: MongoCollection<Doc>,
  indexes: readonly IndexSpec[],
): Promise<void> {
  if (indexes.length === 0) return;
  if ((await coll.findOne({}, { projection: { _id: 1 } })) !== null) return;
  await ensureIndexes(coll, indexes);
}

/** Driver handles by physical name, so a live handle's lookup allocates nothing. */
export class PhysicalCollections {
  private readonly db: Db;
  private readonly byPhysical = new Map<string, MongoCollection<Doc>>();

  constructor(db: Db) {
    this.db = db;
  }

  get(physical: string): MongoCollection<Doc> {
    let coll = this.byPhysical.get(physical);
    if (!coll) {
      coll = this.db.collection<Doc>(physical);
      this.byPhysical.set(physical, coll);
    }
    return coll;
  }
}
