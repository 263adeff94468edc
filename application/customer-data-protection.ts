/**
 * `pds customers protect` (docs/operations.md, "Customer data"): the personal data that events written
 * before sealing existed hold in plain text is sealed where it lies, as `CustomerData.seal` would have
 * sealed it on the way in: same position, id, type and metadata, only the data replaced. The walk goes
 * through the log in batches, each written in one short transaction with the position it reached, so
 * that a run that is stopped resumes there and a finished one has nothing left to do.
 *
 * A customer erased before (their cart records `CartCustomerErased` after the event) is sealed as an
 * erasure would have left them: under a key of its own that is destroyed at once, so the event reads
 * as erased, exactly as if it had been sealed when written and erased since.
 */
import type { EventMetadata } from '../eventstore/port.ts';
import { type CustomerData, withoutCustomer } from './customer-data.ts';
import type { CustomerErasure, CustomerKeyStore, LinkedKey, StoredCustomerKey } from './customer-keys.ts';

/** The event types whose data `CustomerData.seal` seals. */
export const SEALED_EVENT_TYPES = [
  'CartCustomerIdentified',
  'CurbsideArrivalPosted',
  'WebhookDeliveryScheduled',
  'IdempotentResponseRecorded',
] as const;

/** The event that records an erasure on a cart: what comes before it in the cart was erased. */
const ERASED = 'CartCustomerErased';

/** An event as the store keeps it: its data as stored text. */
export interface StoredEventData {
  position: number;
  stream_id: string;
  event_id: string;
  type: string;
  data: string;
  metadata: string;
}

/** One event's new data, written only where the event still holds `before`. */
export interface EventDataChange {
  position: number;
  event_id: string;
  before: string;
  after: string;
}

/**
 * The store's side of the rewrite (`eventstore/sqlite/rewrite.ts` on the embedded store): reads by
 * position, and writes a batch of new data with the position reached in one transaction.
 */
export interface EventDataRewrite {
  /** Where earlier runs got to (0: never run), and when one finished. */
  progress(): Promise<{ position: number; finished_at: string | null }>;
  /** The log's last position. */
  head(): Promise<number>;
  /** The events of `types` after `after`, up to `through`, in position order, at most `limit`. */
  read(after: number, through: number, types: readonly string[], limit: number): Promise<StoredEventData[]>;
  /** The last position of an event of `type` in each stream that has one. */
  lastOfType(type: string): Promise<Map<string, number>>;
  /**
   * Writes the changes and records `through` as reached, in one transaction: the positions written
   * (an event that no longer holds `before` is left); nothing, and `guarded`, when an event of
   * `guard.type` was appended after `guard.after` (the caller reads again).
   */
  write(
    changes: readonly EventDataChange[],
    through: number,
    guard: { type: string; after: number },
  ): Promise<{ written: number[]; guarded: boolean }>;
  /**
   * Records the run finished, rebuilds the file when told (`vacuum`: the space earlier writes freed
   * may still hold plain text), and copies the WAL into the file, truncating it; whether it could.
   */
  finish(at: string, vacuum: boolean): Promise<{ wal_truncated: boolean }>;
  close(): Promise<void>;
}

export interface ProtectionReport {
  /** The position earlier runs had reached, and the one this run reached (the log's head at its start). */
  from: number;
  through: number;
  /** Events of the sealed types read. */
  scanned: number;
  /** Events sealed, by type. */
  sealed: Record<string, number>;
  /** Of those, the ones of customers erased before, sealed under a key destroyed at once. */
  sealed_erased: number;
  batches: number;
  /** Whether the WAL was copied into the file and truncated (not while long reads of another process hold it). */
  wal_truncated: boolean;
  /** Whether the file was rebuilt at the end (`vacuum`). */
  vacuumed: boolean;
  /** When an earlier run finished, if one did. */
  finished_before: string | null;
}

export interface ProtectOptions {
  rewrite: EventDataRewrite;
  /** The service's customer data: live customers are sealed under their keys. */
  data: CustomerData;
  /** Builds the customer data that seals under keys of a scratch store (`scratchKeyStore`). */
  scratch: (keys: CustomerKeyStore) => CustomerData;
  batchSize?: number;
  /** Rebuild the file at the end (`VACUUM`): appends wait meanwhile, so with the service stopped. */
  vacuum?: boolean;
  now?: () => Date;
  /** Called after each batch is written (a progress display). */
  onBatch?: (report: ProtectionReport) => void | Promise<void>;
}

