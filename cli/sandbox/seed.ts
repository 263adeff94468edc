/**
 * Seeds the sandbox through the platform's own write path: every record is parsed by the platform
 * route's zod schema and decided by its aggregate's decider, with the context the route would look up
 * (store existence, the product behind a menu product, a cart line priced by `applySpecials` with the
 * store's specials), so the sandbox is event-sourced like real data. The lookups come from the
 * generated data itself (it is what was just written), which spares a stream read per lookup. Catalog
 * records and partners go through the command handler; a past cart's commands are decided one after
 * the other and appended together (see `seedCart`). Records are written in chunks whose appends are
 * in flight together, which the embedded store commits as one transaction (see `each`). Past carts
 * are driven through real status moves; past abandonments are decided the way the abandonment timer
 * does it.
 *
 * Once per event store: the `sandbox-seed` stream records `SandboxSeedStarted` (with the seed, size,
 * reference time and abandonment delay) and, at the end, `SandboxSeeded`. A store holding it completed
 * is not seeded again; one holding only the start resumes with the recorded parameters. Every step can
 * be repeated safely: upserts that change nothing append nothing, a cart or partner that exists is
 * skipped. So a restart after a crash, or two seeders at once, end with the same data as one run.
 *
 * API keys: only their hashes enter events, so a restart cannot read them back. The sandbox keys are
 * derived instead, as HMAC-SHA256(PDS_SECRET_KEY, seed + partner kind): a restart (or `pds sandbox
 * seed` again) recomputes them and prints those that are still active. Nothing new is written to disk,
 * and the keys are exactly as secret as the secret key, which already guards every webhook secret; a
 * key the operator revokes or rotates stays dead, because it is only printed while its hash is active.
 */
import { createHmac, type KeyObject, randomUUID } from 'node:crypto';
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { SingleBar } from 'cli-progress';
import {
  type CommandMetadata,
  createCommandHandler,
  toNewEvents,
} from '../../application/command-handler.ts';
import {
  API_KEY_PREFIX,
  apiKeyPrefix,
  type GeneratedApiKey,
  hashApiKey,
} from '../../application/credentials.ts';
import { ABANDONMENT_ACTOR } from '../../dispatcher/abandonment.ts';
import * as brand from '../../domain/brand.ts';
import * as cart from '../../domain/cart.ts';
import { type Clock, systemClock } from '../../domain/clock.ts';
import { type Decider, DomainError, type DomainEvent } from '../../domain/decider.ts';
import { eventRegistry } from '../../domain/index.ts';
import * as menuProduct from '../../domain/menu-product.ts';
import * as partner from '../../domain/partner.ts';
import { lineAtPlacement, type PricingSpecial } from '../../domain/pricing.ts';
import * as product from '../../domain/product.ts';
import * as review from '../../domain/review.ts';
import * as special from '../../domain/special.ts';
import * as store from '../../domain/store.ts';
import {
  type Actor,
  type EventStore,
  type NewEvent,
  type RecordedEvent,
  StreamNotFoundError,
  WrongExpectedVersionError,
} from '../../eventstore/port.ts';
import {
  type CartPlan,
  generateSandbox,
  type SandboxCounts,
  type SandboxData,
  sandboxCounts,
  sandboxPartnerIds,
} from './generate.ts';
import { decidingOnlySink, eventStoreSink, type RecordSink } from './record-sink.ts';
import { DEFAULT_SANDBOX_SEED, DEFAULT_SANDBOX_SIZE } from './sizes.ts';

export const SANDBOX_STREAM = 'sandbox-seed';
const STARTED = 'SandboxSeedStarted';
const SEEDED = 'SandboxSeeded';

const PLATFORM: Actor = { type: 'platform', id: 'platform' };
const OPERATOR: Actor = { type: 'operator', id: 'operator' };
const SEEDER: Actor = { type: 'system', id: 'sandbox-seed' };

/** Records whose appends are in flight together (see `each` in `writeSandbox`). */
const SEED_CHUNK = 250;

/** Streams whose presence means the store holds data of its own (then it is not seeded). */
const DATA_PREFIXES = [
  'store-',
  'brand-',
  'product-',
  'menuproduct-',
  'review-',
  'special-',
  'cart-',
  'partner-',
];

