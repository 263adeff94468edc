/**
 * What `npm start` does on a new machine, as a child process (docs/read-side.md): the first start seeds
 * the sandbox; `kill -9` stops it; the next start resumes every read model and follower from its
 * checkpoint in `read.db` (no read store created or replaced, nothing rebuilt) and then gives every
 * partner answer exactly as before. The time to `/readyz` is logged, not asserted: `npm run bench --
 * restart` measures it against a raw read of the log.
 */
import { createSecretKey } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { generateSandbox } from '../cli/sandbox/generate.ts';
import { sandboxApiKey } from '../cli/sandbox/seed.ts';
import { DEFAULT_SANDBOX_SEED } from '../cli/sandbox/sizes.ts';
import type { PartnerKind } from '../domain/partner.ts';
import { killChild, serveChild } from './support/child-service.ts';
import { npmStartArgs, npmStartEnv } from './support/npm-start.ts';

const SECRET_HEX = '5a'.repeat(32);
const SECRET = createSecretKey(Buffer.from(SECRET_HEX, 'hex'));

/**
 * `npm start` on `dataDir` with a size-2 sandbox, until `/readyz` 200 (then, if asked, until its output
 * shows `waitFor`), and how long it took to be ready.
 */
async function start(t: ExecutionContext, dataDir: string, waitFor?: RegExp) {
  const began = performance.now();
  const child = await serveChild(
    t,
    dataDir,
    {
      PDS_SECRET_KEY: SECRET_HEX,
      PDS_SANDBOX: '1',
      PDS_SANDBOX_SIZE: '2',
      LOG_LEVEL: 'info',
      ...npmStartEnv(),
    },
    npmStartArgs(),
  );
  const readyMs = performance.now() - began;
  const deadline = Date.now() + 120_000;
  while (waitFor && !waitFor.test(child.output())) {
    if (child.process.exitCode !== null || Date.now() > deadline) {
      throw new Error(`no ${waitFor}: ${child.output().slice(-3_000)}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  return { ...child, readyMs };
}

type Answers = Record<string, string>;

/**
 * Every GET of the four partner APIs with the sandbox keys: lists of 100, and the item routes with ids
 * taken from those lists. Status and body, byte for byte.
 */
async function partnerAnswers(base: string): Promise<Answers> {
  const out: Answers = {};
  const key = (kind: PartnerKind) => sandboxApiKey(SECRET, DEFAULT_SANDBOX_SEED, kind).api_key;
  const get = async (kind: PartnerKind, url: string): Promise<Record<string, unknown>> => {
    const res = await fetch(`${base}${url}`, { headers: { authorization: `Bearer ${key(kind)}` } });
    const text = await res.text();
    out[`${kind} ${url}`] = `${res.status} ${text}`;
    if (res.status !== 200) throw new Error(`${url}: ${res.status} ${text}`);
    return JSON.parse(text);
  };
  /** A field of the first record of a list answer (the list is the answer's array: `stores`, …). */
  const first = (page: Record<string, unknown>, field: string) => {
    const list = Object.values(page).find(Array.isArray) as Array<Record<string, unknown>> | undefined;
    const value = list?.[0]?.[field];
    if (value === undefined) throw new Error(`no ${field} in ${JSON.stringify(page).slice(0, 300)}`);
    return value;
  };

  // The radius searches around the first sandbox store's ZIP code (stores do not depend on the time).
  const [shop] = generateSandbox({
    seed: DEFAULT_SANDBOX_SEED,
    size: 2,
    reference: '2026-01-01T00:00:00Z',
    abandonAfterMs: 1,
  }).stores;
  const near = `zipcode=${shop.body.zip}&radius=100&limit=100`;
  const B = '/partner/brand/v1';
  await get('brand', `${B}/carts?limit=100`);
  await get('brand', `${B}/products?${near}`);
  await get('brand', `${B}/reviews?limit=100`);
  await get('brand', `${B}/specials?limit=100`);
  const stores = await get('brand', `${B}/stores?limit=100`);
  await get('brand', `${B}/stores/${first(stores, 'id')}/menu_products?limit=100`);

  const F = '/partner/brand-feed/v1';
  const reviews = await get('brand_feed', `${F}/reviews?limit=100`);
  await get('brand_feed', `${F}/products/${first(reviews, 'product_id')}/reviews?limit=100`);

  for (const [kind, S] of [
    ['store_operator', '/partner/store/v1'],
    ['store_menu_feed', '/partner/store-menu-feed/v1'],
  ] as const) {
    const q = 'store_id=1';
    if (kind === 'store_operator') await get(kind, `${S}/carts?${q}&limit=100`);
    const menu = await get(kind, `${S}/menu_products?${q}&limit=100`);
    await get(kind, `${S}/menu_products/${first(menu, 'id')}?${q}`);
    const productId = first(menu, 'product_id');
    await get(kind, `${S}/products/${productId}/recommendations?${q}`);
    await get(kind, `${S}/products/${productId}/reviews?${q}&limit=100`);
    await get(kind, `${S}/specials?${q}&limit=100`);
    await get(kind, `${S}/curbside_pickup_setting?${q}`);
  }
  return out;
}

test('npm start seeds the sandbox; after kill -9 the next start resumes from read.db and answers as before', async (t) => {
  t.timeout(180_000);
  const dataDir = await mkdtemp(path.join(tmpdir(), 'pds-restart-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));

  const first = await start(t, dataDir, /^pds: sandbox ready at /m);
  t.regex(first.output(), /read store created/);
  const before = await partnerAnswers(first.base);
  t.true(Object.keys(before).length >= 20);
  await killChild(first);

  const second = await start(t, dataDir, /^pds: sandbox: seeded before/m);
  t.log(
    `restart to /readyz 200: ${Math.round(second.readyMs)} ms (first start: ${Math.round(first.readyMs)} ms)`,
  );
  const log = second.output();
  // Resumed, not rebuilt: the file was opened as it was, and no projection was built again.
  t.notRegex(log, /(read|dispatcher) store (created|replaced)/);
  t.notRegex(log, /rebuil/i);
  const logged = (msg: string) =>
    log
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as { msg: string; resumed_after?: number })
      .find((line) => line.msg === msg);
  // The dispatcher's followers resumed after their checkpoints, not from the start of the log.
  t.true((logged('abandonment timers restored')?.resumed_after ?? 0) > 0);
  t.true((logged('webhook deliveries restored')?.resumed_after ?? 0) > 0);
  t.deepEqual(await partnerAnswers(second.base), before);
  await killChild(second);
});
