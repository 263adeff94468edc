/**
 * `pds customers protect` (docs/operations.md, "Customer data"): the personal data that events written
 * before sealing existed hold in plain text is sealed where it lies, as `CustomerData.seal` would have
 * sealed it on the way in: same position, id, type and metadata, only the data replaced. The walk goes
 * through the log in batches, each written in one short transaction with the position it reached, so
 * that a run that is stopped resumes there and a finished one has nothing left to do.
 *
 * A customer erased before (their cart records `CartCustomerErased` after the event) is sealed as an
 * erasure would have left them: under a key of its own, never stored, whose tombstone names that
 * erasure, so the event reads as erased, exactly as if it had been sealed when written and erased since.
 * An event of a version that kept no user id beside the customer is sealed with its cart's user id (as
 * `CartCreated` has it), so that an erasure by user id reaches it.
 *
 * The walk is not the end: the space the old values took before (a page split, a freed page) may still
 * hold them until the file is rebuilt, so a run is `finished` only once `events.db` was vacuumed.
 */
import type { EventMetadata } from '../eventstore/port.ts';
import { type CustomerData, withoutCustomer } from './customer-data.ts';
import type { CustomerKeyStore, LinkedKey, StoredCustomerKey } from './customer-keys.ts';

/** The event types whose data `CustomerData.seal` seals. */
export const SEALED_EVENT_TYPES = [
  'CartCustomerIdentified',
  'CurbsideArrivalPosted',
  'WebhookDeliveryScheduled',
  'IdempotentResponseRecorded',
] as const;

/** The event that records an erasure on a cart: what comes before it in the cart was erased. */
const ERASED = 'CartCustomerErased';

/** How a sealed webhook body starts (`CustomerData.sealBody`). */
const SEALED_BODY = 'pds-sealed-v1 ';

/** An erasure a cart records, where. */
export interface RecordedErasure {
  position: number;
  erasure_id: string;
  erased_at: string;
}

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
  /** Where earlier runs got to (0: never run), when one went through the log, and when one vacuumed after. */
  progress(): Promise<{ position: number; finished_at: string | null; vacuumed_at: string | null }>;
  /** The log's last position. */
  head(): Promise<number>;
  /** The events of `types` after `after`, up to `through`, in position order, at most `limit`. */
  read(after: number, through: number, types: readonly string[], limit: number): Promise<StoredEventData[]>;
  /** The erasures (`CartCustomerErased`) each cart stream records after `after`, in position order. */
  erasures(after?: number): Promise<Map<string, RecordedErasure[]>>;
  /** The user id each of these cart streams was created with (`CartCreated`), where it has one. */
  cartUsers(streamIds: readonly string[]): Promise<Map<string, string>>;
  /** The body each of these deliveries was scheduled with (`WebhookDeliveryScheduled`), as stored. */
  scheduledBodies(deliveryIds: readonly string[]): Promise<Map<string, string>>;
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
   * Records the walk finished, rebuilds the file when told (`vacuum`: the space earlier writes freed
   * may still hold plain text; recorded too), and copies the WAL into the file, truncating it when no
   * reader holds it (never waiting on one with the writer's lock held); whether it could.
   */
  finish(at: string, vacuum: boolean): Promise<{ wal_truncated: boolean; vacuumed_at: string | null }>;
  close(): Promise<void>;
}

/** A file of the embedded stores that `vacuum` rebuilds too (`projections/sqlite/rebuild.ts`). */
export interface RebuiltFile {
  /** Rebuilds the file when told, and truncates its WAL when no reader holds it; whether it could. */
  finish(vacuum: boolean): Promise<boolean>;
  close(): Promise<void>;
}

/**
 * The bodies of the deliveries the dispatcher's working state keeps (`projections/sqlite/delivery-bodies.ts`
 * on the embedded store), which a retry sends as they are.
 */
export interface DeliveryBodies extends RebuiltFile {
  pending(): Promise<Array<{ delivery_id: string; body: string }>>;
  /** Replaces these deliveries' bodies; how many it replaced. */
  replace(bodies: ReadonlyMap<string, string>): Promise<number>;
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
  /** Pending deliveries whose body the dispatcher's working state kept in plain text, sealed there. */
  deliveries_sealed: number;
  /** Whether the WAL was copied into the file and truncated (not while long reads of another process hold it). */
  wal_truncated: boolean;
  /** Whether the file was rebuilt at the end (`vacuum`). */
  vacuumed: boolean;
  /** When an earlier run finished, if one did. */
  finished_before: string | null;
  /**
   * Whether no plain text is left: the walk done, the file rebuilt by this run or one since the last
   * sealing, and the WAL truncated. Until then the old values may remain in the file's free space.
   */
  finished: boolean;
}

