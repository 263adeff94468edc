/**
 * `pds sandbox …`: the sandbox data set and live traffic on it.
 *
 *   pds sandbox seed [--size <stores>] [--seed <n>] [--json]
 *   pds sandbox traffic [--rate 5/s] [--duration 30s] [--seed <n>] [--json]
 *
 * `seed` writes the sandbox straight into the event store the service's configuration names (the same
 * environment as `pds serve`: PDS_DATA_DIR, PDS_EVENT_STORE, PDS_SECRET_KEY, …), through the platform's
 * deciders; it is what `pds serve` does on a first start, for split deployments and scripts. Run again,
 * it seeds nothing and prints the keys again.
 *
 * `traffic` is a client of the running service (PDS_URL, PDS_OPERATOR_TOKEN): it creates carts through
 * the platform API, adds items, identifies customers, checks out and moves carts along the allowed
 * status moves, and leaves some carts idle, so abandonment and webhooks have something to do. It finds
 * the sandbox's menu through the store menu feed partner, with a key it issues for the run and revokes
 * at the end.
 */
import { SingleBar } from 'cli-progress';
import type { Command } from 'commander';
import { type CartStatus, type ReservationMode, reservationModes, statusMoves } from '../../domain/cart.ts';
import type { Weight } from '../../domain/schemas.ts';
import { openEventStore } from '../../eventstore/index.ts';
import { CliError, createAdminClient, EXIT } from '../client.ts';
import { ConfigError, loadConfig, parseDuration } from '../config.ts';
import { sandboxPartnerIds } from '../sandbox/generate.ts';
import {
  describeSandbox,
  SandboxRefusedError,
  sampleRequest,
  seedProgress,
  seedSandbox,
} from '../sandbox/seed.ts';
import { DEFAULT_SANDBOX_SEED, MAX_SANDBOX_SIZE } from '../sandbox/sizes.ts';
import { runClientCommand } from './run.ts';

const print = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`;

function positiveInteger(option: string, raw: string, max: number): number {
  if (!/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > max) {
    throw new CliError(
      `${option}: expected a whole number from 1 to ${max}, got ${JSON.stringify(raw)}`,
      EXIT.usage,
    );
  }
  return Number(raw);
}

/** `5/s`, `5`, `300/m`, `0.5/s` → requests per second. */
export function parseRate(raw: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(?:\/\s*(s|m|min|h))?\s*$/.exec(raw);
  const per = { s: 1, m: 60, min: 60, h: 3600 }[(m?.[2] ?? 's') as 's'];
  const rate = m ? Number(m[1]) / per : Number.NaN;
  if (!(rate > 0 && rate <= 1000)) {
    throw new CliError(
      `--rate: expected requests per second like 5/s or 300/m (at most 1000/s), got ${JSON.stringify(raw)}`,
      EXIT.usage,
    );
  }
  return rate;
}

// ---------------------------------------------------------------------------------------------------
// seed

async function seedCommand(options: { size?: string; seed?: string; json?: boolean }): Promise<string> {
  let config: Awaited<ReturnType<typeof loadConfig>>;
  try {
    config = await loadConfig(process.env);
  } catch (err) {
    if (err instanceof ConfigError) throw new CliError(`configuration error: ${err.message}`, EXIT.usage);
    throw err;
  }
  const size =
    options.size === undefined
      ? config.sandboxSize
      : positiveInteger('--size', options.size, MAX_SANDBOX_SIZE);
  const seed =
    options.seed === undefined ? DEFAULT_SANDBOX_SEED : positiveInteger('--seed', options.seed, 2 ** 31 - 1);
  const store = await openEventStore(config.eventStoreUrl);
  const progress = seedProgress({ bar: !options.json });
  try {
    const result = await seedSandbox({
      store,
      secretKey: config.secretKey,
      abandonAfterMs: config.abandonAfterMs,
      size,
      seed,
      onProgress: progress.onProgress,
    });
    const base = (process.env.PDS_URL?.trim() || `http://localhost:${config.port}`).replace(/\/+$/, '');
    if (options.json) {
      const sample = sampleRequest(result, base);
      return print({ ...result, docs_url: `${base}/docs`, sample_request: sample });
    }
    const note =
      result.size !== size && result.outcome === 'seeded'
        ? `(an interrupted seeding of size ${result.size} was finished; --size ${size} was not used)\n`
        : '';
    return `${note}${describeSandbox(result, base)}\n`;
  } catch (err) {
    if (err instanceof SandboxRefusedError) throw new CliError(err.message, EXIT.refused);
    throw err;
  } finally {
    progress.stop();
    await store.close();
  }
}

