/**
 * What an event changed in a cart, for auditors (docs/write-side.md, "Auditors"): the cart's fields
 * before and after it, leaving out what changes at every event (`updated_at`). Lines are named by
 * their menu product, curbside arrivals by their id, the customer field by field, and the total
 * (`amount`) follows its lines. Pure.
 */
import { type Cart, type CartLine, type CartState, cartAmount } from './state.ts';

export interface CartChange {
  /** `status`, `customer.email`, `lines[42]`, `lines[42].count`, `curbside_arrivals[<id>]`, `amount`. */
  field: string;
  /** null where the field did not exist yet (a new cart, a new line). */
  before: unknown;
  /** null where it no longer exists (a removed line). */
  after: unknown;
}

/** The cart's own fields, compared as they are. */
const FIELDS = [
  'uuid',
  'store_id',
  'source',
  'user_id',
  'created_at',
  'status',
  'reservation_mode',
  'reservation_start_window',
  'checked_out_at',
  'promo_code',
  'rating',
  'first_item_at',
  'abandoned_at',
  'assigned_employee_id',
  'assigned_employee_name',
  'assigned_manager_id',
  'assigned_manager_name',
  'checkout_message',
  'pos_order_id',
  'queue_number',
] as const satisfies ReadonlyArray<keyof Cart>;

/** What a line shows an auditor: what was placed, how many, at what price. */
const lineOf = (l: CartLine) => ({
  name: l.name,
  brand: l.brand,
  price_id: l.price_id,
  count: l.count,
  unit_price: l.unit_price,
  discounted_unit_price: l.discounted_unit_price,
  special_id: l.special_id,
});

const same = (a: unknown, b: unknown) => a === b || JSON.stringify(a) === JSON.stringify(b);

/** A value a new cart starts without: nothing to show as a change from nothing. */
const blank = (v: unknown) => v === null || v === undefined || v === '' || v === 0;

export function cartChanges(before: CartState, after: CartState): CartChange[] {
  if (!after.exists) return [];
  const was = before.exists ? before : undefined;
  const changes: CartChange[] = [];
  const note = (field: string, b: unknown, a: unknown) => {
    if (same(b, a) || (was === undefined && blank(a))) return;
    changes.push({ field, before: b ?? null, after: a ?? null });
  };
  for (const field of FIELDS) note(field, was?.[field], after[field]);
  for (const key of new Set([...Object.keys(was?.customer ?? {}), ...Object.keys(after.customer ?? {})])) {
    const read = (c: Cart['customer'] | undefined) =>
      (c as Record<string, unknown> | null | undefined)?.[key];
    note(`customer.${key}`, read(was?.customer), read(after.customer));
  }
  const lines = (c: Cart | undefined) => new Map((c?.lines ?? []).map((l) => [l.menu_product_id, lineOf(l)]));
  const linesBefore = lines(was);
  const linesAfter = lines(after);
  for (const id of new Set([...linesBefore.keys(), ...linesAfter.keys()])) {
    const b = linesBefore.get(id);
    const a = linesAfter.get(id);
    if (!b || !a) {
      note(`lines[${id}]`, b, a);
      continue;
    }
    for (const key of Object.keys(a) as Array<keyof typeof a>) note(`lines[${id}].${key}`, b[key], a[key]);
  }
  const arrivals = new Set((was?.curbside_arrivals ?? []).map((c) => c.arrival_id));
  for (const arrival of after.curbside_arrivals) {
    if (!arrivals.has(arrival.arrival_id)) {
      note(`curbside_arrivals[${arrival.arrival_id}]`, null, {
        fields: arrival.fields,
        arrived_at: arrival.arrived_at,
      });
    }
  }
  note('amount', was ? cartAmount(was) : undefined, cartAmount(after));
  return changes;
}
