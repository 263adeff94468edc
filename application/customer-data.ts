/**
 * Customer personal data, crypto-shredded (docs/operations.md, "Customer data"; docs/write-side.md,
 * "Customer data in events"). The personal fields of the events that hold them are sealed, as they
 * enter the log, under their cart's own AES-256-GCM key (`customer-key-ring.ts`), which the key store
 * keeps wrapped by `PDS_SECRET_KEY`; they are opened where the log is read. Once an erasure has
 * destroyed the key (its tombstone says so) they open as erased: null fields, empty arrival answers,
 * and webhook bodies with the customer left out. A key neither there nor tombstoned
 * (`CustomerKeyMissing`), or a box that does not open, is a fault, never "erased": `open` and
 * `openBody` throw, and their reader tries again later.
 *
 * - `CartCustomerIdentified`: email, first and last name, phone number, DOB.
 * - `CurbsideArrivalPosted`: the arrival form's answers.
 * - `WebhookDeliveryScheduled`: the body, which renders the customer. It stays sealed in the
 *   dispatcher's working state and is opened by the one send path at each attempt (`openBody`).
 * - `IdempotentResponseRecorded`: an answer showing a cart's customer or an arrival's answers, which
 *   a retry replays (docs/write-side.md, "Idempotency").
 */
import type { KeyObject } from 'node:crypto';
import { z } from 'zod';
import type { NewEvent, RecordedEvent } from '../eventstore/port.ts';
import { createSecretBox } from './credentials.ts';
import { type CustomerDataOptions, createKeyRing, present } from './customer-key-ring.ts';
import type { CustomerKeyStore } from './customer-keys.ts';

export { type CustomerDataOptions, KEY_CACHE_TTL_MS } from './customer-key-ring.ts';

const CUSTOMER_FIELDS = ['email', 'first_name', 'last_name', 'phone_number', 'DOB'] as const;
/** Where a sealed event keeps its personal fields: the key's id and the secret box token. */
export interface SealedPersonalData {
  key_id: string;
  box: string;
}
/** A sealed webhook body: this prefix, the key id, the box of the exact body, the body erased. */
const SEALED_BODY = 'pds-sealed-v1 ';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** A cart's user id: a positive integer (docs/partner-api.md's `user_id`). */
const USER_ID = /^[1-9]\d{0,15}$/;
/** An email address as identifying a customer accepts it. */
const EMAIL = z.email().max(254);

/** The user id a target names, or null (an email address, a cart uuid). */
export function userIdOf(target: string): number | null {
  const value = target.trim();
  return USER_ID.test(value) && Number(value) <= Number.MAX_SAFE_INTEGER ? Number(value) : null;
}

/**
 * Why a target of an erasure or an export names nothing it could (a typo, which would otherwise erase
 * nothing and answer as if done), or null for a user id, an email address or a cart uuid.
 */
export function targetProblem(target: string): string | null {
  const value = target.trim();
  if (UUID.test(value)) return null;
  if (value.includes('@')) return EMAIL.safeParse(value).success ? null : 'is not an email address';
  if (userIdOf(value) !== null) return null;
  return 'is neither a user id (a positive integer), an email address nor a cart uuid';
}

export interface ErasureTargets {
  key_ids: string[];
  cart_uuids: string[];
}

