/**
 * Documents a batch owns (docs/read-side.md, "Documents a batch owns"): the unit of work fetches its
 * documents afresh, not from the read store's cache, and a projection may change those in place until
 * a flush hands them to the store; the catalog's lookups change a big store's map in place instead of
 * copying it at every batch, except where the event cannot write it (a replay over a document ahead).
 */
import test, { type ExecutionContext } from 'ava';
import * as brand from '../../domain/brand.ts';
import type { DomainEvent } from '../../domain/decider.ts';
import * as menuProduct from '../../domain/menu-product.ts';
import * as product from '../../domain/product.ts';
import * as special from '../../domain/special.ts';
import * as store from '../../domain/store.ts';
import type { RecordedEvent } from '../../eventstore/port.ts';
import type { Projection } from '../../projections/projection.ts';
import { type MenuLookupDoc, menuLookups } from '../../projections/read-models/catalog/menu-lookups.ts';
import { CATALOG_PRODUCT_LISTINGS } from '../../projections/read-models/catalog/products.ts';
import { catalogProjection } from '../../projections/read-models/catalog/projection.ts';
import { CATALOG_STORE_KINDS } from '../../projections/read-models/catalog/specials.ts';
import { CATALOG_STORE_BRANDS } from '../../projections/read-models/catalog/stores.ts';
import type { CatalogTx } from '../../projections/read-models/catalog/support.ts';
import type { Collection, Doc, ReadStore } from '../../projections/read-store.ts';
import { openSqliteReadStore } from '../../projections/sqlite/read-store.ts';
import { applyBatch, type Collections, type CommitWork } from '../../projections/unit-of-work.ts';
import { META } from '../support/raw-events.ts';
import { append, eventStoreFor, snapshot, storeUpserted } from './support.ts';

function memoryStore(t: ExecutionContext): ReadStore {
  const readStore = openSqliteReadStore(':memory:');
  t.teardown(() => readStore.close());
  return readStore;
}

const committing =
  (readStore: ReadStore): CommitWork =>
  (writes) =>
    readStore.commit({ writes });

test('documents fetched with own are parsed afresh and kept out of the cache; plain reads share the cached one', async (t) => {
  const readStore = memoryStore(t);
  const docs = await readStore.collection('docs', []);
  await readStore.commit({
    writes: [{ collection: docs, ops: [{ insertOne: { document: { _id: 'a', n: 1 } } }] }],
  });

  const [owned] = await docs.findByIds(['a'], { own: true });
  (owned as Doc).n = 2; // changed in place, as a unit of work may
  const [plain] = await docs.findByIds(['a']);
  t.is(plain?.n, 1, 'the owned copy was not the cache’s');
  const [again] = await docs.findByIds(['a']);
  t.is(again, plain, 'a plain read is served from the cache');
  const [ownedAgain] = await docs.findByIds(['a'], { own: true });
  t.not(ownedAgain, plain, 'an owned read never hands out the cached object');
  t.deepEqual(ownedAgain, { _id: 'a', n: 1 });
});

/** `Look` records whether the unit owns the document `id` of `docs`; `Flush` asks for a flush (an `updateMany` of `other`). */
function looking(seen: boolean[]): Projection {
  return {
    name: 'looking',
    version: 1,
    collections: { docs: [], other: [] },
    filter: { streamPrefixes: ['look-'] },
    apply(e, tx) {
      if (e.type === 'Flush') return tx.updateMany('other', {}, { $set: { seen: true } });
      const doc = tx.get<Doc>('docs', (e.data as { id: string }).id);
      if (doc) seen.push(tx.owns(doc));
    },
  };
}

const event = (position: number, type: string, data: unknown): RecordedEvent => ({
  position,
  streamId: 'look-1',
  revision: position,
  id: `e-${position}`,
  type,
  data,
  metadata: META,
  recordedAt: '2026-05-01T10:00:00.000Z',
});

test('a unit of work owns the documents it fetched until a flush hands them to the store', async (t) => {
  const readStore = memoryStore(t);
  const docs = await readStore.collection('docs', []);
  const other = await readStore.collection('other', []);
  await readStore.commit({
    writes: [{ collection: docs, ops: [{ insertOne: { document: { _id: 'a' } } }] }],
  });
  const seen: boolean[] = [];
  await applyBatch(looking(seen), { docs, other }, committing(readStore), [
    event(1, 'Look', { id: 'a' }),
    event(2, 'Look', { id: 'a' }),
    event(3, 'Flush', {}),
    event(4, 'Look', { id: 'a' }),
  ]);
  t.deepEqual(seen, [true, true, false]);
});

// ---- the catalog's lookups ------------------------------------------------------------------------

const STORE = 7;
const PRODUCT = 30;

