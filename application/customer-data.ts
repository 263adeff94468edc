/**
 * Customer personal data, crypto-shredded (docs/operations.md, "Customer data"; docs/write-side.md,
 * "Customer data in events"). The personal fields of the events that hold them are sealed, as they
 * enter the log, under their customer's own AES-256-GCM key, which the key store keeps wrapped by
 * `PDS_SECRET_KEY`; they are opened where the log is read. Once the key is destroyed they open as
 * erased: null fields, empty arrival answers, and webhook bodies with the customer left out.
 *
 * - `CartCustomerIdentified`: email, first and last name, phone number, DOB.
 * - `CurbsideArrivalPosted`: the arrival form's answers.
 * - `WebhookDeliveryScheduled`: the body, which renders the customer. It stays sealed in the
 *   dispatcher's working state and is opened by the one send path at each attempt (`openBody`).
 * - `IdempotentResponseRecorded`: an answer showing a cart's customer or an arrival's answers, which
 *   a retry replays (docs/write-side.md, "Idempotency").
 */
import { createHmac, type KeyObject, randomBytes } from 'node:crypto';
import type { NewEvent, RecordedEvent } from '../eventstore/port.ts';
import { createSecretBox, SecretBoxError } from './credentials.ts';
import type { CustomerKeyStore, StoredCustomerKey } from './customer-keys.ts';

const CUSTOMER_FIELDS = ['email', 'first_name', 'last_name', 'phone_number', 'DOB'] as const;
/** Where a sealed event keeps its personal fields: the key's id and the secret box token. */
export interface SealedPersonalData {
  key_id: string;
  box: string;
}
/** A sealed webhook body: this prefix, the key id, the box of the exact body, the body erased. */
const SEALED_BODY = 'pds-sealed-v1 ';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export interface ErasureTargets {
  key_ids: string[];
  cart_uuids: string[];
}

export interface CustomerData {
  /** The event as the log keeps it: its personal data sealed under its customer's key. */
  seal(streamId: string, event: NewEvent): Promise<NewEvent>;
  /** The event as its readers take it: opened, or erased when its key is gone. */
  open(event: RecordedEvent): Promise<RecordedEvent>;
  /**
   * A webhook body as its delivery keeps it, sealed when it shows a customer: the fan-out seals it
   * before scheduling, so that no working state ever holds it open.
   */
  sealBody(body: string): Promise<string>;
  /** A webhook body as it is sent: opened, or with the customer left out when the key is gone. */
  openBody(body: string): Promise<string>;
  /**
   * The keys and carts of the customer a user id, an email address or a cart uuid names, and of every
   * customer sharing a key's user id or email address with them.
   */
  resolve(target: string): Promise<ErasureTargets>;
  readonly keys: CustomerKeyStore;
}

const isSealed = (data: unknown): data is { personal: SealedPersonalData } =>
  typeof data === 'object' && data !== null && 'personal' in data;

/** Whether a value carries anything: null and '' say nothing about anyone. */
const present = (v: unknown) => v !== null && v !== undefined && v !== '';