/** The event store holds data that is not the sandbox's: seeding it would overwrite records. */
export class SandboxRefusedError extends Error {
  override name = 'SandboxRefusedError';
}

interface Started {
  seed: number;
  size: number;
  reference_time: string;
  /** `PDS_ABANDON_AFTER` when seeding began: a resumed run plans the same abandonments. */
  abandon_after_ms: number;
  counts: SandboxCounts;
  run_id: string;
  started_at: string;
}
interface Seeded extends Started {
  seeded_at: string;
  events: number;
  seconds: number;
}

export interface SandboxPartnerCredential {
  kind: partner.PartnerKind;
  partner_id: string;
  name: string;
  brand_ids: number[];
  store_ids: number[];
  all_brands: boolean;
  key_id: string;
  key_prefix: string;
  /** The key, or null when the operator has revoked or rotated it (it is then never shown). */
  api_key: string | null;
  key_status: 'active' | 'revoked' | 'missing';
}

export interface SeedResult {
  /** `seeded`: this run wrote the sandbox (or finished an interrupted one); `already_seeded`: nothing to do. */
  outcome: 'seeded' | 'already_seeded';
  seed: number;
  size: number;
  reference_time: string;
  counts: SandboxCounts;
  /** Events this run appended. */
  events_written: number;
  /** Carts found already there (a resumed or concurrent seeding), skipped as a whole. */
  carts_skipped: number;
  seconds: number;
  partners: SandboxPartnerCredential[];
}

export interface SeedProgress {
  phase: string;
  done: number;
  total: number;
}

export interface SeedOptions {
  store: EventStore;
  /** `PDS_SECRET_KEY`: the sandbox API keys are derived from it. */
  secretKey: KeyObject;
  /** `PDS_ABANDON_AFTER`: when past carts count as abandoned (an interrupted seeding keeps its own). */
  abandonAfterMs: number;
  size?: number;
  seed?: number;
  clock?: Clock;
  onProgress?: (progress: SeedProgress) => void;
  /** Stops between two commands (the seeding resumes at the next start). */
  signal?: AbortSignal;
}

// ---------------------------------------------------------------------------------------------------
// Keys

/** The sandbox key of one partner kind: HMAC-SHA256(secret key, seed and kind), as an API key. */
export function sandboxApiKey(
  secretKey: KeyObject,
  seed: number,
  kind: partner.PartnerKind,
): GeneratedApiKey {
  const mac = (purpose: string) =>
    createHmac('sha256', secretKey).update(`pds-sandbox-key\0${seed}\0${kind}\0${purpose}`).digest();
  const api_key = API_KEY_PREFIX + mac('api_key').toString('base64url');
  return {
    api_key,
    key_id: `key_${mac('key_id').subarray(0, 9).toString('base64url')}`,
    key_hash: hashApiKey(api_key),
    key_prefix: apiKeyPrefix(api_key),
  };
}

// ---------------------------------------------------------------------------------------------------
// The marker stream

async function readMarker(es: EventStore): Promise<{ started?: Started; seeded?: Seeded; revision: number }> {
  let events: RecordedEvent[];
  try {
    events = await es.readStream(SANDBOX_STREAM);
  } catch (err) {
    if (err instanceof StreamNotFoundError) return { revision: -1 };
    throw err;
  }
  const started = events.find((e) => e.type === STARTED)?.data as Started | undefined;
  const seeded = events.find((e) => e.type === SEEDED)?.data as Seeded | undefined;
  return { started, seeded, revision: events[events.length - 1].revision };
}

function markerEvent(type: string, data: object, correlationId: string, at: string) {
  return {
    type,
    data,
    metadata: {
      correlation_id: correlationId,
      causation_id: null,
      actor: SEEDER,
      occurred_at: at,
      schema_version: 1,
    },
  };
}

