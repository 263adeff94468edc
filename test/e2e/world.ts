/**
 * What the end-to-end suite sets up on the deployment before its flows, all over HTTP: a small catalog
 * of its own through the platform API (docs/write-side.md), partners of every kind the flows read
 * with through the admin API (docs/partner-api.md, "Keys and scope"), and webhook subscriptions
 * pointing at a receiver it starts (docs/webhooks.md, "Subscriptions").
 *
 * The ids are random per run, far above what a sandbox or a previous run uses, so the suite neither
 * depends on seeded data nor collides with it: a compose deployment starts empty, an embedded one may
 * hold the sandbox, a shared one anything.
 */
import { randomBytes, randomInt } from 'node:crypto';
import { ADMIN, type Client, type Json, PLATFORM } from './http.ts';
import { bindAddressFor, type Receiver, startReceiver } from './receiver.ts';

export interface Partner {
  partner_id: string;
  key_id: string;
  api_key: string;
}

export interface Subscription {
  webhook_id: string;
  path: string;
}

/** Two stores (only the first with curbside), two brands with one product each, and their listings. */
export interface Catalog {
  storeA: number;
  storeB: number;
  brandA: number;
  brandB: number;
  productA: number;
  productB: number;
  /** Product A at store A: 10.00 a gram. */
  menuAatA: number;
  /** Product B at store A. */
  menuBatA: number;
  /** Product A at store B. */
  menuAatB: number;
}

export interface World {
  catalog: Catalog;
  /** brand partners of brand A and of brand B */
  brandA: Partner;
  brandB: Partner;
  /** store operators of store A and of store B */
  operatorA: Partner;
  operatorB: Partner;
  /** a store menu feed of store A */
  feedA: Partner;
  receiver: Receiver;
  /** `cart_status_updated` of store A and of store B, each to its own path of the receiver */
  hooksA: Subscription;
  hooksB: Subscription;
}

/** Ids a run owns: a random block of 100 (at most 16 digits, as path ids allow). */
function catalogIds(): Catalog {
  const base = randomInt(1_000_000, 100_000_000) * 100;
  return {
    storeA: base + 1,
    storeB: base + 2,
    brandA: base + 1,
    brandB: base + 2,
    productA: base + 1,
    productB: base + 2,
    menuAatA: base + 11,
    menuBatA: base + 12,
    menuAatB: base + 21,
  };
}

async function seedCatalog(api: Client, c: Catalog): Promise<void> {
  for (const [id, name] of [
    [c.brandA, 'E2E Brand A'],
    [c.brandB, 'E2E Brand B'],
  ] as const) {
    await api.write('PUT', `${PLATFORM}/brands/${id}`, { name: `${name} ${id}` });
  }
  for (const [id, brand] of [
    [c.productA, c.brandA],
    [c.productB, c.brandB],
  ] as const) {
    await api.write('PUT', `${PLATFORM}/products/${id}`, {
      name: `E2E Flower ${id}`,
      brand_id: brand,
      kind: 'flower',
      lineage: 'hybrid',
      percent_thc: 20,
    });
  }
  for (const id of [c.storeA, c.storeB]) {
    await api.write('PUT', `${PLATFORM}/stores/${id}`, {
      name: `E2E Store ${id}`,
      address: '1 Market St',
      city: 'Denver',
      state: 'CO',
      zip: '80202',
      lat: 39.75,
      long: -104.99,
      pickup: true,
      curbside: id === c.storeA,
    });
  }
  // A curbside checkout and arrival need the store's curbside setting on
  // (docs/partner-api.md, "The curbside arrival").
  await api.write('PUT', `${PLATFORM}/stores/${c.storeA}/curbside_pickup_setting`, { enabled: true });
  for (const [store, id, product] of [
    [c.storeA, c.menuAatA, c.productA],
    [c.storeA, c.menuBatA, c.productB],
    [c.storeB, c.menuAatB, c.productA],
  ] as const) {
    await api.write('PUT', `${PLATFORM}/stores/${store}/menu_products/${id}`, {
      product_id: product,
      prices: { gram: '10.00', 'eighth ounce': '35.00' },
    });
  }
}

async function register(api: Client, name: string, scope: Json): Promise<Partner> {
  const out = await api.write('POST', `${ADMIN}/partners`, { name: `E2E ${name}`, ...scope });
  return { partner_id: out.partner.partner_id, key_id: out.partner.keys[0].key_id, api_key: out.api_key };
}

async function subscribe(api: Client, receiver: Receiver, path: string, storeId: number) {
  const authToken = `e2e-${randomBytes(16).toString('hex')}`;
  const out = await api.write('POST', `${ADMIN}/webhooks`, {
    url: receiver.urlOf(path),
    auth_token: authToken,
    store_ids: [storeId],
    events: ['cart_status_updated'],
  });
  receiver.expect(path, { authToken, secret: out.signing_secret });
  return { webhook_id: out.webhook.webhook_id as string, path };
}

/** Sets the world up; `cleanUp` later removes what would otherwise keep working on the deployment. */
export async function createWorld(api: Client): Promise<World> {
  const catalog = catalogIds();
  await seedCatalog(api, catalog);
  const host = api.target.receiverHost;
  const receiver = await startReceiver(host, process.env.PDS_E2E_RECEIVER_BIND || bindAddressFor(host));
  try {
    const run = randomBytes(4).toString('hex');
    return {
      catalog,
      brandA: await register(api, `brand A ${run}`, { kind: 'brand', brand_ids: [catalog.brandA] }),
      brandB: await register(api, `brand B ${run}`, { kind: 'brand', brand_ids: [catalog.brandB] }),
      operatorA: await register(api, `store A ${run}`, {
        kind: 'store_operator',
        store_ids: [catalog.storeA],
      }),
      operatorB: await register(api, `store B ${run}`, {
        kind: 'store_operator',
        store_ids: [catalog.storeB],
      }),
      feedA: await register(api, `feed A ${run}`, { kind: 'store_menu_feed', store_ids: [catalog.storeA] }),
      receiver,
      hooksA: await subscribe(api, receiver, `/hooks/${run}/a`, catalog.storeA),
      hooksB: await subscribe(api, receiver, `/hooks/${run}/b`, catalog.storeB),
    };
  } catch (error) {
    await receiver.close();
    throw error;
  }
}

/**
 * Removes the subscriptions (nothing keeps calling a receiver that is gone) and revokes the partners'
 * keys; the catalog stays, as the log is append-only. Best effort: a failure here is reported, not thrown.
 */
export async function cleanUp(api: Client, world: World): Promise<string[]> {
  const failures: string[] = [];
  const attempt = async (what: string, method: string, path: string) => {
    const r = await api.call(method, path).catch((error: Error) => ({ status: 0, text: error.message }));
    if (r.status < 200 || r.status >= 300) failures.push(`${what}: ${r.status} ${r.text.slice(0, 200)}`);
  };
  for (const hook of [world.hooksA, world.hooksB]) {
    await attempt(`remove webhook ${hook.webhook_id}`, 'DELETE', `${ADMIN}/webhooks/${hook.webhook_id}`);
  }
  for (const p of [world.brandA, world.brandB, world.operatorA, world.operatorB, world.feedA]) {
    await attempt(
      `revoke a key of ${p.partner_id}`,
      'DELETE',
      `${ADMIN}/partners/${p.partner_id}/keys/${p.key_id}`,
    );
  }
  await world.receiver.close();
  return failures;
}