export interface CustomerData {
  /** The event as the log keeps it: its personal data sealed under its cart's key. */
  seal(streamId: string, event: NewEvent): Promise<NewEvent>;
  /** The event as its readers take it: opened, or erased when an erasure destroyed its key. */
  open(event: RecordedEvent): Promise<RecordedEvent>;
  /**
   * A webhook body as its delivery keeps it, sealed when it shows a customer: the fan-out seals it
   * before scheduling, so that no working state ever holds it open.
   */
  sealBody(body: string): Promise<string>;
  /** A webhook body as it is sent: opened, or with the customer left out when its key was erased. */
  openBody(body: string): Promise<string>;
  /**
   * The keys and carts each target names directly: a user id, the carts identified with that user
   * id; an email address, the carts identified with that email; a cart uuid, that cart.
   */
  resolve(targets: string | readonly string[]): Promise<ErasureTargets>;
  /**
   * The carts whose key links this email address or phone number (each given one must be linked):
   * every cart identified with it since its key was made and not erased since. A key keeps the links
   * of every customer its cart was identified with, so the caller checks the cart's customer now.
   * With `last`, only the carts of the last `last` keys made for the email (for the phone number when
   * no email is given): one key per cart, so at most `last` carts, and the key store reads no more.
   */
  cartsLinkedTo(customer: { email?: string; phone?: string }, last?: number): Promise<string[]>;
  /** The key store; destroying keys through it also forgets them in this process at once. */
  readonly keys: CustomerKeyStore;
}

const isSealed = (data: unknown): data is { personal: SealedPersonalData } =>
  typeof data === 'object' && data !== null && 'personal' in data;