/** A special of brand 3 at the store: a listing there reads it, and its batch has not prefetched it. */
function brandSpecial(): [string, DomainEvent[]] {
  return [
    special.streamId(1),
    [
      special.events.SpecialUpserted({
        special_id: 1,
        store_id: STORE,
        title: 'Brand deal',
        description: null,
        special_type: 'product',
        discount_type: 'percent',
        discount_value: '10.00',
        product_ids: [],
        brand_ids: [3],
        kinds: [],
        starts_at: '2026-05-01T00:00:00.000Z',
        ends_at: null,
        enabled: true,
        upserted_at: '2026-05-01T10:00:00.000Z',
      }),
    ],
  ];
}

function catalogEvents(withSpecial = false): Array<[string, DomainEvent[]]> {
  const at = '2026-05-01T10:00:00.000Z';
  const listed = (id: number): [string, DomainEvent[]] => [
    menuProduct.streamId(id),
    [
      menuProduct.events.MenuProductListed({
        menu_product_id: id,
        store_id: STORE,
        product_id: PRODUCT,
        brand_id: 3,
        prices: { each: '10.00' },
        in_stock: true,
        listed_at: at,
      }),
    ],
  ];
  return [
    [store.streamId(STORE), [storeUpserted(STORE, 'Seven', at)]],
    [brand.streamId(3), [brand.events.BrandUpserted({ brand_id: 3, name: 'Three', upserted_at: at })]],
    [
      product.streamId(PRODUCT),
      [
        product.events.ProductUpserted({
          product_id: PRODUCT,
          name: 'Thirty',
          brand_id: 3,
          kind: 'flower',
          kind_subtype: null,
          lineage: 'hybrid',
          description: null,
          percent_thc: 20,
          percent_cbd: 0,
          image_urls: [],
          upserted_at: at,
        }),
      ],
    ],
    ...(withSpecial ? [brandSpecial()] : []),
    listed(101),
    listed(102),
    listed(103),
  ];
}

const LOOKUPS: Array<[string, string | number]> = [
  [CATALOG_STORE_KINDS, `${STORE}:flower`],
  [CATALOG_STORE_BRANDS, `${STORE}:3`],
  [CATALOG_PRODUCT_LISTINGS, PRODUCT],
];

async function lookupsOf(collections: Collections): Promise<string[][]> {
  const out: string[][] = [];
  for (const [name, id] of LOOKUPS) {
    const [doc] = await collections[name].findByIds([id]);
    out.push(Object.keys((doc as MenuLookupDoc<unknown> | undefined)?.menu_products ?? {}).sort());
  }
  return out;
}

async function catalogLog(t: ExecutionContext, withSpecial = false): Promise<RecordedEvent[]> {
  const es = await eventStoreFor(t);
  for (const [stream, events] of catalogEvents(withSpecial)) await append(es, stream, events);
  return es.readAll({ after: 0, maxCount: 100 });
}

async function open(readStore: ReadStore): Promise<Collections> {
  const collections: Collections = {};
  for (const [name, indexes] of Object.entries(catalogProjection.collections)) {
    collections[name] = (await readStore.collection(name, indexes)) as Collection;
  }
  return collections;
}

/** Every catalog document, `_position` included, as one batch of all `events` writes them. */
async function singleBatch(t: ExecutionContext, events: RecordedEvent[]) {
  const readStore = memoryStore(t);
  await applyBatch(catalogProjection, await open(readStore), committing(readStore), events);
  return withPositions(readStore);
}

const withPositions = (readStore: ReadStore) => snapshot(readStore, catalogProjection, { positions: true });

test('a catalog batch whose commit fails leaves the lookups as stored, and applied again writes them as a single batch would', async (t) => {
  const all = await catalogLog(t);
  const split = all.length - 2; // the last two listings make the second batch
  const readStore = memoryStore(t);
  const collections = await open(readStore);
  await applyBatch(catalogProjection, collections, committing(readStore), all.slice(0, split));
  // Cached by plain reads, as an API read would leave them.
  const first = await lookupsOf(collections);
  t.deepEqual(first, [['101'], ['101'], ['101']]);

  const refused: CommitWork = async () => {
    throw new Error('refused');
  };
  await t.throwsAsync(applyBatch(catalogProjection, collections, refused, all.slice(split)), {
    message: 'refused',
  });
  t.deepEqual(await lookupsOf(collections), first, 'the failed batch changed no document the store holds');

  await applyBatch(catalogProjection, collections, committing(readStore), all.slice(split));
  t.deepEqual(await withPositions(readStore), await singleBatch(t, all));
  t.deepEqual(await lookupsOf(collections), [
    ['101', '102', '103'],
    ['101', '102', '103'],
    ['101', '102', '103'],
  ]);
});