// ---------------------------------------------------------------------------------------------------
// traffic

interface LiveCart {
  uuid: string;
  store_id: number;
  status: CartStatus;
  mode: ReservationMode | null;
  lines: number[];
  customer: boolean;
  busy: boolean;
}

interface MenuEntry {
  id: number;
  available_weights: Weight[];
  in_stock: boolean;
}

export interface TrafficSummary {
  seconds: number;
  target_rate_per_second: number;
  requests: number;
  rate_per_second: number;
  ok: number;
  failed: number;
  carts: {
    created: number;
    items_added: number;
    customers_identified: number;
    checked_out: number;
    status_moves: number;
    reviewed: number;
    left_idle: number;
  };
  /** Failed requests by status and problem code. */
  failures: Record<string, number>;
}

const pick = <T>(items: readonly T[]): T => items[Math.floor(Math.random() * items.length)];
const chance = (p: number) => Math.random() < p;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

/** Where a status may go next (docs/write-side.md): the ready step depends on the reservation mode. */
function nextStatuses(c: LiveCart): CartStatus[] {
  return statusMoves[c.status].filter((to) =>
    c.status !== 'preparing'
      ? true
      : to === 'ready_for_pickup'
        ? c.mode !== 'delivery'
        : to === 'delivery_started'
          ? c.mode === 'delivery'
          : true,
  );
}

/** Forward moves are the common case; cancelling and dismissing happen now and then. */
function chooseMove(moves: CartStatus[]): CartStatus {
  const weight = (s: CartStatus) =>
    s === 'cancelled' ? 0.5 : s === 'dismissed' ? 0.3 : s === 'staff_member_review' ? 2 : 10;
  const total = moves.reduce((sum, s) => sum + weight(s), 0);
  let r = Math.random() * total;
  for (const s of moves) {
    r -= weight(s);
    if (r < 0) return s;
  }
  return moves[moves.length - 1];
}