export interface ProtectOptions {
  rewrite: EventDataRewrite;
  /** The service's customer data: live customers are sealed under their keys. */
  data: CustomerData;
  /** The dispatcher's working state, when there is one: its pending bodies are sealed too. */
  deliveries?: DeliveryBodies | null;
  /**
   * The read store's file, when there is one, rebuilt too by `vacuum`: a file written without
   * `secure_delete` keeps deleted documents, plain text among them, in its free pages.
   */
  readStore?: RebuiltFile | null;
  /** Builds the customer data that seals under keys of a scratch store (`scratchKeyStore`). */
  scratch: (keys: CustomerKeyStore) => CustomerData;
  batchSize?: number;
  /** Rebuild the file at the end (`VACUUM`): appends wait meanwhile, so with the service stopped. */
  vacuum?: boolean;
  now?: () => Date;
  /** Called after each batch is written (a progress display). */
  onBatch?: (report: ProtectionReport) => void | Promise<void>;
}

/** A key store in memory, whose new keys are taken (to be tombstoned in the service's) by `take`. */
export function scratchKeyStore(): CustomerKeyStore & { take(): string[] } {
  const keys = new Map<string, StoredCustomerKey>();
  const links = new Map<string, Set<string>>();
  let made: string[] = [];
  const linksOf = (keyId: string) => [...links].filter(([, ids]) => ids.has(keyId)).map(([l]) => l);
  const addLinks = (keyId: string, wanted: readonly string[]) => {
    for (const l of wanted) links.set(l, (links.get(l) ?? new Set()).add(keyId));
  };
  return {
    async key(keyId) {
      const key = keys.get(keyId);
      return key ? { key } : null;
    },
    async keysLinkedTo(wanted, last) {
      const ids = new Set(wanted.flatMap((l) => [...(links.get(l) ?? [])]));
      const linked = [...keys.keys()].filter((id) => ids.has(id));
      return (last === undefined ? linked : linked.slice(-last)).map(
        (id): LinkedKey => ({ key_id: id, links: linksOf(id) }),
      );
    },
    async createKey(key, wanted) {
      if (keys.has(key.key_id)) return false;
      keys.set(key.key_id, key);
      made.push(key.key_id);
      addLinks(key.key_id, wanted);
      return true;
    },
    async addLinks(keyId, wanted) {
      if (keys.has(keyId)) addLinks(keyId, wanted);
    },
    async tombstonesOfCart() {
      return [];
    },
    async beginErasure() {},
    async destroyKeys(ids) {
      for (const id of ids) keys.delete(id);
      for (const ids of links.values()) for (const id of ids) if (!keys.has(id)) ids.delete(id);
      return { wiped: true };
    },
    async pendingErasures() {
      return [];
    },
    async finishErasure() {},
    async close() {},
    /** The keys made since the last call, forgotten here: the next seal makes a new one. */
    take() {
      const taken = made;
      made = [];
      for (const id of taken) keys.delete(id);
      for (const ids of links.values()) for (const id of taken) ids.delete(id);
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

/** The erasure a cart records after `position`, the first: the one that erased what was there then. */
const erasureAfter = (recorded: readonly RecordedErasure[] | undefined, position: number) =>
  recorded?.find((e) => e.position > position);

/** The key a sealed event's data names (its personal data's, or its webhook body's). */
function keyOf(data: unknown): string | undefined {
  const d = data as { personal?: { key_id?: string }; body?: unknown };
  if (d.personal?.key_id) return d.personal.key_id;
  if (typeof d.body === 'string' && d.body.startsWith(SEALED_BODY)) return d.body.split(' ', 2)[1];
  return undefined;
}

/** The event's data with its cart's user id for sealing, when its version kept none beside the customer. */
function withCartUser(event: StoredEventData, data: Record<string, unknown>, users: Map<string, string>) {
  if (
    'user_id' in data ||
    (event.type !== 'CartCustomerIdentified' && event.type !== 'CurbsideArrivalPosted')
  )
    return data;
  const user = users.get(event.stream_id);
  return user === undefined ? data : { ...data, user_id: user };
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
    deliveries_sealed: 0,
    wal_truncated: false,
    vacuumed: options.vacuum === true,
    finished_before: progress.finished_at,
    finished: false,
  };
  // The erasures the log holds now; one appended while the walk runs sends it back to read them again.
  let guardAfter = await rewrite.head();
  let erasures = await rewrite.erasures();
  // The service's keys each cart's events were sealed under by this run, for an erasure recorded later.
  const liveKeys = new Map<string, Set<string>>();
  const keysErased = new Set<string>();
  let position = progress.position;
  while (position < through) {
    const events = await rewrite.read(position, through, SEALED_EVENT_TYPES, batchSize);
    const reached = events.length < batchSize ? through : events[events.length - 1].position;
    const users = await rewrite.cartUsers([...new Set(events.map((e) => e.stream_id))]);
    const changes: Array<EventDataChange & { type: string; erased: boolean; cart?: string; key?: string }> =
      [];
    // Each key made for an erased customer, and the erasure its tombstone names.
    const tombstones = new Map<string, { erasure_id: string; erased_at: string; keyIds: string[] }>();
    for (const event of events) {
      const parsed = JSON.parse(event.data) as Record<string, unknown>;
      const cart = cartOf(event, parsed);
      const erasure =
        cart === undefined ? undefined : erasureAfter(erasures.get(`cart-${cart}`), event.position);
      const input = withCartUser(event, parsed, users);
      const stored = { id: event.event_id, type: event.type, data: input };
      const metadata = JSON.parse(event.metadata) as EventMetadata;
      const sealed = await (erasure ? erasedData : data).seal(event.stream_id, { ...stored, metadata });
      if (sealed.data === input) continue;
      if (erasure) {
        const made = scratchKeys.take();
        const entry = tombstones.get(erasure.erasure_id) ?? { ...erasure, keyIds: [] };
        tombstones.set(erasure.erasure_id, { ...entry, keyIds: [...entry.keyIds, ...made] });
      }
      // The user id was only for the key's link: the event keeps the shape of its version.
      const out = { ...(sealed.data as Record<string, unknown>) };
      if (!('user_id' in parsed)) delete out.user_id;
      changes.push({
        position: event.position,
        event_id: event.event_id,
        before: event.data,
        after: JSON.stringify(out),
        type: event.type,
        erased: erasure !== undefined,
        cart,
        key: erasure ? undefined : keyOf(out),
      });
    }
    // Before the sealed data is written: its keys are tombstones already, so it never reads as
    // anything but erased, and never as a key missing.
    for (const t of tombstones.values()) {
      await data.keys.destroyKeys(t.keyIds, { erasure_id: t.erasure_id, erased_at: t.erased_at });
    }
    const outcome = await rewrite.write(changes, reached, { type: ERASED, after: guardAfter });
    if (outcome.guarded) {
      guardAfter = await rewrite.head();
      erasures = await rewrite.erasures();
      continue;
    }
    report.scanned += events.length;
    const written = new Set(outcome.written);
    for (const c of changes.filter((c) => written.has(c.position))) {
      report.sealed[c.type] = (report.sealed[c.type] ?? 0) + 1;
      if (c.erased) report.sealed_erased++;
      if (c.cart !== undefined && c.key !== undefined) {
        liveKeys.set(`cart-${c.cart}`, (liveKeys.get(`cart-${c.cart}`) ?? new Set()).add(c.key));
      }
    }
    report.batches++;
    position = reached;
    await eraseRecordedSince(rewrite, data, through, liveKeys, keysErased);
    await options.onBatch?.(report);
  }
  await eraseRecordedSince(rewrite, data, through, liveKeys, keysErased);
  let deliveriesTruncated = true;
  if (options.deliveries) {
    report.deliveries_sealed = await sealPendingBodies(options.deliveries, rewrite, data);
    deliveriesTruncated = await options.deliveries.finish(report.vacuumed);
  }
  const readStoreTruncated = options.readStore ? await options.readStore.finish(report.vacuumed) : true;
  const finish = await rewrite.finish(now().toISOString(), report.vacuumed);
  report.wal_truncated = finish.wal_truncated && deliveriesTruncated && readStoreTruncated;
  report.finished = report.wal_truncated && finish.vacuumed_at !== null;
  return report;
}

function showsCustomer(body: string): boolean {
  try {
    return withoutCustomer(JSON.parse(body)) !== null;
  } catch {
    return false;
  }
}

/**
 * The plain bodies of pending deliveries, replaced by the body their scheduling event holds now (sealed
 * by the walk, erased where its cart recorded an erasure), or sealed now when the log has none.
 */
async function sealPendingBodies(
  deliveries: DeliveryBodies,
  rewrite: EventDataRewrite,
  data: CustomerData,
): Promise<number> {
  const plain = (await deliveries.pending()).filter(
    (d) => !d.body.startsWith(SEALED_BODY) && showsCustomer(d.body),
  );
  if (plain.length === 0) return 0;
  const logged = await rewrite.scheduledBodies(plain.map((d) => d.delivery_id));
  const bodies = new Map<string, string>();
  for (const d of plain) {
    const inLog = logged.get(d.delivery_id);
    bodies.set(d.delivery_id, inLog !== undefined && inLog !== d.body ? inLog : await data.sealBody(d.body));
  }
  return deliveries.replace(bodies);
}

/**
 * An erasure a cart recorded after this run began, once a batch had sealed that cart's events under
 * its key: the erasure may have looked for the cart's keys before this run made one. The keys are
 * destroyed under it, as the erasure would have.
 */
async function eraseRecordedSince(
  rewrite: EventDataRewrite,
  data: CustomerData,
  since: number,
  liveKeys: Map<string, Set<string>>,
  done: Set<string>,
): Promise<void> {
  if (liveKeys.size === 0) return;
  for (const [stream, recorded] of await rewrite.erasures(since)) {
    const keys = liveKeys.get(stream);
    const erasure = erasureAfter(recorded, since);
    if (!keys || !erasure) continue;
    const ids = [...keys].filter((k) => !done.has(k));
    if (ids.length === 0) continue;
    await data.keys.destroyKeys(ids, { erasure_id: erasure.erasure_id, erased_at: erasure.erased_at });
    for (const id of ids) done.add(id);
  }
}