test('a listing that stops to fetch its store’s special undoes its changes to the owned maps, and is applied again', async (t) => {
  const all = await catalogLog(t, true);
  const split = all.length - 2;
  const readStore = memoryStore(t);
  const collections = await open(readStore);
  await applyBatch(catalogProjection, collections, committing(readStore), all.slice(0, split));
  let attempts = 0;
  const counting: Projection = {
    ...catalogProjection,
    apply(e, tx) {
      attempts += 1;
      catalogProjection.apply(e, tx);
    },
  };
  await applyBatch(counting, collections, committing(readStore), all.slice(split));
  t.true(attempts > 2, 'the first listing missed the special and was applied again');
  t.deepEqual(await withPositions(readStore), await singleBatch(t, all));
  const [deal] = await collections.specials.findByIds([1]);
  t.deepEqual(deal?._involved_product_ids, [PRODUCT]);
});

/** A catalog transaction over one stored lookup document, at `position`, owning it or not. */
function lookupTx(stored: MenuLookupDoc<number>, position: number, owned: boolean) {
  const writes: Doc[] = [];
  const tx = {
    position,
    scratch: new Map<string, unknown>(),
    get: (_: string, id: string | number) => (id === stored._id ? stored : undefined),
    owns: (doc: Doc) => owned && doc === stored,
    onAbort: () => {},
    write: (_: string, doc: Doc) => {
      if ((stored._position as number) >= position) return; // the replay guard `catalogTx.write` has
      writes.push(doc);
    },
    remove: () => {},
  } as unknown as CatalogTx;
  return { tx, writes };
}

const lookupDoc = (): MenuLookupDoc<number> => ({
  _id: 'k',
  menu_products: { 1: 10 },
  count: 1,
  _position: 5,
});

test('an event writes nothing of a lookup in parts one of whose parts is ahead of it, and puts back what it changed in place', (t) => {
  // The lookup's document and its first part are behind the event; the part it meets second is ahead.
  const low: MenuLookupDoc<number> = { _id: 'k@0', menu_products: { 1: 10, 2: 20 }, count: 2, _position: 5 };
  const high: MenuLookupDoc<number> = { _id: 'k@10', menu_products: { 11: 110 }, count: 1, _position: 9 };
  const stored = new Map<string, Doc>([
    ['lookups k', { _id: 'k', count: 3, parts: [0, 10], _position: 5 }],
    ['lookups_parts k@0', low],
    ['lookups_parts k@10', high],
  ]);
  const written: Doc[] = [];
  const removed: unknown[] = [];
  const tx = {
    position: 7,
    scratch: new Map<string, unknown>(),
    get: (collection: string, id: string) => stored.get(`${collection} ${id}`),
    getMany: (collection: string, ids: string[]) => ids.map((id) => stored.get(`${collection} ${id}`)),
    owns: () => true,
    onAbort: () => {},
    write: (_: string, doc: Doc) => written.push(doc),
    remove: (_: string, id: unknown) => removed.push(id),
  } as unknown as CatalogTx;
  const lookups = menuLookups<number, MenuLookupDoc<number>>(tx, 'lookups', (id) => ({
    _id: String(id),
    menu_products: {},
  }));
  lookups.set('k', 3, 30); // in the first part, in place: the batch owns it
  t.deepEqual(low.menu_products, { 1: 10, 2: 20, 3: 30 });
  lookups.delete('k', 11); // in the part ahead
  lookups.commit();
  t.deepEqual(written, []);
  t.deepEqual(removed, []);
  t.deepEqual(low.menu_products, { 1: 10, 2: 20 });
  t.deepEqual(high.menu_products, { 11: 110 });
});

test('menuLookups changes an owned map in place, copies one it does not own, and never changes one the event cannot write', (t) => {
  const cases: Array<{ owned: boolean; position: number; inPlace: boolean; written: boolean }> = [
    { owned: true, position: 6, inPlace: true, written: true },
    { owned: false, position: 6, inPlace: false, written: true },
    // A replay: the document reflects a later event, so the write is dropped and the map stays.
    { owned: true, position: 4, inPlace: false, written: false },
  ];
  for (const { owned, position, inPlace, written } of cases) {
    const stored = lookupDoc();
    const map = stored.menu_products ?? {};
    const { tx, writes } = lookupTx(stored, position, owned);
    const lookups = menuLookups<number, MenuLookupDoc<number>>(tx, 'lookups', (id) => ({
      _id: String(id),
      menu_products: {},
    }));
    lookups.set('k', 2, 20);
    lookups.commit();
    const label = `owned ${owned}, event at ${position}`;
    t.is(Object.hasOwn(map, '2'), inPlace, label);
    t.is(writes.length, written ? 1 : 0, label);
    if (written) {
      t.deepEqual((writes[0] as MenuLookupDoc<number>).menu_products, { 1: 10, 2: 20 }, label);
      t.is((writes[0] as MenuLookupDoc<number>).menu_products === map, inPlace, label);
    }
  }
});