async function trafficCommand(options: {
  rate: string;
  duration?: string;
  seed?: string;
  json?: boolean;
}): Promise<string> {
  const rate = parseRate(options.rate);
  let durationMs: number | undefined;
  if (options.duration !== undefined) {
    try {
      durationMs = parseDuration(options.duration);
    } catch (err) {
      throw new CliError(`--duration: ${(err as Error).message}`, EXIT.usage);
    }
    if (durationMs <= 0) throw new CliError('--duration: expected more than zero', EXIT.usage);
  }
  const seed =
    options.seed === undefined ? DEFAULT_SANDBOX_SEED : positiveInteger('--seed', options.seed, 2 ** 31 - 1);
  const client = await createAdminClient();
  const ids = sandboxPartnerIds(seed);

  type Partner = { partner_id: string; store_ids: number[] };
  const menuFeed = await client
    .request<{ partner: Partner }>('GET', `/admin/v1/partners/${ids.store_menu_feed}`)
    .catch((err: unknown) => {
      if (err instanceof CliError && err.exitCode === EXIT.notFound) {
        throw new CliError(
          `no sandbox (seed ${seed}) on ${client.baseUrl}: run pds sandbox seed first`,
          EXIT.notFound,
        );
      }
      throw err;
    });
  const operator = await client
    .request<{ partner: Partner }>('GET', `/admin/v1/partners/${ids.store_operator}`)
    .then((r) => r.partner)
    .catch(() => undefined);
  const stores = menuFeed.partner.store_ids;
  if (stores.length === 0) throw new CliError('the sandbox menu feed partner covers no store', EXIT.failed);

  const issued = await client.request<{ key: { key_id: string }; api_key: string }>(
    'POST',
    `/admin/v1/partners/${ids.store_menu_feed}/keys`,
    {},
  );
  const summary: TrafficSummary = {
    seconds: 0,
    target_rate_per_second: rate,
    requests: 0,
    rate_per_second: 0,
    ok: 0,
    failed: 0,
    carts: {
      created: 0,
      items_added: 0,
      customers_identified: 0,
      checked_out: 0,
      status_moves: 0,
      reviewed: 0,
      left_idle: 0,
    },
    failures: {},
  };
  const menus = new Map<number, Promise<MenuEntry[]>>();
  const modes = new Map<number, ReservationMode[]>();
  const carts: LiveCart[] = [];

  /** One platform request, counted; answers the body, or undefined when it was refused. */
  async function send<T>(method: string, path: string, body?: unknown): Promise<T | undefined> {
    summary.requests += 1;
    try {
      const out = await client.request<T>(method, `/platform/v1${path}`, body);
      summary.ok += 1;
      return out;
    } catch (err) {
      if (err instanceof CliError && err.exitCode === EXIT.unreachable) throw err;
      const problem = (err as CliError).problem as {
        status?: number;
        code?: string;
        available?: ReservationMode[];
      } | null;
      // A store that does not offer a mode says which it does: learn it, as a storefront would.
      if (problem?.code === 'reservation_mode_unavailable' && Array.isArray(problem.available)) {
        return { unavailable: problem.available } as T;
      }
      summary.failed += 1;
      const key = `${problem?.status ?? '?'} ${problem?.code ?? (err as Error).message}`;
      summary.failures[key] = (summary.failures[key] ?? 0) + 1;
      return undefined;
    }
  }

  function menuOf(storeId: number): Promise<MenuEntry[]> {
    let menu = menus.get(storeId);
    if (!menu) {
      menu = fetch(
        `${client.baseUrl}/partner/store-menu-feed/v1/menu_products?store_id=${storeId}&limit=200`,
        {
          headers: { authorization: `Bearer ${issued.api_key}` },
        },
      ).then(async (r) => {
        if (!r.ok) throw new CliError(`cannot read the menu of store ${storeId}: ${r.status}`, EXIT.failed);
        const page = (await r.json()) as { menu_products: MenuEntry[] };
        return page.menu_products.filter((m) => m.in_stock && m.available_weights.length > 0);
      });
      menus.set(storeId, menu);
    }
    return menu;
  }

  async function createCart(): Promise<void> {
    const storeId = pick(stores);
    const own = operator?.store_ids.includes(storeId) && chance(0.5);
    const out = await send<{ cart: { uuid: string } }>('POST', '/carts', {
      store_id: storeId,
      source: {
        channel: own ? 'headless' : pick(['embedded', 'headless']),
        partner_id: own ? operator?.partner_id : null,
      },
      user_id: chance(0.7) ? 10_000 + Math.floor(Math.random() * 90_000) : null,
    });
    if (!out) return;
    summary.carts.created += 1;
    carts.push({
      uuid: out.cart.uuid,
      store_id: storeId,
      status: 'pending',
      mode: null,
      lines: [],
      customer: false,
      busy: false,
    });
  }

  async function addItem(c: LiveCart): Promise<void> {
    const menu = (await menuOf(c.store_id)).filter((m) => !c.lines.includes(m.id));
    if (menu.length === 0) return;
    const m = pick(menu);
    const count = pick([1, 1, 1, 2, 3]);
    const out = await send('POST', `/carts/${c.uuid}/items`, {
      menu_product_id: m.id,
      price_id: pick(m.available_weights),
      count,
    });
    if (!out) return;
    c.lines.push(m.id);
    summary.carts.items_added += 1;
  }

  async function identify(c: LiveCart): Promise<void> {
    const first = pick(['Ava', 'Noah', 'Mia', 'Liam', 'Zoe', 'Omar', 'Priya', 'Wei']);
    const last = pick(['Garcia', 'Lee', 'Patel', 'Smith', 'Nguyen', 'Okafor']);
    const out = await send('PUT', `/carts/${c.uuid}/customer`, {
      email: `${first}.${last}${Math.floor(Math.random() * 1000)}@example.com`.toLowerCase(),
      first_name: first,
      last_name: last,
      phone_number: `+1 555-01${String(Math.floor(Math.random() * 100)).padStart(2, '0')}`,
    });
    if (!out) return;
    c.customer = true;
    summary.carts.customers_identified += 1;
  }

  async function checkout(c: LiveCart): Promise<void> {
    const known = modes.get(c.store_id);
    const mode = known
      ? pick(known)
      : pick<ReservationMode>(['pickup', 'pickup', 'pickup', 'delivery', 'curbside']);
    const out = await send<{ unavailable?: ReservationMode[] }>('POST', `/carts/${c.uuid}/checkout`, {
      reservation_mode: mode,
    });
    if (!out) return;
    if (out.unavailable) {
      modes.set(
        c.store_id,
        out.unavailable.filter((m) => reservationModes.includes(m)),
      );
      return;
    }
    c.status = 'verification';
    c.mode = mode;
    summary.carts.checked_out += 1;
  }

  async function move(c: LiveCart): Promise<void> {
    const moves = nextStatuses(c);
    if (moves.length === 0) return;
    const to = chooseMove(moves);
    const body: Record<string, unknown> = { status: to };
    if (to === 'with_review') body.rating = pick([5, 5, 4, 4, 3]);
    if (to === 'preparing') body.queue_number = Math.floor(Math.random() * 200);
    const out = await send('POST', `/carts/${c.uuid}/status`, body);
    if (!out) return;
    c.status = to;
    summary.carts.status_moves += 1;
    if (to === 'with_review') summary.carts.reviewed += 1;
  }

  /** The next request to make (with the cart it is about), or undefined for a cart left idle. */
  function nextAction(): { cart?: LiveCart; run: () => Promise<void> } | undefined {
    const free = carts.filter((c) => !c.busy);
    if (free.length < 4 || chance(0.2)) return { run: createCart };
    const c = pick(free);
    const done = () => carts.splice(carts.indexOf(c), 1);
    if (c.status === 'pending') {
      if (c.lines.length === 0) return { cart: c, run: () => addItem(c) };
      // Some shoppers walk away: the cart is abandoned once PDS_ABANDON_AFTER has passed.
      if (chance(0.12)) {
        done();
        summary.carts.left_idle += 1;
        return undefined;
      }
      if (c.lines.length < 4 && chance(0.4)) return { cart: c, run: () => addItem(c) };
      if (!c.customer && chance(0.4)) return { cart: c, run: () => identify(c) };
      return { cart: c, run: () => checkout(c) };
    }
    if (nextStatuses(c).length === 0 || (c.status === 'finished' && chance(0.5))) {
      done();
      return undefined;
    }
    return { cart: c, run: () => move(c) };
  }

  let stopped = false;
  const stop = () => {
    stopped = true;
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  const began = performance.now();
  const bar =
    durationMs !== undefined && !options.json && process.stderr.isTTY
      ? new SingleBar({
          format: 'traffic [{bar}] {value}/{total} s | {requests} requests | {failed} failed',
          hideCursor: true,
          stream: process.stderr,
        })
      : undefined;
  bar?.start(Math.round((durationMs ?? 0) / 1000), 0, { requests: 0, failed: 0 });
  const inflight = new Set<Promise<void>>();
  let fatal: unknown;
  try {
    const interval = 1000 / rate;
    let next = performance.now();
    while (
      !stopped &&
      fatal === undefined &&
      (durationMs === undefined || performance.now() - began < durationMs)
    ) {
      // At most 16 requests at once; a cart has one request in flight at a time.
      let action = inflight.size < 16 ? nextAction() : undefined;
      for (let tries = 0; action === undefined && inflight.size < 16 && tries < 10; tries++)
        action = nextAction();
      if (action) {
        const { cart } = action;
        if (cart) cart.busy = true;
        const run = action
          .run()
          .catch((err: unknown) => {
            fatal = err;
          })
          .finally(() => {
            if (cart) cart.busy = false;
            inflight.delete(run);
          });
        inflight.add(run);
      }
      bar?.update(Math.min(Math.round((performance.now() - began) / 1000), bar.getTotal()), {
        requests: summary.requests,
        failed: summary.failed,
      });
      next += interval;
      await sleep(next - performance.now());
    }
    await Promise.allSettled(inflight);
  } finally {
    bar?.stop();
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
    await client
      .request('DELETE', `/admin/v1/partners/${ids.store_menu_feed}/keys/${issued.key.key_id}`)
      .catch((err: unknown) => {
        process.stderr.write(
          `pds: could not revoke the traffic key ${issued.key.key_id}: ${(err as Error).message}\n`,
        );
      });
  }
  if (fatal !== undefined) throw fatal;

  summary.seconds = Math.round(performance.now() - began) / 1000;
  summary.rate_per_second = Math.round((summary.requests / Math.max(summary.seconds, 0.001)) * 10) / 10;
  if (summary.failed > 0) process.exitCode = EXIT.failed;
  if (options.json) return print(summary);
  const c = summary.carts;
  const failures = Object.entries(summary.failures)
    .map(([k, n]) => `  ${n} × ${k}\n`)
    .join('');
  return (
    `traffic for ${summary.seconds} s at ${rate}/s: ${summary.requests} requests (${summary.rate_per_second}/s), ` +
    `${summary.ok} ok, ${summary.failed} failed\n` +
    `carts created ${c.created}, items added ${c.items_added}, customers identified ${c.customers_identified}, ` +
    `checked out ${c.checked_out}, status moves ${c.status_moves} (${c.reviewed} reviews), left idle ${c.left_idle}\n` +
    failures
  );
}

export function registerSandbox(program: Command): void {
  const sandbox = program
    .command('sandbox')
    .description('sandbox data: seed it, and drive live traffic on it');

  sandbox
    .command('seed')
    .description(
      'seed the sandbox into the configured event store (once; run again, it prints the API keys again)',
    )
    .option(
      '--size <stores>',
      `stores in the sandbox, 1-${MAX_SANDBOX_SIZE} (default: PDS_SANDBOX_SIZE or 50); the rest scales with them`,
    )
    .option('--seed <n>', `the data set's random seed (default ${DEFAULT_SANDBOX_SEED})`)
    .option('--json', 'print the outcome, the partners and their API keys as JSON')
    .action((options: { size?: string; seed?: string; json?: boolean }) =>
      runClientCommand(() => seedCommand(options)),
    );

  sandbox
    .command('traffic')
    .description('create, fill, check out and move carts through the platform API at a steady rate')
    .option('--rate <rate>', 'requests per second: 5/s, 300/m', '5/s')
    .option('--duration <duration>', 'how long to run (30s, 5m, 1h); default: until Ctrl-C')
    .option('--seed <n>', `the seed the sandbox was made with (default ${DEFAULT_SANDBOX_SEED})`)
    .option('--json', 'print the summary as JSON')
    .action((options: { rate: string; duration?: string; seed?: string; json?: boolean }) =>
      runClientCommand(() => trafficCommand(options)),
    );
}
