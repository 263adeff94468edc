/**
 * Past carts in every status: when each started, whose site it came from, what it held, who bought it,
 * and the status moves made for it after checkout (docs/write-side.md).
 */
import type * as cart from '../../../domain/cart.ts';
import type { PartnerKind } from '../../../domain/partner.ts';
import type { Weight } from '../../../domain/schemas.ts';
import {
  CART_TARGETS,
  type CartPlan,
  type CartStep,
  type CartTarget,
  type ProductFacts,
  type SandboxMenuProduct,
  type SandboxPartner,
} from './model.ts';
import { type Rng, stream } from './rng.ts';
import { DAY, HOUR, iso, MINUTE } from './units.ts';
import { EMPLOYEES, FIRST_NAMES, LAST_NAMES, MANAGERS, PROMO_CODES } from './vocabulary.ts';

const TARGET_WEIGHTS: readonly (readonly [CartTarget, number])[] = [
  ['finished', 28],
  ['with_review', 10],
  ['cancelled', 8],
  ['dismissed', 4],
  ['abandoned', 14],
  ['pending_empty', 3],
  ['pending_open', 3],
  ['verification', 4],
  ['staff_member_review', 3],
  ['preparing', 7],
  ['ready_for_pickup', 7],
  ['delivery_started', 4],
  ['delivery_finished', 3],
];

/** Targets still in progress at the reference time: such carts are from the last few hours. */
const OPEN_TARGETS: readonly CartTarget[] = [
  'pending_open',
  'verification',
  'staff_member_review',
  'preparing',
  'ready_for_pickup',
  'delivery_started',
  'delivery_finished',
];

/** What the carts need to know of a store. */
export interface StoreFacts {
  id: number;
  pickup: boolean;
  delivery: boolean;
  curbside: boolean;
  form: readonly { name: string; required?: boolean }[];
  menu: SandboxMenuProduct[];
}

/** The status moves from checkout to the target, for a reservation mode (docs/write-side.md). */
function statusPath(rng: Rng, target: CartTarget, mode: cart.ReservationMode): string[] {
  const review = rng.chance(0.3) ? ['staff_member_review'] : [];
  const toReady = mode === 'delivery' ? ['delivery_started'] : ['ready_for_pickup'];
  const toFinish =
    mode === 'delivery'
      ? ['delivery_started', 'delivery_finished', 'finished']
      : ['ready_for_pickup', 'finished'];
  switch (target) {
    case 'verification':
      return [];
    case 'staff_member_review':
      return ['staff_member_review'];
    case 'preparing':
      return [...review, 'preparing'];
    case 'ready_for_pickup':
    case 'delivery_started':
      return [...review, 'preparing', ...toReady];
    case 'delivery_finished':
      return [...review, 'preparing', 'delivery_started', 'delivery_finished'];
    case 'finished':
      return [...review, 'preparing', ...toFinish];
    case 'with_review':
      return [...review, 'preparing', ...toFinish, 'with_review'];
    case 'cancelled':
      return [
        ...rng.pick([[], ['staff_member_review'], ['preparing'], [...review, 'preparing']]),
        'cancelled',
      ];
    case 'dismissed':
      return [
        ...rng.pick([
          [],
          ['staff_member_review'],
          [...review, 'preparing'],
          [...review, 'preparing', ...toReady],
        ]),
        'dismissed',
      ];
    default:
      throw new Error(`no status path to ${target}`);
  }
}

/** Minutes each move usually takes after the previous one. */
const MOVE_MINUTES: Record<string, readonly [number, number]> = {
  staff_member_review: [3, 15],
  preparing: [5, 20],
  ready_for_pickup: [10, 40],
  delivery_started: [10, 30],
  delivery_finished: [20, 60],
  finished: [5, 120],
  with_review: [6 * 60, 72 * 60],
  cancelled: [5, 60],
  dismissed: [30, 240],
};

function chooseMode(rng: Rng, target: CartTarget, s: StoreFacts): cart.ReservationMode {
  if (target === 'delivery_started' || target === 'delivery_finished') return 'delivery';
  const offered: (readonly [cart.ReservationMode, number])[] = [];
  if (s.pickup) offered.push(['pickup', 6]);
  if (s.curbside) offered.push(['curbside', 2]);
  if (s.delivery && target !== 'ready_for_pickup') offered.push(['delivery', 3]);
  // Unreachable while chooseTarget moves a delivery-only store's ready target to delivery_started.
  if (offered.length === 0) throw new Error(`store ${s.id} offers no reservation mode for ${target}`);
  return rng.weighted(offered);
}