/** A key store in memory, whose new keys are taken (to be destroyed) by `take`. */
export function scratchKeyStore(): CustomerKeyStore & { take(): string[] } {
  const keys = new Map<string, StoredCustomerKey>();
  const links = new Map<string, Set<string>>();
  let made: string[] = [];
  const linksOf = (keyId: string) => [...links].filter(([, ids]) => ids.has(keyId)).map(([l]) => l);
  return {
    async key(keyId) {
      return keys.get(keyId) ?? null;
    },
    async keysLinkedTo(wanted) {
      const ids = new Set(wanted.flatMap((l) => [...(links.get(l) ?? [])]));
      return [...keys.keys()]
        .filter((id) => ids.has(id))
        .map((id): LinkedKey => ({ key_id: id, links: linksOf(id) }));
    },
    async link(key, wanted) {
      if (!keys.has(key.key_id)) {
        keys.set(key.key_id, key);
        made.push(key.key_id);
      }
      for (const l of wanted) links.set(l, (links.get(l) ?? new Set()).add(key.key_id));
    },
    async beginErasure(_erasure: CustomerErasure) {},
    async destroyKeys(ids) {
      for (const id of ids) keys.delete(id);
    },
    async pendingErasures() {
      return [];
    },
    async finishErasure() {},
    async close() {},
    take() {
      const taken = made;
      made = [];
      return taken;
    },
  };
}

/** The cart an event's personal data is of, when it names one. */
function cartOf(event: StoredEventData, data: Record<string, unknown>): string | undefined {
  if (event.type === 'CartCustomerIdentified' || event.type === 'CurbsideArrivalPosted') {
    return event.stream_id.startsWith('cart-') ? event.stream_id.slice('cart-'.length) : undefined;
  }
  let body = data.body;
  if (event.type === 'WebhookDeliveryScheduled') {
    if (typeof body !== 'string' || !body.startsWith('{')) return undefined;
    try {
      body = JSON.parse(body);
    } catch {
      return undefined;
    }
  }
  return withoutCustomer(body)?.cartUuid;
}

/** Seals what the log holds in plain text; resumes where an earlier run stopped. */
export async function protectStoredCustomerData(options: ProtectOptions): Promise<ProtectionReport> {
  const { rewrite, data, batchSize = 500, now = () => new Date() } = options;
  const scratchKeys = scratchKeyStore();
  const erasedData = options.scratch(scratchKeys);
  const progress = await rewrite.progress();
  const through = Math.max(await rewrite.head(), progress.position);
  const report: ProtectionReport = {
    from: progress.position,
    through,
    scanned: 0,
    sealed: {},
    sealed_erased: 0,
    batches: 0,
    wal_truncated: false,
    vacuumed: options.vacuum === true,
    finished_before: progress.finished_at,
  };
  // The erasures the log holds now; one appended while the walk runs sends it back to read them again.
  let guardAfter = await rewrite.head();
  let erasedAt = await rewrite.lastOfType(ERASED);
  let position = progress.position;
  while (position < through) {
    const events = await rewrite.read(position, through, SEALED_EVENT_TYPES, batchSize);
    const reached = events.length < batchSize ? through : events[events.length - 1].position;
    const changes: Array<EventDataChange & { type: string; erased: boolean }> = [];
    for (const event of events) {
      const parsed = JSON.parse(event.data) as Record<string, unknown>;
      const cart = cartOf(event, parsed);
      const erased = cart !== undefined && (erasedAt.get(`cart-${cart}`) ?? -1) > event.position;
      const stored = { id: event.event_id, type: event.type, data: parsed };
      const metadata = JSON.parse(event.metadata) as EventMetadata;
      const sealed = await (erased ? erasedData : data).seal(event.stream_id, { ...stored, metadata });
      if (sealed.data === parsed) continue;
      const after = JSON.stringify(sealed.data);
      changes.push({
        position: event.position,
        event_id: event.event_id,
        before: event.data,
        after,
        type: event.type,
        erased,
      });
    }
    // Before the sealed data is written: its keys are gone, so it never reads as anything but erased.
    const scratch = scratchKeys.take();
    if (scratch.length > 0) await data.keys.destroyKeys(scratch);
    const outcome = await rewrite.write(changes, reached, { type: ERASED, after: guardAfter });
    if (outcome.guarded) {
      guardAfter = await rewrite.head();
      erasedAt = await rewrite.lastOfType(ERASED);
      continue;
    }
    report.scanned += events.length;
    const written = new Set(outcome.written);
    for (const c of changes.filter((c) => written.has(c.position))) {
      report.sealed[c.type] = (report.sealed[c.type] ?? 0) + 1;
      if (c.erased) report.sealed_erased++;
    }
    report.batches++;
    position = reached;
    await options.onBatch?.(report);
  }
  report.wal_truncated = (await rewrite.finish(now().toISOString(), report.vacuumed)).wal_truncated;
  return report;
}
