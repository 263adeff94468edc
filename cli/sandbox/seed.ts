/**
 * Seeds the sandbox through the platform's own write path: every record is parsed by the platform
 * route's zod schema and decided by its aggregate's decider, with the context the route would look up
 * (store existence, the product behind a menu product, a cart line priced by `applySpecials` with the
 * store's specials), so the sandbox is event-sourced like real data. The lookups come from the
 * generated data itself (it is what was just written), which spares a stream read per lookup. Catalog
 * records and partners go through the command handler; a past cart's commands are decided one after
 * the other and appended together (see `seedCart` in `seed/carts.ts`). Records are written in chunks
 * whose appends are in flight together, which the embedded store commits as one transaction (see
 * `SeedWriter.each` in `seed/writer.ts`). Past carts are driven through real status moves; past
 * abandonments are decided the way the abandonment timer does it.
 *
 * Once per event store: the `sandbox-seed` stream records `SandboxSeedStarted` (with the seed, size,
 * reference time and abandonment delay) and, at the end, `SandboxSeeded`. A store holding it completed
 * is not seeded again; one holding only the start resumes with the recorded parameters. Every step can
 * be repeated safely: upserts that change nothing append nothing, a cart or partner that exists is
 * skipped. So a restart after a crash, or two seeders at once, end with the same data as one run.
 *
 * API keys are derived from PDS_SECRET_KEY rather than stored, so a restart prints them again (see
 * `seed/keys.ts`).
 *
 * This module runs a seeding once per store and orders its steps; each kind of record is written by
 * its own module under `seed/`, and `seed/report.ts` says what was seeded.
 */
import { type KeyObject, randomUUID } from 'node:crypto';
import { type Clock, systemClock } from '../../domain/clock.ts';
import {
  type Actor,
  type EventStore,
  type RecordedEvent,
  StreamNotFoundError,
  WrongExpectedVersionError,
} from '../../eventstore/port.ts';
import { generateSandbox, type SandboxData, sandboxCounts } from './generate.ts';
import { decidingOnlySink, eventStoreSink, type RecordSink } from './record-sink.ts';
import { writeCarts } from './seed/carts.ts';
import {
  catalogFacts,
  writeCatalog,
  writeMenuProducts,
  writeReviews,
  writeSpecials,
} from './seed/catalog.ts';
import { sandboxCredentials } from './seed/keys.ts';
import { writePartners } from './seed/partners.ts';
import type { Seeded, SeedOptions, SeedResult, Started } from './seed/types.ts';
import { SeedWriter } from './seed/writer.ts';
import { DEFAULT_SANDBOX_SEED, DEFAULT_SANDBOX_SIZE } from './sizes.ts';

export { sandboxApiKey, sandboxCredentials } from './seed/keys.ts';
export { describeSandbox, sampleRequest, sandboxShellVariables, seedProgress } from './seed/report.ts';
export type {
  SandboxPartnerCredential,
  SeedOptions,
  SeedProgress,
  SeedResult,
} from './seed/types.ts';

export const SANDBOX_STREAM = 'sandbox-seed';
const STARTED = 'SandboxSeedStarted';
const SEEDED = 'SandboxSeeded';

const SEEDER: Actor = { type: 'system', id: 'sandbox-seed' };

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

// ---------------------------------------------------------------------------------------------------
// The marker stream

type Marker = { started?: Started; seeded?: Seeded; revision: number };

async function readMarker(es: EventStore): Promise<Marker> {
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

/**
 * Records `SandboxSeedStarted` on a store that holds no data of its own (else refuses it), and answers
 * the marker as it stands: this run's start, or that of a seeder that began at the same moment.
 */
async function beginSeeding(es: EventStore, options: SeedOptions, clock: Clock): Promise<Marker> {
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
  return readMarker(es);
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

  if (!marker.started) marker = await beginSeeding(es, options, clock);
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
  const writer = new SeedWriter(sink, runId, total, options);
  const facts = catalogFacts(data);
  await writeCatalog(writer, data, facts);
  // Specials and reviews before the menu products: a listing then starts with its product's ratings
  // and its store's specials, where listing first would rewrite every menu product of a product at
  // each of its reviews (and of a store at each special) while the read models follow.
  await writeSpecials(writer, data, facts);
  await writeReviews(writer, data, facts);
  await writeMenuProducts(writer, data, facts);
  await writePartners(writer, data, options.secretKey);
  await writeCarts(writer, data, facts, abandonAfterMs);
  writer.finish();
  return { events: writer.events, cartsSkipped: writer.cartsSkipped };
}
