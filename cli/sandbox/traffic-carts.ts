/**
 * The carts `pds sandbox traffic` drives, and the platform requests that drive them: as shoppers and
 * store staff would, it creates carts, adds items, identifies customers, checks out and moves carts
 * along the allowed status moves, and leaves some carts idle. Every request is counted in the run's
 * `TrafficSummary`.
 */
import { type CartStatus, type ReservationMode, reservationModes, statusMoves } from '../../domain/cart.ts';
import type { Weight } from '../../domain/schemas.ts';
import { type AdminClient, CliError, EXIT } from '../client.ts';

export interface TrafficSummary {
  seconds: number;
  target_rate_per_second: number;
  requests: number;
  rate_per_second: number;
  /** Every request is one of these three: `requests = ok + refused + failed`. */
  ok: number;
  /**
   * Refused as a storefront expects and learns from: a checkout in a reservation mode the store does
   * not offer, which answers the modes it does (the cart is then checked out in one of them).
   */
  refused: number;
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

/** A summary with nothing counted yet. */
export function emptySummary(rate: number): TrafficSummary {
  return {
    seconds: 0,
    target_rate_per_second: rate,
    requests: 0,
    rate_per_second: 0,
    ok: 0,
    refused: 0,
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
}

export interface LiveCart {
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

/** A sandbox partner as the admin API shows it. */
export interface TrafficPartner {
  partner_id: string;
  store_ids: number[];
}

/** The next request to make, with the cart it is about (which has one request in flight at a time). */
export interface TrafficAction {
  cart?: LiveCart;
  run: () => Promise<void>;
}

const pick = <T>(items: readonly T[]): T => items[Math.floor(Math.random() * items.length)];
const chance = (p: number) => Math.random() < p;

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

export interface TrafficCartsSetup {
  client: AdminClient;
  /** The stores the sandbox menu feed partner covers. */
  stores: number[];
  /** The sandbox store operator, whose own headless carts some carts are; absent if it is gone. */
  operator: TrafficPartner | undefined;
  /** The key of the store menu feed partner, to read the stores' menus with. */
  menuKey: string;
  summary: TrafficSummary;
}

/** The live carts of one traffic run, and the requests that drive them. */
export class TrafficCarts {
  private readonly setup: TrafficCartsSetup;
  private readonly summary: TrafficSummary;
  private readonly carts: LiveCart[] = [];
  private readonly menus = new Map<number, Promise<MenuEntry[]>>();
  /** The reservation modes each store said it offers. */
  private readonly modes = new Map<number, ReservationMode[]>();

  constructor(setup: TrafficCartsSetup) {
    this.setup = setup;
    this.summary = setup.summary;
  }

  /** The next request to make (with the cart it is about), or undefined for a cart left idle. */
  nextAction(): TrafficAction | undefined {
    const { carts, summary } = this;
    const free = carts.filter((c) => !c.busy);
    if (free.length < 4 || chance(0.2)) return { run: () => this.createCart() };
    const c = pick(free);
    const done = () => carts.splice(carts.indexOf(c), 1);
    if (c.status === 'pending') {
      if (c.lines.length === 0) return { cart: c, run: () => this.addItem(c) };
      // Some shoppers walk away: the cart is abandoned once PDS_ABANDON_AFTER has passed.
      if (chance(0.12)) {
        done();
        summary.carts.left_idle += 1;
        return undefined;
      }
      if (c.lines.length < 4 && chance(0.4)) return { cart: c, run: () => this.addItem(c) };
      if (!c.customer && chance(0.4)) return { cart: c, run: () => this.identify(c) };
      return { cart: c, run: () => this.checkout(c) };
    }
    if (nextStatuses(c).length === 0 || (c.status === 'finished' && chance(0.5))) {
      done();
      return undefined;
    }
    return { cart: c, run: () => this.move(c) };
  }

  /** One platform request, counted; answers the body, or undefined when it was refused. */
  private async send<T>(method: string, path: string, body?: unknown): Promise<T | undefined> {
    const { summary } = this;
    summary.requests += 1;
    try {
      const out = await this.setup.client.request<T>(method, `/platform/v1${path}`, body);
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
        summary.refused += 1;
        return { unavailable: problem.available } as T;
      }
      summary.failed += 1;
      const key = `${problem?.status ?? '?'} ${problem?.code ?? (err as Error).message}`;
      summary.failures[key] = (summary.failures[key] ?? 0) + 1;
      return undefined;
    }
  }

  /** A store's menu (what is in stock and priced), read once through the store menu feed. */
  private menuOf(storeId: number): Promise<MenuEntry[]> {
    let menu = this.menus.get(storeId);
    if (!menu) {
      menu = fetch(
        `${this.setup.client.baseUrl}/partner/store-menu-feed/v1/menu_products?store_id=${storeId}&limit=200`,
        {
          headers: { authorization: `Bearer ${this.setup.menuKey}` },
        },
      ).then(async (r) => {
        if (!r.ok) throw new CliError(`cannot read the menu of store ${storeId}: ${r.status}`, EXIT.failed);
        const page = (await r.json()) as { menu_products: MenuEntry[] };
        return page.menu_products.filter((m) => m.in_stock && m.available_weights.length > 0);
      });
      this.menus.set(storeId, menu);
    }
    return menu;
  }

  private async createCart(): Promise<void> {
    const { operator, stores } = this.setup;
    const storeId = pick(stores);
    const own = operator?.store_ids.includes(storeId) && chance(0.5);
    const out = await this.send<{ cart: { uuid: string } }>('POST', '/carts', {
      store_id: storeId,
      source: {
        channel: own ? 'headless' : pick(['embedded', 'headless']),
        partner_id: own ? operator?.partner_id : null,
      },
      user_id: chance(0.7) ? 10_000 + Math.floor(Math.random() * 90_000) : null,
    });
    if (!out) return;
    this.summary.carts.created += 1;
    this.carts.push({
      uuid: out.cart.uuid,
      store_id: storeId,
      status: 'pending',
      mode: null,
      lines: [],
      customer: false,
      busy: false,
    });
  }

  private async addItem(c: LiveCart): Promise<void> {
    const menu = (await this.menuOf(c.store_id)).filter((m) => !c.lines.includes(m.id));
    if (menu.length === 0) return;
    const m = pick(menu);
    const count = pick([1, 1, 1, 2, 3]);
    const out = await this.send('POST', `/carts/${c.uuid}/items`, {
      menu_product_id: m.id,
      price_id: pick(m.available_weights),
      count,
    });
    if (!out) return;
    c.lines.push(m.id);
    this.summary.carts.items_added += 1;
  }

  private async identify(c: LiveCart): Promise<void> {
    const first = pick(['Ava', 'Noah', 'Mia', 'Liam', 'Zoe', 'Omar', 'Priya', 'Wei']);
    const last = pick(['Garcia', 'Lee', 'Patel', 'Smith', 'Nguyen', 'Okafor']);
    const out = await this.send('PUT', `/carts/${c.uuid}/customer`, {
      email: `${first}.${last}${Math.floor(Math.random() * 1000)}@example.com`.toLowerCase(),
      first_name: first,
      last_name: last,
      phone_number: `+1 555-01${String(Math.floor(Math.random() * 100)).padStart(2, '0')}`,
    });
    if (!out) return;
    c.customer = true;
    this.summary.carts.customers_identified += 1;
  }

  private async checkout(c: LiveCart): Promise<void> {
    const known = this.modes.get(c.store_id);
    const mode = known
      ? pick(known)
      : pick<ReservationMode>(['pickup', 'pickup', 'pickup', 'delivery', 'curbside']);
    const out = await this.send<{ unavailable?: ReservationMode[] }>('POST', `/carts/${c.uuid}/checkout`, {
      reservation_mode: mode,
    });
    if (!out) return;
    if (out.unavailable) {
      this.modes.set(
        c.store_id,
        out.unavailable.filter((m) => reservationModes.includes(m)),
      );
      return;
    }
    c.status = 'verification';
    c.mode = mode;
    this.summary.carts.checked_out += 1;
  }

  private async move(c: LiveCart): Promise<void> {
    const moves = nextStatuses(c);
    if (moves.length === 0) return;
    const to = chooseMove(moves);
    const body: Record<string, unknown> = { status: to };
    if (to === 'with_review') body.rating = pick([5, 5, 4, 4, 3]);
    if (to === 'preparing') body.queue_number = Math.floor(Math.random() * 200);
    const out = await this.send('POST', `/carts/${c.uuid}/status`, body);
    if (!out) return;
    c.status = to;
    this.summary.carts.status_moves += 1;
    if (to === 'with_review') this.summary.carts.reviewed += 1;
  }
}