/** What every cart is planned against. */
interface CartWorld {
  rng: Rng;
  reference: number;
  abandonAfterMs: number;
  byKind: Record<PartnerKind, SandboxPartner>;
  /** The stores the store operator partner runs. */
  operated: Set<number>;
  productOf: (menuProductId: number) => ProductFacts;
}

/** One cart's steps as they are written, and the time of the latest. */
interface Timeline {
  steps: CartStep[];
  t: number;
  /** Moves the time on by `min` to `max` minutes and some seconds, and returns it. */
  after(min: number, max: number): number;
}

function timeline(rng: Rng, start: number): Timeline {
  const line: Timeline = {
    steps: [],
    t: start,
    after(min, max) {
      line.t += rng.int(min * MINUTE, max * MINUTE) + rng.int(0, 59_999);
      return line.t;
    },
  };
  return line;
}

/** The n-th cart's target and store: the first carts go through every target, at store 1. */
function chooseTarget(
  rng: Rng,
  n: number,
  stores: StoreFacts[],
  storeWeights: (readonly [StoreFacts, number])[],
): { target: CartTarget; s: StoreFacts } {
  let target = n < CART_TARGETS.length ? CART_TARGETS[n] : rng.weighted(TARGET_WEIGHTS);
  const s = n < CART_TARGETS.length ? stores[0] : rng.weighted(storeWeights);
  if ((target === 'delivery_started' || target === 'delivery_finished') && !s.delivery)
    target = 'ready_for_pickup';
  // A store that only delivers has no order ready for pickup: its ready order is out for delivery.
  if (target === 'ready_for_pickup' && !s.pickup && !s.curbside) target = 'delivery_started';
  return { target, s };
}

/** When it started: open carts in the last hours, the others over the last 90 days. */
function startTime({ rng, reference, abandonAfterMs }: CartWorld, target: CartTarget): number {
  if (target === 'pending_open') {
    return reference - rng.int(5 * MINUTE, Math.max(6 * MINUTE, Math.min(3 * HOUR, abandonAfterMs * 0.8)));
  }
  if (OPEN_TARGETS.includes(target)) return reference - rng.int(20 * MINUTE, 3 * HOUR);
  if (target === 'abandoned') {
    const earliest = abandonAfterMs + 30 * MINUTE;
    return reference - rng.int(earliest, Math.max(earliest + DAY, 90 * DAY));
  }
  return reference - rng.int(4 * HOUR, 90 * DAY);
}

/** Whose site it came from: the operator's own site at its stores, a brand's storefront, or the platform. */
function chooseSource({ rng, byKind, operated }: CartWorld, s: StoreFacts) {
  let partnerId: string | null = null;
  let channel: 'embedded' | 'headless' = rng.chance(0.65) ? 'embedded' : 'headless';
  if (operated.has(s.id) && rng.chance(0.5)) {
    partnerId = byKind.store_operator.partner_id;
    channel = 'headless';
  } else if (rng.chance(0.1)) {
    partnerId = byKind.brand.partner_id;
    channel = 'embedded';
  }
  return { partnerId, channel };
}

/** One to four lines from the store's menu, and now and then a change of mind about one. */
function addItems(
  { rng, byKind, productOf }: CartWorld,
  line: Timeline,
  s: StoreFacts,
  partnerId: string | null,
): void {
  const inStock = s.menu.filter((m) => m.body.in_stock !== false);
  const pool = inStock.length > 0 ? inStock : s.menu;
  // A brand storefront's carts hold that brand's products when the store has some.
  const own = pool.filter((m) => productOf(m.id).brand_id === 1);
  const lineCount = Math.min(
    pool.length,
    rng.weighted([
      [1, 4],
      [2, 3],
      [3, 2],
      [4, 1],
    ] as const),
  );
  const chosen = partnerId === byKind.brand.partner_id && own.length > 0 ? [rng.pick(own)] : [];
  for (const m of rng.sample(pool, lineCount))
    if (!chosen.includes(m) && chosen.length < lineCount) chosen.push(m);
  for (const m of chosen) {
    const priceIds = Object.keys(m.body.prices) as Weight[];
    line.steps.push({
      type: 'add',
      at: iso(line.after(0, 4)),
      body: {
        menu_product_id: m.id,
        price_id: rng.pick(priceIds),
        count: rng.weighted([
          [1, 7],
          [2, 2],
          [3, 1],
        ] as const),
      },
    });
  }
  // Now and then a customer changes their mind about a line.
  if (chosen.length > 1 && rng.chance(0.12)) {
    line.steps.push(
      rng.chance(0.5)
        ? { type: 'remove', at: iso(line.after(0, 3)), menu_product_id: chosen[chosen.length - 1].id }
        : {
            type: 'quantity',
            at: iso(line.after(0, 3)),
            menu_product_id: chosen[0].id,
            count: rng.int(2, 4),
          },
    );
  }
}