export function createCustomerData(
  store: CustomerKeyStore,
  secretKey: Buffer | KeyObject,
  options: CustomerDataOptions = {},
): CustomerData {
  const { keys, dataKey, keyFor, derivedKeyFor, userLink, emailLink, phoneLink } = createKeyRing(
    store,
    secretKey,
    options,
  );
  const dataContext = (keyId: string, type: string) => `customer:${keyId}:${type}`;

  /** The plaintext a sealed value holds, or null when an erasure destroyed its key. */
  async function unseal(sealed: SealedPersonalData, type: string, fresh = false): Promise<string | null> {
    const key = await dataKey(sealed.key_id, { fresh });
    if (key === 'erased') return null;
    return createSecretBox(key).decrypt(sealed.box, dataContext(sealed.key_id, type));
  }

  /**
   * Data derived from a cart's customer (a webhook body, a recorded answer) sealed under the cart's
   * key; null when that key was erased (only the erased form may then be kept).
   */
  async function sealDerived(
    cartUuid: string,
    type: string,
    plaintext: string,
  ): Promise<SealedPersonalData | null> {
    const found = await derivedKeyFor(cartUuid);
    if (found === 'erased') return null;
    return {
      key_id: found.keyId,
      box: createSecretBox(found.key).encrypt(plaintext, dataContext(found.keyId, type)),
    };
  }

  async function sealValue(
    cartUuid: string,
    identities: string[],
    type: string,
    plaintext: string,
  ): Promise<SealedPersonalData> {
    const { keyId, key } = await keyFor(cartUuid, identities);
    return { key_id: keyId, box: createSecretBox(key).encrypt(plaintext, dataContext(keyId, type)) };
  }

  async function seal(streamId: string, event: NewEvent): Promise<NewEvent> {
    const data = event.data as Record<string, unknown>;
    const cartUuid = streamId.slice('cart-'.length);
    if (event.type === 'CartCustomerIdentified') {
      if (!CUSTOMER_FIELDS.some((f) => present(data[f]))) return event;
      const personal = Object.fromEntries(CUSTOMER_FIELDS.map((f) => [f, data[f] ?? null]));
      const rest = Object.fromEntries(Object.entries(data).filter(([k]) => !(k in personal)));
      const identities = [
        ...userLink(data.user_id),
        ...emailLink(data.email),
        ...phoneLink(data.phone_number),
      ];
      const sealed = await sealValue(cartUuid, identities, event.type, JSON.stringify(personal));
      return { ...event, data: { ...rest, personal: sealed } };
    }
    if (event.type === 'CurbsideArrivalPosted') {
      const fields = (data.fields ?? {}) as Record<string, string>;
      if (Object.keys(fields).length === 0) return event;
      const sealed = await sealValue(cartUuid, userLink(data.user_id), event.type, JSON.stringify(fields));
      const { fields: _fields, ...rest } = data;
      return { ...event, data: { ...rest, personal: sealed } };
    }
    if (event.type === 'WebhookDeliveryScheduled' && typeof data.body === 'string') {
      const body = await sealBody(data.body);
      return body === data.body ? event : { ...event, data: { ...data, body } };
    }
    if (event.type === 'IdempotentResponseRecorded') {
      // The answer a retry replays: a cart's record or an arrival shows the customer too.
      const found = withoutCustomer(data.body);
      if (found === null) return event;
      const sealed = await sealDerived(found.cartUuid, event.type, JSON.stringify(data.body));
      if (sealed === null) return { ...event, data: { ...data, body: found.erased } };
      return { ...event, data: { ...data, body: found.erased, personal: sealed } };
    }
    return event;
  }

  async function open(event: RecordedEvent): Promise<RecordedEvent> {
    if (!isSealed(event.data)) return event;
    const { personal, ...rest } = event.data as { personal: SealedPersonalData } & Record<string, unknown>;
    const text = await unseal(personal, event.type);
    if (event.type === 'CartCustomerIdentified') {
      const fields =
        text === null
          ? { ...Object.fromEntries(CUSTOMER_FIELDS.map((f) => [f, null])), erased: true }
          : JSON.parse(text);
      return { ...event, data: { ...rest, ...fields } };
    }
    if (event.type === 'CurbsideArrivalPosted') {
      const fields = text === null ? { fields: {}, erased: true } : { fields: JSON.parse(text) };
      return { ...event, data: { ...rest, ...fields } };
    }
    // A recorded answer: the one the customer's data was in, or the one without it.
    return { ...event, data: text === null ? rest : { ...rest, body: JSON.parse(text) } };
  }

  async function sealBody(body: string): Promise<string> {
    if (body.startsWith(SEALED_BODY)) return body;
    const found = withoutCustomer(JSON.parse(body));
    if (found === null) return body;
    const sealed = await sealDerived(found.cartUuid, 'WebhookDeliveryScheduled', body);
    // Rendered before its cart's customer was erased, sealed after: only the erased form is kept.
    if (sealed === null) return JSON.stringify(found.erased);
    return `${SEALED_BODY}${sealed.key_id} ${sealed.box} ${JSON.stringify(found.erased)}`;
  }

  async function openBody(body: string): Promise<string> {
    if (!body.startsWith(SEALED_BODY)) return body;
    const [keyId, token] = body.slice(SEALED_BODY.length).split(' ', 2);
    const erased = body.slice(SEALED_BODY.length + keyId.length + token.length + 2);
    // A box that does not open (a damaged token, another PDS_SECRET_KEY) throws: only a tombstone
    // sends the body without its customer. Whether there is one is asked of the key store at each
    // attempt, not of this process's cache: an erasure answered elsewhere holds from then on.
    return (await unseal({ key_id: keyId, box: token }, 'WebhookDeliveryScheduled', true)) ?? erased;
  }

  /** The link a target names: a cart uuid, an email address (it has an @), else a user id. */
  function linkOf(target: string): string[] {
    const value = target.trim();
    if (UUID.test(value)) return [`cart:${value.toLowerCase()}`];
    if (value.includes('@')) return emailLink(value);
    return userLink(value);
  }

  async function resolve(targets: string | readonly string[]): Promise<ErasureTargets> {
    const links = [...new Set((typeof targets === 'string' ? [targets] : targets).flatMap(linkOf))];
    const keyIds = new Set<string>();
    const carts = new Set<string>(links.filter((l) => l.startsWith('cart:')));
    // Direct links only: a key's other identities name other people's carts as often as this one's.
    for (const k of await store.keysLinkedTo(links)) {
      keyIds.add(k.key_id);
      for (const l of k.links) if (l.startsWith('cart:')) carts.add(l);
    }
    return { key_ids: [...keyIds], cart_uuids: [...carts].map((l) => l.slice('cart:'.length)) };
  }

  const cartsLinkedTo = ({ email, phone }: { email?: string; phone?: string }, last?: number) =>
    linkedCarts(store, [...linksOfValue(email, emailLink), ...linksOfValue(phone, phoneLink)], last);

  return { seal, open, sealBody, openBody, resolve, cartsLinkedTo, keys };
}