/** The sandbox partners and their keys as they stand now (a revoked key is not shown). */
export async function sandboxCredentials(
  es: EventStore,
  secretKey: KeyObject,
  seed: number,
): Promise<SandboxPartnerCredential[]> {
  const commands = createCommandHandler(es, eventRegistry);
  const ids = sandboxPartnerIds(seed);
  const credentials: SandboxPartnerCredential[] = [];
  for (const kind of partner.partnerKinds) {
    const state = (await commands.load(partner.streamId(ids[kind]), partner.decider)).state;
    if (!state.exists) continue;
    const key = sandboxApiKey(secretKey, seed, kind);
    const held = state.keys.find((k) => k.key_hash === key.key_hash);
    const status = held?.status ?? 'missing';
    credentials.push({
      kind,
      partner_id: state.partner_id,
      name: state.name,
      brand_ids: state.brand_ids,
      store_ids: state.store_ids,
      all_brands: state.all_brands,
      key_id: key.key_id,
      key_prefix: key.key_prefix,
      api_key: status === 'active' ? key.api_key : null,
      key_status: status,
    });
  }
  return credentials;
}

// ---------------------------------------------------------------------------------------------------
// Seeding

/** Seeds the sandbox once; a later call reports what is there. Throws `SandboxRefusedError` or an abort. */
export async function seedSandbox(options: SeedOptions): Promise<SeedResult> {
  const es = options.store;
  const clock = options.clock ?? systemClock;
  const began = performance.now();
  let marker = await readMarker(es);

  if (marker.seeded) {
    const s = marker.seeded;
    return {
      outcome: 'already_seeded',
      seed: s.seed,
      size: s.size,
      reference_time: s.reference_time,
      counts: s.counts,
      events_written: 0,
      carts_skipped: 0,
      seconds: 0,
      partners: await sandboxCredentials(es, options.secretKey, s.seed),
    };
  }

  if (!marker.started) {
    if ((await es.headPosition({ streamPrefixes: DATA_PREFIXES })) > 0) {
      throw new SandboxRefusedError(
        'the event store already holds stores, products, carts or partners that are not the sandbox’s; not seeding over them',
      );
    }
    const seed = options.seed ?? DEFAULT_SANDBOX_SEED;
    const size = options.size ?? DEFAULT_SANDBOX_SIZE;
    const now = clock.now().toISOString();
    const started: Started = {
      seed,
      size,
      reference_time: now,
      abandon_after_ms: options.abandonAfterMs,
      counts: sandboxCounts(size),
      run_id: randomUUID(),
      started_at: now,
    };
    try {
      await es.append(SANDBOX_STREAM, [markerEvent(STARTED, started, started.run_id, now)], {
        expectedRevision: 'no_stream',
      });
    } catch (err) {
      // Another process began at the same moment: go on with its parameters (every step is repeatable).
      if (!(err instanceof WrongExpectedVersionError)) throw err;
    }
    marker = await readMarker(es);
  }
  const started = marker.started as Started;

  const data = generateSandbox({
    seed: started.seed,
    size: started.size,
    reference: started.reference_time,
    abandonAfterMs: started.abandon_after_ms,
  });
  const written = await writeSandbox(eventStoreSink(es), data, started, options);

  const seconds = Math.round(performance.now() - began) / 1000;
  const seededAt = clock.now().toISOString();
  try {
    await es.append(
      SANDBOX_STREAM,
      [
        markerEvent(
          SEEDED,
          { ...started, seeded_at: seededAt, events: written.events, seconds },
          started.run_id,
          seededAt,
        ),
      ],
      { expectedRevision: marker.revision },
    );
  } catch (err) {
    // A concurrent seeder finished first; the data is the same.
    if (!(err instanceof WrongExpectedVersionError)) throw err;
  }
  return {
    outcome: 'seeded',
    seed: started.seed,
    size: started.size,
    reference_time: started.reference_time,
    counts: started.counts,
    events_written: written.events,
    carts_skipped: written.cartsSkipped,
    seconds,
    partners: await sandboxCredentials(es, options.secretKey, started.seed),
  };
}

/**
 * Decides every record of a sandbox data set through the deciders, as seeding would, and writes
 * nothing: how many events seeding it would write. Throws what seeding would throw.
 */
