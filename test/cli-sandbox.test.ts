/**
 * The sandbox: the generator (deterministic, every cart status at any size), seeding through the
 * deciders (once, resumable, refusing a store with other data), `pds sandbox seed` and `traffic`
 * against a real service, and `pds serve` seeding on its first start and printing keys that work.
 */
import { execFile, spawn } from 'node:child_process';
import { createSecretKey } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import test, { type ExecutionContext } from 'ava';
import {
  CART_TARGETS,
  createRng,
  generateSandbox,
  sandboxCounts,
  sandboxPartnerIds,
} from '../cli/sandbox/generate.ts';
import { SANDBOX_STREAM, SandboxRefusedError, seedSandbox } from '../cli/sandbox/seed.ts';
import * as cart from '../domain/cart.ts';
import { manualClock } from '../domain/clock.ts';
import { fold } from '../domain/decider.ts';
import { eventRegistry } from '../domain/index.ts';
import type { EventStore } from '../eventstore/port.ts';
import { openSqliteEventStore } from '../eventstore/sqlite.ts';
import { startService, type TestService } from './support/service.ts';

const exec = promisify(execFile);
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const HOUR = 3_600_000;
const KEY = createSecretKey(Buffer.alloc(32, 3));
const API_KEY = /^pds_key_[A-Za-z0-9_-]{43}$/;

// biome-ignore lint/suspicious/noExplicitAny: parsed output is checked field by field
type Json = Record<string, any>;

async function tempStore(t: ExecutionContext): Promise<EventStore> {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-sandbox-'));
  const store = await openSqliteEventStore(path.join(dir, 'events.db'));
  t.teardown(async () => {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });
  return store;
}