/** The links of a value given (none when it is not given). */
const linksOfValue = (value: string | undefined, linkOf: (value: string) => string[]) =>
  value === undefined ? [] : [linkOf(value)];

/**
 * The carts of the keys linked to every one of `wanted` (each the link of one value, none for a value
 * that links nothing: then no cart).
 */
async function linkedCarts(
  store: CustomerKeyStore,
  wanted: string[][],
  last: number | undefined,
): Promise<string[]> {
  if (wanted.length === 0 || wanted.some((l) => l.length === 0)) return [];
  const links = wanted.map((l) => l[0]);
  const carts = new Set<string>();
  for (const k of await store.keysLinkedTo([links[0]], last)) {
    if (!links.every((l) => k.links.includes(l))) continue;
    for (const l of k.links) if (l.startsWith('cart:')) carts.add(l.slice('cart:'.length));
  }
  return [...carts];
}

/** Personal values shorter than this name no one, and striking them would strike ordinary text. */
const MIN_PERSONAL_VALUE = 3;

/**
 * The customer's values a webhook body or an answer shows (the shapes of `withoutCustomer`): email,
 * phone number, names (whole and each part), date of birth, the arrival's answers. What a receiver
 * echoes of them is struck from what it answered (`webhooks/send.ts`).
 */
export function customerValues(value: unknown): string[] {
  const found = withoutCustomer(value);
  if (found === null) return [];
  const v = value as {
    customer?: Record<string, unknown> | null;
    cart?: Record<string, unknown>;
    curbside_arrival?: { fields?: Record<string, unknown> };
  };
  const values = [
    ...Object.values(v.customer ?? {}),
    v.cart?.customer_phone_number,
    v.cart?.customer_email_address,
    v.cart?.customer_name,
    ...Object.values(v.curbside_arrival?.fields ?? {}),
  ].filter((x): x is string => typeof x === 'string');
  const parts = values.flatMap((x) => [x, ...x.split(/\s+/)]);
  return [...new Set(parts.map((x) => x.trim()))].filter((x) => x.length >= MIN_PERSONAL_VALUE);
}

/**
 * An answer or a webhook body with its customer left out, and the cart it is of; null when it shows no
 * customer (nothing to seal). The shapes: a webhook's or a platform answer's `cart` record (phone and
 * email blank, name null), the `cart_abandoned` `customer` (null), a partner's `curbside_arrival`
 * (its `fields` empty).
 */
export function withoutCustomer(value: unknown): { cartUuid: string; erased: unknown } | null {
  if (typeof value !== 'object' || value === null) return null;
  const v = value as {
    customer?: unknown;
    cart?: {
      uuid?: unknown;
      customer_phone_number?: string;
      customer_email_address?: string;
      customer_name?: string | null;
    };
    curbside_arrival?: { reservation_uuid?: unknown; fields?: Record<string, string> };
  };
  const arrival = v.curbside_arrival;
  if (arrival && typeof arrival.reservation_uuid === 'string') {
    if (Object.keys(arrival.fields ?? {}).length === 0) return null;
    return {
      cartUuid: arrival.reservation_uuid,
      erased: { ...v, curbside_arrival: { ...arrival, fields: {} } },
    };
  }
  const c = v.cart;
  if (!c || typeof c.uuid !== 'string') return null;
  if (v.customer !== undefined) {
    return v.customer === null ? null : { cartUuid: c.uuid, erased: { ...v, customer: null } };
  }
  if (![c.customer_phone_number, c.customer_email_address, c.customer_name].some(present)) return null;
  return {
    cartUuid: c.uuid,
    erased: {
      ...v,
      cart: { ...c, customer_phone_number: '', customer_email_address: '', customer_name: null },
    },
  };
}