export async function decideSandbox(options: {
  secretKey: KeyObject;
  size: number;
  seed?: number;
  reference: string;
  abandonAfterMs: number;
}): Promise<number> {
  const seed = options.seed ?? DEFAULT_SANDBOX_SEED;
  const data = generateSandbox({
    seed,
    size: options.size,
    reference: options.reference,
    abandonAfterMs: options.abandonAfterMs,
  });
  const started: Started = {
    seed,
    size: options.size,
    reference_time: options.reference,
    abandon_after_ms: options.abandonAfterMs,
    counts: sandboxCounts(options.size),
    run_id: randomUUID(),
    started_at: options.reference,
  };
  const written = await writeSandbox(decidingOnlySink(), data, started, options);
  return written.events;
}

/** Runs every platform command of the data set, in dependency order. */
async function writeSandbox(
  sink: RecordSink,
  data: SandboxData,
  { run_id: runId, abandon_after_ms: abandonAfterMs }: Started,
  options: Pick<SeedOptions, 'secretKey' | 'signal' | 'onProgress'>,
): Promise<{ events: number; cartsSkipped: number }> {
  const { signal, onProgress } = options;
  let events = 0;
  let cartsSkipped = 0;
  let done = 0;
  const total =
    data.stores.length +
    data.curbside_settings.length +
    data.brands.length +
    data.products.length +
    data.menu_products.length +
    data.specials.length +
    data.reviews.length +
    data.partners.length +
    data.carts.length;
  let phase = 'stores';
  let reported = '';
  let lastYield = performance.now();

  /** After each chunk: progress (at each new phase, then now and then), a chance to stop, a pause. */
  async function step(records: number): Promise<void> {
    done += records;
    signal?.throwIfAborted();
    const now = performance.now();
    if (phase !== reported) {
      reported = phase;
      onProgress?.({ phase, done, total });
    }
    // Appends to the embedded store never wait for I/O: without a pause, a seeding process would
    // answer no HTTP request and deliver no subscription until the end.
    if (now - lastYield > 20) {
      lastYield = now;
      onProgress?.({ phase, done, total });
      await yieldToLoop();
    }
  }

  /**
   * Writes records a chunk at a time: the records of a chunk are decided one by one, and their appends
   * are in flight together, so the embedded store commits them in one transaction (its group commit)
   * and each follower wakes once per chunk rather than once per record. The results come back in the
   * records' order.
   */
  async function each<T, R>(
    items: readonly T[],
    write: (item: T, index: number) => Promise<R>,
  ): Promise<R[]> {
    const results: R[] = [];
    for (let i = 0; i < items.length; i += SEED_CHUNK) {
      signal?.throwIfAborted();
      const chunk = items.slice(i, i + SEED_CHUNK);
      results.push(...(await Promise.all(chunk.map((item, j) => write(item, i + j)))));
      await step(chunk.length);
    }
    return results;
  }

  const meta = (at: string, actor: Actor = PLATFORM, correlationId = runId): CommandMetadata => ({
    correlationId,
    causationId: null,
    actor,
    at,
  });
  async function run<C, E extends DomainEvent, S>(
    streamId: string,
    decider: Decider<C, E, S>,
    command: C,
    metadata: CommandMetadata,
  ) {
    const result = await sink.run(streamId, decider, command, metadata);
    events += result.events.length;
    return result;
  }

  // ---- catalog: what PUT /stores, /curbside_pickup_setting, /brands, /products run
  const at = data.catalog_at;
  await each(data.stores, (s) => {
    const fields = store.storeFields.parse(s.body);
    return run(
      store.streamId(s.id),
      store.decider,
      { type: 'UpsertStore', store_id: s.id, fields, at },
      meta(at),
    );
  });
  const storeFacts = new Map(data.stores.map((s) => [s.id, store.storeFields.parse(s.body)]));
  const settings = new Map<number, ReturnType<typeof store.curbsidePickupSettingFields.parse>>();
  phase = 'curbside settings';
  await each(data.curbside_settings, (c) => {
    const fields = store.curbsidePickupSettingFields.parse(c.body);
    settings.set(c.store_id, fields);
    return run(
      store.streamId(c.store_id),
      store.decider,
      { type: 'SetCurbsidePickupSetting', store_id: c.store_id, fields, at },
      meta(at),
    );
  });
  phase = 'brands';
  await each(data.brands, (b) => {
    const fields = brand.brandFields.parse({ name: b.name });
    return run(
      brand.streamId(b.id),
      brand.decider,
      { type: 'UpsertBrand', brand_id: b.id, fields, at },
      meta(at),
    );
  });
  phase = 'products';
  const products = new Map<number, product.ProductFields>();
  await each(data.products, (p) => {
    const fields = product.productFields.parse(p.body);
    products.set(p.id, fields);
    return run(
      product.streamId(p.id),
      product.decider,
      { type: 'UpsertProduct', product_id: p.id, fields, brand_exists: true, at },
      meta(at),
    );
  });

  // ---- specials and reviews, before the menu products: a listing then starts with its product's
  // ratings and its store's specials, where listing first would rewrite every menu product of a
  // product at each of its reviews (and of a store at each special) while the read models follow.
  phase = 'specials';
  const specialFields = data.specials.map((sp) => special.specialFields.parse(sp.body));
  const upserted = await each(data.specials, (sp, i) => {
    const fields = specialFields[i];
    return run(
      special.streamId(sp.id),
      special.decider,
      {
        type: 'UpsertSpecial',
        special_id: sp.id,
        fields,
        store_exists: storeFacts.has(fields.store_id),
        at: sp.at,
      },
      meta(sp.at),
    );
  });
  // In the data set's order, which is the order the cart lines' pricing sees them in.
  const specialsByStore = new Map<number, PricingSpecial[]>();
  upserted.forEach(({ state: s }, i) => {
    if (!s.exists) return;
    const list = specialsByStore.get(s.store_id) ?? [];
    list.push({ id: s.special_id, ...specialFields[i], starts_at: s.starts_at, ends_at: s.ends_at });
    specialsByStore.set(s.store_id, list);
  });
  phase = 'reviews';
  await each(data.reviews, (r) => {
    const fields = review.reviewFields.parse(r.body);
    const reviewed = products.get(fields.product_id);
    return run(
      review.streamId(r.id),
      review.decider,
      {
        type: 'PostReview',
        review_id: r.id,
        fields,
        product: reviewed ? { brand_id: reviewed.brand_id } : null,
        store_exists: storeFacts.has(fields.store_id),
        at: r.at,
      },
      meta(r.at),
    );
  });

  // ---- what PUT /menu_products runs
  phase = 'menu products';
  const listings = new Map<number, { store_id: number; fields: menuProduct.MenuProductFields }>();
  await each(data.menu_products, (m) => {
    const fields = menuProduct.menuProductFields.parse(m.body);
    listings.set(m.id, { store_id: m.store_id, fields });
    const listed = products.get(fields.product_id);
    return run(
      menuProduct.streamId(m.id),
      menuProduct.decider,
      {
        type: 'ListMenuProduct',
        menu_product_id: m.id,
        store_id: m.store_id,
        fields,
        store_exists: storeFacts.has(m.store_id),
        product: listed ? { product_id: fields.product_id, brand_id: listed.brand_id } : null,
        at,
      },
      meta(at),
    );
  });

  // ---- partners: what POST /admin/v1/partners runs, with the derived keys
  phase = 'partners';
  for (const p of data.partners) {
    const body = partner.partnerFields.parse(p.body);
    const key = sandboxApiKey(options.secretKey, data.seed, p.kind);
    try {
      await run(
        partner.streamId(p.partner_id),
        partner.decider,
        {
          type: 'RegisterPartner',
          partner_id: p.partner_id,
          ...body,
          key: { key_id: key.key_id, key_hash: key.key_hash, key_prefix: key.key_prefix },
          unknown_brand_ids: await sink.missing('brand-', body.brand_ids),
          unknown_store_ids: await sink.missing('store-', body.store_ids),
          at: data.partners_at,
        },
        meta(data.partners_at, OPERATOR),
      );
    } catch (err) {
      if (!(err instanceof DomainError && err.code === 'partner_exists')) throw err;
    }
    await step(1);
  }

  // ---- carts, in the order they were created
  phase = 'carts';
  const brandNames = new Map(data.brands.map((b) => [b.id, b.name]));
  /** What POST /carts/{uuid}/items puts in the command's context (platform.ts `lineFor`). */
  function lineFor(menuProductId: number, priceId: cart.CartLine['price_id'], at: string) {
    const listing = listings.get(menuProductId);
    if (!listing) return null;
    const item = products.get(listing.fields.product_id);
    if (!item) return null;
    return lineAtPlacement({
      product: { ...item, product_id: listing.fields.product_id },
      storeId: listing.store_id,
      brandName: brandNames.get(item.brand_id) ?? '',
      unitPrice: listing.fields.prices[priceId] ?? null,
      specials: specialsByStore.get(listing.store_id) ?? [],
      at,
    });
  }

  /**
   * A past cart's whole life, decided command by command by the cart decider (as the platform routes
   * would run them, one after the other) and appended in one append that requires a new stream. One
   * append, because an abandonment timer watching the store (a service running beside `pds sandbox
   * seed`) would abandon a half-written past cart at once: its first item is days old.
   */
  async function seedCart(plan: CartPlan): Promise<void> {
    const fields = cart.createCartFields.parse({ uuid: plan.uuid, ...plan.body });
    const uuid = plan.uuid.toLowerCase();
    let state = cart.decider.initialState;
    const batch: NewEvent[] = [];
    const decide = (command: cart.CartCommand, at: string, actor: Actor = PLATFORM) => {
      const decided = cart.decider.decide(command, state);
      state = decided.reduce(cart.decider.evolve, state);
      batch.push(...toNewEvents(eventRegistry, decided, meta(at, actor, plan.correlation_id)));
    };
    decide(
      {
        type: 'CreateCart',
        cart_uuid: uuid,
        store_id: fields.store_id,
        source: fields.source,
        user_id: fields.user_id,
        at: plan.at,
        context: { store_exists: storeFacts.has(fields.store_id) },
      },
      plan.at,
    );
    for (const s of plan.steps) {
      let command: cart.CartCommand;
      let actor = PLATFORM;
      switch (s.type) {
        case 'add': {
          const body = cart.addCartItemFields.parse(s.body);
          command = {
            type: 'AddCartItem',
            ...body,
            at: s.at,
            context: { line: lineFor(body.menu_product_id, body.price_id, s.at) },
          };
          break;
        }
        case 'quantity':
          command = {
            type: 'ChangeCartItemQuantity',
            menu_product_id: s.menu_product_id,
            count: s.count,
            at: s.at,
          };
          break;
        case 'remove':
          command = { type: 'RemoveCartItem', menu_product_id: s.menu_product_id, at: s.at };
          break;
        case 'customer':
          command = { type: 'IdentifyCartCustomer', ...cart.cartCustomerFields.parse(s.body), at: s.at };
          break;
        case 'checkout': {
          const shop = storeFacts.get(fields.store_id);
          command = {
            type: 'CheckOutCart',
            ...cart.checkOutCartFields.parse(s.body),
            at: s.at,
            context: {
              store: {
                pickup: shop?.pickup ?? false,
                delivery: shop?.delivery ?? false,
                curbside_enabled: settings.get(fields.store_id)?.enabled ?? false,
              },
            },
          };
          break;
        }
        case 'status':
          command = { type: 'ChangeCartStatus', ...cart.changeCartStatusFields.parse(s.body), at: s.at };
          break;
        case 'arrival': {
          const setting = settings.get(fields.store_id);
          actor = { type: 'partner', id: s.partner_id };
          command = {
            type: 'PostCurbsideArrival',
            arrival_id: s.arrival_id,
            fields: cart.curbsideArrivalFields.parse(s.fields),
            at: s.at,
            context: {
              curbside: setting
                ? { enabled: setting.enabled, arrival_form_fields: setting.arrival_form_fields }
                : null,
            },
          };
          break;
        }
        case 'abandon':
          actor = ABANDONMENT_ACTOR;
          command = { type: 'AbandonCart', at: s.at, abandon_after_ms: abandonAfterMs };
          break;
      }
      decide(command, s.at, actor);
    }
    // A cart written by an earlier, interrupted run (or a concurrent one) is left as it is.
    if (await sink.create(cart.streamId(uuid), batch)) events += batch.length;
    else cartsSkipped += 1;
  }

  await each(data.carts, (plan) => seedCart(plan));
  onProgress?.({ phase: 'done', done: total, total });
  return { events, cartsSkipped };
}

