/**
 * No partner sees another's data (docs/partner-api.md, "Keys and scope"): carts only in the lists of
 * the partner whose site made them, another store's menu and reservations a 404 exactly as if they did
 * not exist, and a subscription gets only the carts of its stores (docs/webhooks.md, "Events and bodies").
 */
import type { ExecutionContext } from 'ava';
import { cartSeenBy, cartWithItem, checkOut, deliveriesOf, partnerCarts, webhookFor } from './carts.ts';
import { assertProblem, BRAND, type Client, STORE } from './http.ts';
import type { World } from './world.ts';

export async function isolation(t: ExecutionContext, a: Client, w: World): Promise<void> {
  const { catalog: c, operatorA, operatorB, brandA, brandB, receiver, hooksA, hooksB } = w;
  // One cart from each store operator's site, and one from brand A's site at store A.
  const cartA = await cartWithItem(a, c.storeA, operatorA.partner_id, c.menuAatA);
  const cartB = await cartWithItem(a, c.storeB, operatorB.partner_id, c.menuAatB);
  const cartOfBrand = await cartWithItem(a, c.storeA, brandA.partner_id, c.menuAatA);
  for (const uuid of [cartA, cartB, cartOfBrand]) await checkOut(a, uuid);

  // Each list shows its own cart; once it does, the others' carts are there too if they ever will be.
  await cartSeenBy(a, operatorA.api_key, `${STORE}/carts`, cartA, 'verification');
  await cartSeenBy(a, operatorB.api_key, `${STORE}/carts`, cartB, 'verification');
  await cartSeenBy(a, brandA.api_key, `${BRAND}/carts`, cartOfBrand, 'verification');
  const lists = [
    { who: 'store operator A', partner: operatorA, path: STORE },
    { who: 'store operator B', partner: operatorB, path: STORE },
    { who: 'brand A', partner: brandA, path: BRAND },
    { who: 'brand B', partner: brandB, path: BRAND },
  ];
  const sees: Record<string, string[]> = {};
  for (const { who, partner, path } of lists) {
    const carts = await partnerCarts(a, partner.api_key, `${path}/carts`);
    sees[who] = [cartA, cartB, cartOfBrand].filter((uuid) => carts.has(uuid));
    for (const cart of carts.values()) {
      t.is(cart.source.partner_id, partner.partner_id, `${who} lists only carts from its own site`);
    }
  }
  t.deepEqual(sees, {
    'store operator A': [cartA],
    'store operator B': [cartB],
    'brand A': [cartOfBrand],
    'brand B': [],
  });

  // Another store's data is a 404, as if it did not exist.
  const keyB = operatorB.api_key;
  assertProblem(
    t,
    'another store’s menu',
    await a.get(keyB, `${STORE}/menu_products?store_id=${c.storeA}`),
    404,
  );
  assertProblem(
    t,
    'another store’s menu product',
    await a.get(keyB, `${STORE}/menu_products/${c.menuAatA}`),
    404,
  );
  assertProblem(t, 'another store’s carts', await a.get(keyB, `${STORE}/carts?store_id=${c.storeA}`), 404);
  const arrival = await a.call('POST', `${STORE}/reservations/${cartA}/curbside_arrival`, {
    auth: keyB,
    body: { vehicle_make: 'Volvo', vehicle_color: 'red' },
  });
  assertProblem(t, 'an arrival at another store’s reservation', arrival, 404);
  // Brand B has nothing at store B: its menu there does not exist for brand B.
  const noMenu = await a.get(brandB.api_key, `${BRAND}/stores/${c.storeB}/menu_products`);
  assertProblem(t, 'a store without the brand’s products', noMenu, 404);

  // Each subscription gets the carts of its own store only: once both have their own checkout, the
  // other's would have arrived too.
  await webhookFor(receiver, hooksA.path, cartA, 'verification');
  await webhookFor(receiver, hooksA.path, cartOfBrand, 'verification');
  await webhookFor(receiver, hooksB.path, cartB, 'verification');
  t.deepEqual(deliveriesOf(receiver, hooksB.path, cartA), []);
  t.deepEqual(deliveriesOf(receiver, hooksB.path, cartOfBrand), []);
  t.deepEqual(deliveriesOf(receiver, hooksA.path, cartB), []);
}