async function pds(args: string[], env: Record<string, string>) {
  try {
    const { stdout, stderr } = await exec(process.execPath, ['cli/pds.ts', ...args], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', ...env },
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

async function eventually<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  timeoutMs = 15_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Every cart of the store folded from its events. */
async function cartStates(store: EventStore): Promise<cart.Cart[]> {
  const events = await store.readAll({ filter: { streamPrefixes: ['cart-'] } });
  const byStream = new Map<string, cart.CartEvent[]>();
  for (const e of events) {
    const list = byStream.get(e.streamId) ?? [];
    list.push(eventRegistry.parse(e.type, e.data, e.metadata.schema_version) as cart.CartEvent);
    byStream.set(e.streamId, list);
  }
  return [...byStream.values()].map((list) => fold(cart.decider, list) as cart.Cart);
}

/** A partner API GET with a key, until it answers 200 with a non-empty list (the read models lag a little). */
function listed(url: string, key: string, field: string): Promise<Json[]> {
  return eventually(`${url} to list ${field}`, async () => {
    const r = await fetch(url, { headers: { authorization: `Bearer ${key}` } });
    if (r.status !== 200) return undefined;
    const list = ((await r.json()) as Json)[field] as Json[];
    return list.length > 0 ? list : undefined;
  });
}

// ---------------------------------------------------------------------------------------------------
// The generator

test('the generator is deterministic, sized by stores, and plans every cart status at the smallest size', (t) => {
  const options = { seed: 7, size: 1, reference: '2026-03-01T12:00:00.000Z', abandonAfterMs: 6 * HOUR };
  const a = generateSandbox(options);
  t.deepEqual(generateSandbox(options), a);
  t.notDeepEqual(generateSandbox({ ...options, seed: 8 }).products, a.products);
  t.deepEqual(sandboxCounts(50), {
    stores: 50,
    brands: 40,
    products: 2000,
    menu_products: 30_000,
    reviews: 10_000,
    specials: 300,
    carts: 5000,
  });
  t.deepEqual(a.counts, sandboxCounts(1));
  t.is(a.carts.length, a.counts.carts);
  t.deepEqual([...new Set(a.carts.map((c) => c.target))].sort(), [...CART_TARGETS].sort());
  // Every time lies before the reference, and carts come in order of creation.
  const reference = Date.parse(options.reference);
  for (const c of a.carts)
    for (const s of c.steps) t.true(Date.parse(s.at) < reference, `${c.target} ${s.type}`);
  t.deepEqual(
    a.carts.map((c) => c.at),
    a.carts.map((c) => c.at).sort(),
  );
  // The partner ids depend on the seed alone.
  t.deepEqual(
    a.partners.map((p) => p.partner_id),
    Object.values(sandboxPartnerIds(7)),
  );
  t.deepEqual(
    generateSandbox({ ...options, size: 3 }).partners.map((p) => p.partner_id),
    Object.values(sandboxPartnerIds(7)),
  );
  const rng = createRng('x');
  t.regex(rng.uuid(), /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  t.throws(() => sandboxCounts(0), { instanceOf: RangeError });
});

// ---------------------------------------------------------------------------------------------------
// Seeding

test('seeding goes through the deciders once: every status, real moves, then nothing more to do', async (t) => {
  const store = await tempStore(t);
  const clock = manualClock('2026-03-01T12:00:00.000Z');
  const first = await seedSandbox({ store, secretKey: KEY, abandonAfterMs: 6 * HOUR, size: 1, clock });
  t.is(first.outcome, 'seeded');
  const head = await store.headPosition();
  // Every event but the two markers was decided by an aggregate.
  t.is(first.events_written, head - 2);
  t.deepEqual(
    first.partners.map((p) => [p.kind, p.key_status]),
    [
      ['brand', 'active'],
      ['brand_feed', 'active'],
      ['store_operator', 'active'],
      ['store_menu_feed', 'active'],
    ],
  );
  for (const p of first.partners) t.regex(p.api_key ?? '', API_KEY);

  const carts = await cartStates(store);
  t.is(carts.length, first.counts.carts);
  t.deepEqual([...new Set(carts.map((c) => c.status))].sort(), [...cart.cartStatuses].sort());
  t.true(carts.some((c) => c.abandoned_at !== null && c.checked_out_at === null));
  t.true(carts.some((c) => c.curbside_arrivals.length > 0));
  t.true(
    carts.some((c) => c.lines.some((l) => l.special_id !== null)),
    'some lines are priced by a special',
  );
  t.true(carts.every((c) => c.rating === 0 || c.status === 'with_review'));
  // Each event carries the actor and time of its own step, as an auditor reads them.
  const actors = new Map<string, Set<string>>();
  for (const e of await store.readAll({ filter: { streamPrefixes: ['cart-'] } })) {
    actors.set(e.type, (actors.get(e.type) ?? new Set()).add(e.metadata.actor.type));
    if ('added_at' in (e.data as Json)) t.is(e.metadata.occurred_at, (e.data as Json).added_at);
  }
  t.deepEqual([...(actors.get('CartAbandoned') ?? [])], ['system']);
  t.deepEqual([...(actors.get('CurbsideArrivalPosted') ?? [])], ['partner']);
  t.deepEqual([...(actors.get('CartCheckedOut') ?? [])], ['platform']);

  const again = await seedSandbox({ store, secretKey: KEY, abandonAfterMs: 6 * HOUR, size: 5, clock });
  t.is(again.outcome, 'already_seeded');
  t.is(again.size, 1);
  t.is(await store.headPosition(), head);
  t.deepEqual(
    again.partners.map((p) => p.api_key),
    first.partners.map((p) => p.api_key),
  );
});

test('an interrupted seeding resumes with its recorded parameters and ends as one run would', async (t) => {
  const clock = manualClock('2026-03-01T12:00:00.000Z');
  const whole = await tempStore(t);
  const once = await seedSandbox({ store: whole, secretKey: KEY, abandonAfterMs: 6 * HOUR, size: 3, clock });

  const store = await tempStore(t);
  const abort = new AbortController();
  await t.throwsAsync(
    seedSandbox({
      store,
      secretKey: KEY,
      abandonAfterMs: 6 * HOUR,
      size: 3,
      clock,
      signal: abort.signal,
      // Reported after the first chunk of carts: the next chunk is not written.
      onProgress: ({ phase }) => {
        if (phase === 'carts') abort.abort();
      },
    }),
    { name: 'AbortError' },
  );
  const stopped = await store.headPosition();
  t.true(stopped > 0 && stopped < (await whole.headPosition()));

  clock.advance(HOUR);
  const resumed = await seedSandbox({ store, secretKey: KEY, abandonAfterMs: 6 * HOUR, size: 9, clock });
  t.is(resumed.outcome, 'seeded');
  t.is(resumed.size, 3);
  // The carts of the first chunk were written before the stop, and are left as they are.
  t.true(resumed.carts_skipped > 0 && resumed.carts_skipped < resumed.counts.carts);
  t.is(resumed.reference_time, once.reference_time);
  t.is(await store.headPosition(), await whole.headPosition());
  t.deepEqual(
    (await cartStates(store)).map((c) => [c.uuid, c.status, c.lines.length]),
    (await cartStates(whole)).map((c) => [c.uuid, c.status, c.lines.length]),
  );
});

test('a store holding data of its own is not seeded over', async (t) => {
  const store = await tempStore(t);
  await store.append('brand-1', [
    {
      type: 'BrandUpserted',
      data: { brand_id: 1, name: 'Mine', upserted_at: '2026-01-01T00:00:00.000Z' },
      metadata: {
        correlation_id: 'c',
        causation_id: null,
        actor: { type: 'platform', id: 'platform' },
        occurred_at: '2026-01-01T00:00:00.000Z',
        schema_version: 1,
      },
    },
  ]);
  await t.throwsAsync(seedSandbox({ store, secretKey: KEY, abandonAfterMs: 6 * HOUR, size: 1 }), {
    instanceOf: SandboxRefusedError,
  });
  await t.throwsAsync(store.readStream(SANDBOX_STREAM));
});

// ---------------------------------------------------------------------------------------------------
// `pds sandbox seed` and `pds sandbox traffic` against a running service

async function seeded(t: ExecutionContext, size = 1): Promise<{ s: TestService; out: Json }> {
  const s = await startService(t);
  const run = await pds(['sandbox', 'seed', '--size', String(size), '--json'], {
    PDS_DATA_DIR: s.dataDir,
    PDS_URL: s.base,
  });
  t.is(run.code, 0, run.stderr);
  return { s, out: JSON.parse(run.stdout) as Json };
}

test('pds sandbox seed: the printed keys read sandbox data from each partner API; a rerun seeds nothing', async (t) => {
  const { s, out } = await seeded(t, 2);
  t.is(out.outcome, 'seeded');
  t.is(out.counts.stores, 2);
  t.is(out.docs_url, `${s.base}/docs`);
  const key = (kind: string) => (out.partners as Json[]).find((p) => p.kind === kind)?.api_key as string;

  // The sample request, as printed: the store operator's menu at store 1.
  t.is(out.sample_request.api_key, key('store_operator'));
  const menu = await listed(out.sample_request.url, out.sample_request.api_key, 'menu_products');
  t.is(menu.length, 3);
  t.true(menu.every((m) => m.store_id === 1 && m.available_weights.length > 0));

  // Each kind's key, each answer checked against its API's OpenAPI document.
  await listed(`${s.base}/partner/brand/v1/stores`, key('brand'), 'stores');
  const near = await s.partnerCall<Json>(
    '/partner/brand/v1',
    'GET',
    '/products?zipcode=80202&radius=25',
    key('brand'),
  );
  t.is(near.status, 200);
  t.true(near.body.products.length > 0, 'store 1 is in Denver 80202');
  const reviews = await s.partnerCall<Json>(
    '/partner/brand-feed/v1',
    'GET',
    '/reviews?limit=5',
    key('brand_feed'),
  );
  t.is(reviews.body.reviews.length, 5);
  const carts = await s.partnerCall<Json>(
    '/partner/store/v1',
    'GET',
    '/carts?store_id=1',
    key('store_operator'),
  );
  t.is(carts.status, 200);
  t.true(carts.body.carts.length > 0, 'carts from the operator’s own site');
  const specials = await s.partnerCall<Json>(
    '/partner/store-menu-feed/v1',
    'GET',
    '/specials?store_id=2',
    key('store_menu_feed'),
  );
  t.true(specials.body.specials.length > 0);

  // Seeded once: a rerun prints the same keys, as text too.
  const head = await (await s.openStore()).headPosition();
  const rerun = await pds(['sandbox', 'seed'], { PDS_DATA_DIR: s.dataDir, PDS_URL: s.base });
  t.is(rerun.code, 0, rerun.stderr);
  t.regex(rerun.stdout, /^sandbox: seeded before \(seed 1, size 2, at /m);
  t.true(rerun.stdout.includes(key('brand_feed')));
  t.regex(
    rerun.stdout,
    new RegExp(
      `^try: curl -H 'Authorization: Bearer ${key('store_operator')}' '${s.base}/partner/store/v1/menu_products\\?store_id=1&limit=3'$`,
      'm',
    ),
  );
  t.is(await (await s.openStore()).headPosition(), head);

  // A revoked sandbox key is never printed again.
  const brand = (out.partners as Json[]).find((p) => p.kind === 'brand') as Json;
  const revoked = await s.call('DELETE', `/admin/v1/partners/${brand.partner_id}/keys/${brand.key_id}`);
  t.is(revoked.status, 200);
  const after = JSON.parse(
    (await pds(['sandbox', 'seed', '--json'], { PDS_DATA_DIR: s.dataDir })).stdout,
  ) as Json;
  const shown = (after.partners as Json[]).find((p) => p.kind === 'brand') as Json;
  t.is(shown.api_key, null);
  t.is(shown.key_status, 'revoked');
});

test('pds sandbox seed refuses a store with other data (exit 4) and a bad size (exit 2)', async (t) => {
  const s = await startService(t);
  const put = await s.call('PUT', '/platform/v1/brands/1', { name: 'Not the sandbox' });
  t.is(put.status, 201);
  const refused = await pds(['sandbox', 'seed', '--size', '1'], { PDS_DATA_DIR: s.dataDir });
  t.is(refused.code, 4);
  t.regex(refused.stderr, /not the sandbox’s; not seeding over them/);
  const bad = await pds(['sandbox', 'seed', '--size', '0'], { PDS_DATA_DIR: s.dataDir });
  t.is(bad.code, 2);
  t.regex(bad.stderr, /--size: expected a whole number from 1 to 500/);
});

test('pds sandbox traffic: carts created, filled, checked out and moved through the platform API', async (t) => {
  const { s, out } = await seeded(t, 1);
  await listed(out.sample_request.url, out.sample_request.api_key, 'menu_products');
  const run = await pds(['sandbox', 'traffic', '--rate', '40/s', '--duration', '2s', '--json'], {
    PDS_URL: s.base,
    PDS_OPERATOR_TOKEN: s.token,
  });
  t.is(run.code, 0, run.stderr);
  const summary = JSON.parse(run.stdout) as Json;
  t.is(summary.failed, 0, JSON.stringify(summary.failures));
  t.true(summary.requests >= 40, `${summary.requests} requests`);
  t.is(summary.requests, summary.ok + summary.refused + summary.failed, 'every request counted once');
  t.true(summary.carts.created > 0);
  t.true(summary.carts.items_added > 0);

  // The traffic's own key was revoked at the end; the sandbox key still works.
  const feed = (out.partners as Json[]).find((p) => p.kind === 'store_menu_feed') as Json;
  const partner = (await (await s.call('GET', `/admin/v1/partners/${feed.partner_id}`)).json()) as Json;
  const keys = partner.partner.keys as Json[];
  t.is(keys.length, 2);
  t.deepEqual(
    keys.map((k) => [k.key_id === feed.key_id, k.status]),
    [
      [true, 'active'],
      [false, 'revoked'],
    ],
  );

  const usage = await pds(['sandbox', 'traffic', '--rate', 'fast'], {
    PDS_URL: s.base,
    PDS_OPERATOR_TOKEN: s.token,
  });
  t.is(usage.code, 2);
  const missing = await pds(['sandbox', 'traffic', '--seed', '99', '--duration', '1s'], {
    PDS_URL: s.base,
    PDS_OPERATOR_TOKEN: s.token,
  });
  t.is(missing.code, 3);
  t.regex(missing.stderr, /no sandbox \(seed 99\)/);
});

// ---------------------------------------------------------------------------------------------------
// `pds serve` with PDS_SANDBOX=1, as `npm start` runs it

function serve(t: ExecutionContext, dataDir: string) {
  const child = spawn(process.execPath, ['cli/pds.ts', 'serve'], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? '',
      PORT: '0',
      PDS_DATA_DIR: dataDir,
      PDS_SANDBOX: '1',
      PDS_SANDBOX_SIZE: '1',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  const exited = once(child, 'exit').then(([code]) => code as number | null);
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  const curl = () =>
    eventually(
      'the sandbox banner',
      async () => {
        if (child.exitCode !== null) throw new Error(`exited with ${child.exitCode}: ${stderr}`);
        const m = /^pds: try: curl -H 'Authorization: Bearer (pds_key_\S+)' '(http:\/\/\S+)'$/m.exec(stdout);
        return m ? { key: m[1], url: m[2] } : undefined;
      },
      25_000,
    );
  return { child, stdout: () => stdout, stderr: () => stderr, exited, curl };
}

test('pds serve with PDS_SANDBOX=1 seeds on first start and prints keys that work; a restart reseeds nothing', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-sandbox-serve-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));

  const first = serve(t, dir);
  const { key, url } = await first.curl();
  const port = new URL(url).port;
  const out = first.stdout();
  t.regex(out, new RegExp(`^pds: sandbox ready at http://localhost:${port}$`, 'm'));
  t.regex(out, new RegExp(`^pds: docs: http://localhost:${port}/docs$`, 'm'));
  t.regex(out, /^pds: operator token \(generated into .*operator-token\): \S{43}$/m);
  for (const kind of ['brand', 'brand_feed', 'store_operator', 'store_menu_feed']) {
    t.regex(out, new RegExp(`^pds: {3}${kind} +pds_key_[A-Za-z0-9_-]{43} `, 'm'), kind);
  }
  // The printed request, as printed: answered with sandbox data at once.
  const answer = await fetch(url, { headers: { authorization: `Bearer ${key}` } });
  t.is(answer.status, 200);
  const body = (await answer.json()) as Json;
  t.is(body.menu_products.length, 3);
  // Keys go to the terminal only, never into a log line.
  const logs = out.split('\n').filter((line) => line.startsWith('{'));
  t.true(logs.some((line) => line.includes('"msg":"sandbox seeded"')));
  t.false(logs.some((line) => line.includes('pds_key_')));

  first.child.kill('SIGTERM');
  t.is(await first.exited, 0);
  t.is(first.stderr(), '');

  const second = serve(t, dir);
  const again = await second.curl();
  t.is(again.key, key);
  t.regex(second.stdout(), /^pds: sandbox: seeded before \(seed 1, size 1, at /m);
  t.false(second.stdout().includes('"msg":"sandbox seeded"'));
  second.child.kill('SIGTERM');
  t.is(await second.exited, 0);
});