// ---------------------------------------------------------------------------------------------------
// What to show

/**
 * `onProgress` for a seeding: a bar on stderr when `bar` is asked for and stderr is a terminal, and
 * `onStart` once records are being written (not for a store seeded before). `stop` removes the bar.
 */
export function seedProgress(options: { bar: boolean; onStart?: () => void }) {
  const bar =
    options.bar && process.stderr.isTTY
      ? new SingleBar({
          format: 'sandbox [{bar}] {percentage}% | {value}/{total} records | {phase}',
          hideCursor: true,
          stream: process.stderr,
        })
      : undefined;
  let started = false;
  return {
    onProgress({ phase, done, total }: SeedProgress) {
      if (!started) {
        started = true;
        options.onStart?.();
        bar?.start(total, 0, { phase });
      }
      bar?.update(done, { phase });
    },
    stop: () => bar?.stop(),
  };
}

/** The partner API request the banner suggests: the store operator's menu, which every size has. */
export function sampleRequest(result: Pick<SeedResult, 'partners'>, baseUrl: string) {
  const operator = result.partners.find((p) => p.kind === 'store_operator' && p.api_key);
  const any = operator ?? result.partners.find((p) => p.api_key);
  if (!any?.api_key) return null;
  const paths: Record<partner.PartnerKind, string> = {
    store_operator: `/partner/store/v1/menu_products?store_id=${any.store_ids[0]}&limit=3`,
    store_menu_feed: `/partner/store-menu-feed/v1/menu_products?store_id=${any.store_ids[0]}&limit=3`,
    brand: '/partner/brand/v1/stores?limit=3',
    brand_feed: '/partner/brand-feed/v1/reviews?limit=3',
  };
  const url = `${baseUrl.replace(/\/+$/, '')}${paths[any.kind]}`;
  return { url, api_key: any.api_key, curl: `curl -H 'Authorization: Bearer ${any.api_key}' '${url}'` };
}