function addCustomer(rng: Rng, line: Timeline): void {
  const first = rng.pick(FIRST_NAMES);
  const last = rng.pick(LAST_NAMES);
  const born = Date.UTC(rng.int(1960, 2003), rng.int(0, 11), rng.int(1, 28));
  line.steps.push({
    type: 'customer',
    at: iso(line.after(0, 3)),
    body: {
      email: `${first}.${last}${rng.int(1, 999)}@example.com`.toLowerCase(),
      first_name: first,
      last_name: last,
      phone_number: `+1 555-01${String(rng.int(0, 99)).padStart(2, '0')}`,
      DOB: iso(born),
    },
  });
}

/** The checkout, then the status moves to the target, each with what the platform writes with it. */
function checkOut(
  world: CartWorld,
  line: Timeline,
  target: CartTarget,
  s: StoreFacts,
  partnerId: string | null,
): void {
  const { rng } = world;
  const mode = chooseMode(rng, target, s);
  const checkoutAt = line.after(1, 10);
  const window = Math.ceil((checkoutAt + rng.int(30, 120) * MINUTE) / (15 * MINUTE)) * 15 * MINUTE;
  const day = iso(window).slice(0, 10);
  const hhmm = (ms: number) => iso(ms).slice(11, 16);
  line.steps.push({
    type: 'checkout',
    at: iso(checkoutAt),
    body: {
      reservation_mode: mode,
      reservation_start_window: `${day} ${hhmm(window)}-${hhmm(window + 30 * MINUTE)}`,
      promo_code: rng.chance(0.1) ? rng.pick(PROMO_CODES) : null,
    },
  });
  const employee = rng.int(0, EMPLOYEES.length - 1);
  const manager = rng.int(0, MANAGERS.length - 1);
  for (const to of statusPath(rng, target, mode)) {
    const [min, max] = MOVE_MINUTES[to];
    const at = iso(line.after(min, max));
    line.steps.push(statusStep(rng, to, at, employee, manager));
    // A curbside customer tells the store they have arrived while the order is ready.
    if (to === 'ready_for_pickup' && mode === 'curbside') {
      const arrival = arrivalStep(world, line, s, partnerId);
      if (arrival) line.steps.push(arrival);
    }
  }
}

/** A status move, with the staff, queue, message or rating that comes with it. */
function statusStep(rng: Rng, to: string, at: string, employee: number, manager: number): CartStep {
  const body: CartStep & { type: 'status' } = {
    type: 'status',
    at,
    body: { status: to as cart.CartStatus },
  };
  if (to === 'staff_member_review') {
    Object.assign(body.body, {
      assigned_manager_id: 900 + manager,
      assigned_manager_name: MANAGERS[manager],
    });
  } else if (to === 'preparing') {
    Object.assign(body.body, {
      assigned_employee_id: 100 + employee,
      assigned_employee_name: EMPLOYEES[employee],
      queue_number: rng.int(1, 200),
      pos_order_id: `POS-${rng.int(100000, 999999)}`,
    });
  } else if (to === 'cancelled' || to === 'dismissed') {
    body.body.checkout_message = rng.pick(
      to === 'cancelled'
        ? ['Cancelled at the customer’s request.', 'An item went out of stock.']
        : ['The customer did not come to pick up the order.', 'Duplicate order.'],
    );
  } else if (to === 'with_review') {
    body.body.rating = rng.weighted([
      [5, 50],
      [4, 30],
      [3, 12],
      [2, 5],
      [1, 3],
    ] as const);
  }
  return body;
}

