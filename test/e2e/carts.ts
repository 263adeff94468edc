/**
 * Carts as the platform drives them (docs/write-side.md, "Carts") and as partners then see them: in
 * their `/carts` lists (docs/partner-api.md, "Lists") and as `cart_status_updated` webhooks
 * (docs/webhooks.md, "Events and bodies"). Every read waits with a deadline: read models and webhooks
 * are eventually consistent.
 */
import { randomUUID } from 'node:crypto';
import { type Client, eventually, type Json, PLATFORM, page } from './http.ts';
import type { Delivery, Receiver } from './receiver.ts';

/** A new cart at `storeId` from the site of `partnerId`, with `count` grams of one menu product. */
export async function cartWithItem(
  api: Client,
  storeId: number,
  partnerId: string,
  menuProductId: number,
  count = 2,
): Promise<string> {
  const uuid = randomUUID();
  const created = await api.write('POST', `${PLATFORM}/carts`, {
    uuid,
    store_id: storeId,
    source: { channel: 'embedded', partner_id: partnerId },
  });
  if (created.cart?.uuid !== uuid || created.cart?.status !== 'pending') {
    throw new Error(`POST /carts answered ${JSON.stringify(created)}`);
  }
  await api.write('POST', `${PLATFORM}/carts/${uuid}/items`, {
    menu_product_id: menuProductId,
    price_id: 'gram',
    count,
  });
  return uuid;
}

export const identify = (api: Client, uuid: string) =>
  api.write('PUT', `${PLATFORM}/carts/${uuid}/customer`, {
    email: 'e2e@example.com',
    first_name: 'Ana',
    last_name: 'Lee',
    phone_number: '+1 303-555-0100',
  });

export const checkOut = (api: Client, uuid: string, mode: 'pickup' | 'curbside' = 'pickup') =>
  api.write('POST', `${PLATFORM}/carts/${uuid}/checkout`, {
    reservation_mode: mode,
    reservation_start_window: '2030-01-01 10:00',
  });

export const move = (api: Client, uuid: string, status: string, extra: Json = {}) =>
  api.write('POST', `${PLATFORM}/carts/${uuid}/status`, { status, ...extra });

/** Every cart of a partner's `/carts` list (all pages), by uuid. */
export async function partnerCarts(api: Client, key: string, path: string): Promise<Map<string, Json>> {
  const out = new Map<string, Json>();
  let next: string | null = path;
  for (let pages = 0; next !== null; pages++) {
    if (pages > 100) throw new Error(`${path}: more than 100 pages`);
    const r = await api.get(key, next);
    for (const c of page(r, 'carts')) out.set(c.uuid, c);
    const cursor: string | null = r.body.next_cursor;
    next = cursor === null ? null : `${path}${path.includes('?') ? '&' : '?'}cursor=${cursor}`;
  }
  return out;
}

/** Waits until the partner's list shows the cart with `status`, and answers that record. */
export function cartSeenBy(api: Client, key: string, path: string, uuid: string, status: string) {
  return eventually(`cart ${uuid} as ${status} in ${path}`, async () => {
    const found = (await partnerCarts(api, key, path)).get(uuid);
    return found?.status === status ? found : undefined;
  });
}

/** The deliveries to `path` about cart `uuid`, in arrival order. */
export const deliveriesOf = (receiver: Receiver, path: string, uuid: string): Delivery[] =>
  receiver.deliveries().filter((d) => d.path === path && d.body?.cart?.uuid === uuid);

/**
 * Waits for the webhook about cart `uuid` in `status` at `path` that verified; a delivery the receiver
 * refused (bad signature, token, timestamp) fails at once with the reason.
 */
export async function webhookFor(
  receiver: Receiver,
  path: string,
  uuid: string,
  status: string,
): Promise<Delivery> {
  const found = await eventually(
    `cart_status_updated ${status} of cart ${uuid} at ${path}`,
    async () => {
      const mine = deliveriesOf(receiver, path, uuid).filter((d) => d.body.cart.status === status);
      return mine.find((d) => d.refused !== null) ?? mine[0];
    },
    45_000,
  );
  if (found.refused !== null) throw new Error(`the receiver refused a delivery: ${found.refused}`);
  return found;
}