const scopeText = (p: SandboxPartnerCredential) =>
  p.all_brands
    ? 'all brands'
    : p.brand_ids.length > 0
      ? `brands ${p.brand_ids.join(', ')}`
      : p.store_ids.length > 3
        ? `stores ${p.store_ids[0]}-${p.store_ids[p.store_ids.length - 1]} (${p.store_ids.length})`
        : `stores ${p.store_ids.join(', ')}`;

const thousands = (n: number) => n.toLocaleString('en-US');

/** The lines that tell a person what the sandbox holds and how to try it (never logged: they hold keys). */
export function describeSandbox(result: SeedResult, baseUrl: string): string {
  const c = result.counts;
  const lines = [
    result.outcome === 'seeded'
      ? `sandbox seeded: ${result.events_written.toLocaleString('en-US')} events in ${result.seconds} s`
      : `sandbox: seeded before (seed ${result.seed}, size ${result.size}, at ${result.reference_time})`,
    `sandbox data: ${thousands(c.stores)} stores, ${thousands(c.brands)} brands, ${thousands(c.products)} products, ` +
      `${thousands(c.menu_products)} menu products, ${thousands(c.reviews)} reviews, ${thousands(c.specials)} specials, ` +
      `${thousands(c.carts)} carts`,
    `docs: ${baseUrl.replace(/\/+$/, '')}/docs`,
    'sandbox API keys (one partner per kind):',
  ];
  const width = Math.max(...result.partners.map((p) => p.kind.length));
  for (const p of result.partners) {
    const key =
      p.api_key ??
      `(${p.key_prefix}… ${p.key_status}: issue a new one with pds partners keys issue ${p.partner_id})`;
    lines.push(`  ${p.kind.padEnd(width)}  ${key}  ${p.name}, ${scopeText(p)}, partner ${p.partner_id}`);
  }
  const sample = sampleRequest(result, baseUrl);
  if (sample) lines.push(`try: ${sample.curl}`);
  return lines.join('\n');
}