export function createCustomerData(keys: CustomerKeyStore, secretKey: Buffer | KeyObject): CustomerData {
  const box = createSecretBox(secretKey);
  // The links by user id and email are keyed hashes: the key store never holds either value.
  const hashed = (kind: 'user' | 'email', value: string) =>
    `${kind}:${createHmac('sha256', secretKey).update(`customer-link:${kind}:${value}`).digest('base64url')}`;
  const userLink = (userId: unknown) => (present(userId) ? [hashed('user', String(userId))] : []);
  const emailLink = (email: unknown) =>
    typeof email === 'string' && email !== '' ? [hashed('email', email.trim().toLowerCase())] : [];
  const keyContext = (keyId: string) => `customer-key:${keyId}`;
  const dataContext = (keyId: string, type: string) => `customer:${keyId}:${type}`;

  /** The key that seals a cart's data: the cart's own, else its customer's, else a new one; linked to all. */
  async function keyFor(links: string[]): Promise<{ keyId: string; dataKey: Buffer }> {
    const found = await keys.keysLinkedTo(links);
    const cartLink = links[0];
    const chosen = found.find((k) => k.links.includes(cartLink)) ?? found[0];
    if (chosen) {
      const stored = await keys.key(chosen.key_id);
      if (stored) {
        if (links.some((l) => !chosen.links.includes(l))) await keys.link(stored, links);
        return { keyId: stored.key_id, dataKey: unwrap(stored) };
      }
    }
    const dataKey = randomBytes(32);
    const keyId = `ck_${randomBytes(12).toString('base64url')}`;
    const stored: StoredCustomerKey = {
      key_id: keyId,
      wrapped: box.encrypt(dataKey.toString('base64'), keyContext(keyId)),
      created_at: new Date().toISOString(),
    };
    await keys.link(stored, links);
    return { keyId, dataKey };
  }

  function unwrap(stored: StoredCustomerKey): Buffer {
    return Buffer.from(box.decrypt(stored.wrapped, keyContext(stored.key_id)), 'base64');
  }

  /** The plaintext a sealed value holds, or null when its key was destroyed. */
  async function unseal(sealed: SealedPersonalData, type: string): Promise<string | null> {
    const stored = await keys.key(sealed.key_id);
    if (!stored) return null;
    return createSecretBox(unwrap(stored)).decrypt(sealed.box, dataContext(sealed.key_id, type));
  }

  async function sealValue(links: string[], type: string, plaintext: string): Promise<SealedPersonalData> {
    const { keyId, dataKey } = await keyFor(links);
    return { key_id: keyId, box: createSecretBox(dataKey).encrypt(plaintext, dataContext(keyId, type)) };
  }

  async function seal(streamId: string, event: NewEvent): Promise<NewEvent> {
    const data = event.data as Record<string, unknown>;
    const cartLink = `cart:${streamId.slice('cart-'.length)}`;
    if (event.type === 'CartCustomerIdentified') {
      if (!CUSTOMER_FIELDS.some((f) => present(data[f]))) return event;
      const personal = Object.fromEntries(CUSTOMER_FIELDS.map((f) => [f, data[f] ?? null]));
      const rest = Object.fromEntries(Object.entries(data).filter(([k]) => !(k in personal)));
      const links = [cartLink, ...userLink(data.user_id), ...emailLink(data.email)];
      const sealed = await sealValue(links, event.type, JSON.stringify(personal));
      return { ...event, data: { ...rest, personal: sealed } };
    }
    if (event.type === 'CurbsideArrivalPosted') {
      const fields = (data.fields ?? {}) as Record<string, string>;
      if (Object.keys(fields).length === 0) return event;
      const links = [cartLink, ...userLink(data.user_id)];
      const sealed = await sealValue(links, event.type, JSON.stringify(fields));
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
      const sealed = await sealValue([`cart:${found.cartUuid}`], event.type, JSON.stringify(data.body));
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
    const sealed = await sealValue([`cart:${found.cartUuid}`], 'WebhookDeliveryScheduled', body);
    return `${SEALED_BODY}${sealed.key_id} ${sealed.box} ${JSON.stringify(found.erased)}`;
  }

  async function openBody(body: string): Promise<string> {
    if (!body.startsWith(SEALED_BODY)) return body;
    const [keyId, token] = body.slice(SEALED_BODY.length).split(' ', 2);
    const erased = body.slice(SEALED_BODY.length + keyId.length + token.length + 2);
    try {
      return (await unseal({ key_id: keyId, box: token }, 'WebhookDeliveryScheduled')) ?? erased;
    } catch (error) {
      if (error instanceof SecretBoxError) return erased;
      throw error;
    }
  }

  async function resolve(target: string): Promise<ErasureTargets> {
    const value = target.trim();
    let links: string[];
    if (UUID.test(value)) links = [`cart:${value.toLowerCase()}`];
    else if (value.includes('@')) links = emailLink(value);
    else links = userLink(value);
    const keyIds = new Set<string>();
    const carts = new Set<string>(links.filter((l) => l.startsWith('cart:')));
    const seen = new Set<string>(links);
    // A customer's keys share a user id or an email address: follow them until no new key turns up.
    while (links.length > 0) {
      const next: string[] = [];
      for (const k of await keys.keysLinkedTo(links)) {
        keyIds.add(k.key_id);
        for (const l of k.links) {
          if (seen.has(l)) continue;
          seen.add(l);
          next.push(l);
          if (l.startsWith('cart:')) carts.add(l);
        }
      }
      links = next;
    }
    return { key_ids: [...keyIds], cart_uuids: [...carts].map((l) => l.slice('cart:'.length)) };
  }

  return { seal, open, sealBody, openBody, resolve, keys };
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
