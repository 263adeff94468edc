/**
 * Special aggregate (`special-<id>`): a deal a store offers. It involves a product when the product
 * is named in `product_ids`, or its brand in `brand_ids`, or its kind in `kinds`. `store_id` is
 * data: an upsert may move a special to another store. Pricing (`involves`, `applySpecials`) is in pricing.ts.
 */
import { isDeepStrictEqual } from 'node:util';
import { z } from 'zod';
import { type Decider, invalid } from './decider.ts';
import { defineEvent, type EventOf } from './events.ts';
import { freeText, id, isoDateTime, kind, money, nonEmpty } from './schemas.ts';

export const streamId = (specialId: number) => `special-${specialId}`;

export const specialTypes = ['product', 'bulk_pricing', 'bundle', 'cart_total'] as const;
export const discountTypes = ['percent', 'dollar_amount', 'target_price'] as const;
const specialType = z.enum(specialTypes);
const discountType = z.enum(discountTypes);

/** Why a special's values do not hold together, or null when they do (checked by the schema and the decider). */
function specialProblem(f: {
  discount_type: string;
  discount_value: string;
  starts_at: string;
  ends_at: string | null;
}): { code: string; field: 'discount_value' | 'ends_at'; message: string } | null {
  if (f.discount_type === 'percent' && Number(f.discount_value) > 100) {
    return {
      code: 'invalid_discount_value',
      field: 'discount_value',
      message: 'a percent discount is at most 100.00',
    };
  }
  if (f.ends_at !== null && Date.parse(f.ends_at) <= Date.parse(f.starts_at)) {
    return {
      code: 'invalid_special_period',
      field: 'ends_at',
      message: 'ends_at must be later than starts_at',
    };
  }
  return null;
}

/**
 * Body of `PUT /specials/{id}`. `description` and `ends_at` default to null (no end), the id and kind
 * lists to [], `enabled` to true.
 */
export const specialFields = z
  .strictObject({
    store_id: id,
    title: nonEmpty(200),
    description: freeText(5000).nullable().default(null),
    special_type: specialType,
    discount_type: discountType,
    discount_value: money,
    product_ids: z.array(id).max(1000).default([]),
    brand_ids: z.array(id).max(1000).default([]),
    kinds: z.array(kind).max(20).default([]),
    starts_at: isoDateTime,
    ends_at: isoDateTime.nullable().default(null),
    enabled: z.boolean().default(true),
  })
  .superRefine((f, ctx) => {
    const problem = specialProblem(f);
    if (problem) ctx.addIssue({ code: 'custom', path: [problem.field], message: problem.message });
  });
export type SpecialFields = z.infer<typeof specialFields>;

export const events = {
  SpecialUpserted: defineEvent(
    'SpecialUpserted',
    z.object({
      special_id: id,
      store_id: id,
      title: z.string(),
      description: z.string().nullable(),
      special_type: specialType,
      discount_type: discountType,
      discount_value: z.string(),
      product_ids: z.array(id),
      brand_ids: z.array(id),
      kinds: z.array(kind),
      starts_at: isoDateTime,
      ends_at: isoDateTime.nullable(),
      enabled: z.boolean(),
      upserted_at: isoDateTime,
    }),
  ),
};
export type SpecialEvent = EventOf<typeof events>;

/** `store_exists`: whether the body's store exists, looked up by the command handler. */
export type SpecialCommand = {
  type: 'UpsertSpecial';
  special_id: number;
  fields: SpecialFields;
  store_exists: boolean;
  at: string;
};

type SpecialData = Omit<z.output<typeof events.SpecialUpserted.schema>, 'upserted_at'>;
export type SpecialState = { exists: false } | (SpecialData & { exists: true; updated_at: string });

/** Times are kept in UTC (`2026-03-01T08:00:00.000Z`), so they sort and compare as strings. */
const utc = (time: string) => new Date(time).toISOString();

export const decider: Decider<SpecialCommand, SpecialEvent, SpecialState> = {
  initialState: { exists: false },
  decide(command, state) {
    const { fields } = command;
    if (!command.store_exists) {
      throw invalid('unknown_store_id', `store ${fields.store_id} does not exist`, {
        store_id: fields.store_id,
      });
    }
    const problem = specialProblem(fields);
    if (problem) throw invalid(problem.code, problem.message, { field: problem.field });
    const event = events.SpecialUpserted({
      special_id: command.special_id,
      ...fields,
      starts_at: utc(fields.starts_at),
      ends_at: fields.ends_at === null ? null : utc(fields.ends_at),
      upserted_at: command.at,
    });
    const { upserted_at: _, ...data } = event.data;
    // An upsert that changes nothing appends nothing, so retries and replays are harmless.
    if (state.exists && isDeepStrictEqual(specialData(state), data)) return [];
    return [event];
  },
  evolve(_state, event) {
    switch (event.type) {
      case 'SpecialUpserted': {
        const { upserted_at, ...data } = event.data;
        return { ...data, exists: true, updated_at: upserted_at };
      }
    }
  },
};

function specialData(state: Extract<SpecialState, { exists: true }>): SpecialData {
  const { exists: _, updated_at: __, ...data } = state;
  return data;
}

/** The partner `special` record; null if no special. */
export function toRecord(state: SpecialState) {
  if (!state.exists) return null;
  const { special_id, ...data } = specialData(state);
  return { id: special_id, ...data, updated_at: state.updated_at };
}
export type SpecialRecord = NonNullable<ReturnType<typeof toRecord>>;