/**
 * A curbside arrival, sent by the store partner whose site the cart came from: no other may post it
 * (docs/partner-api.md, "The curbside arrival"), so a cart from another site has none. Its chances are
 * drawn either way, so every other record of the sandbox stays as it was.
 */
function arrivalStep(
  { rng, byKind }: CartWorld,
  line: Timeline,
  s: StoreFacts,
  partnerId: string | null,
): CartStep | undefined {
  const arrival: Record<string, string> = {
    vehicle_make: rng.pick(['Toyota', 'Subaru', 'Honda', 'Ford', 'Tesla', 'Volvo']),
    vehicle_color: rng.pick(['red', 'blue', 'white', 'black', 'silver', 'green']),
  };
  if (s.form.some((f) => f.name === 'parking_spot')) arrival.parking_spot = String(rng.int(1, 8));
  const at = iso(line.after(2, 20));
  const arrivalId = rng.uuid();
  const posters = [byKind.store_operator.partner_id, byKind.store_menu_feed.partner_id];
  if (partnerId === null || !posters.includes(partnerId)) return undefined;
  return { type: 'arrival', at, arrival_id: arrivalId, partner_id: partnerId, fields: arrival };
}

/** Whatever is still in progress happened before the reference time: squeeze the timeline if needed. */
function squeeze(steps: CartStep[], created: number, reference: number, target: CartTarget): void {
  const last = steps.length > 0 ? Date.parse(steps[steps.length - 1].at) : created;
  const latest = reference - 30_000;
  if (last > latest && target !== 'abandoned') {
    const scale = (latest - created) / (last - created);
    for (const step of steps) step.at = iso(created + Math.floor((Date.parse(step.at) - created) * scale));
  }
}

function planCart(
  world: CartWorld,
  n: number,
  stores: StoreFacts[],
  storeWeights: (readonly [StoreFacts, number])[],
): CartPlan {
  const { rng } = world;
  const { target, s } = chooseTarget(rng, n, stores, storeWeights);
  const created = startTime(world, target);
  const { partnerId, channel } = chooseSource(world, s);
  const line = timeline(rng, created);
  if (target !== 'pending_empty') addItems(world, line, s, partnerId);
  if (
    rng.chance(target === 'pending_empty' || target === 'abandoned' || target === 'pending_open' ? 0.5 : 0.9)
  ) {
    addCustomer(rng, line);
  }
  if (target === 'abandoned') {
    const firstItem = Date.parse(line.steps[0].at);
    // The timer appends it shortly after the deadline (and never before the cart's last change).
    line.steps.push({
      type: 'abandon',
      at: iso(Math.max(firstItem + world.abandonAfterMs, line.t) + rng.int(0, 90_000)),
    });
  } else if (target !== 'pending_empty' && target !== 'pending_open') {
    checkOut(world, line, target, s, partnerId);
  }
  squeeze(line.steps, created, world.reference, target);
  return {
    uuid: rng.uuid(),
    correlation_id: rng.uuid(),
    at: iso(created),
    target,
    body: {
      store_id: s.id,
      source: { channel, partner_id: partnerId },
      user_id: rng.chance(0.7) ? rng.int(10_000, 99_999) : null,
    },
    steps: line.steps,
  };
}

export function generateCarts(
  seed: number,
  count: number,
  reference: number,
  abandonAfterMs: number,
  stores: StoreFacts[],
  partners: SandboxPartner[],
  productOf: (menuProductId: number) => ProductFacts,
): CartPlan[] {
  const rng = stream(seed, 'carts');
  const byKind = Object.fromEntries(partners.map((p) => [p.kind, p])) as Record<PartnerKind, SandboxPartner>;
  const operated = new Set(byKind.store_operator.body.store_ids);
  const world: CartWorld = { rng, reference, abandonAfterMs, byKind, operated, productOf };
  const storeWeights = stores.map((s) => [s, s.id === 1 ? 2 : rng.float(0.4, 2)] as const);
  const plans: CartPlan[] = [];
  for (let n = 0; n < count; n++) plans.push(planCart(world, n, stores, storeWeights));
  // The log in the order things happened: cart ids (global positions) grow with their creation time.
  return plans.sort((a, b) => a.at.localeCompare(b.at));
}
