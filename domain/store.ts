/**
 * Store aggregate (`store-<id>`): a store's listing data and its curbside pickup setting.
 * The cart aggregate's command handler reads this stream to check the store and its curbside setting.
 */
import { isDeepStrictEqual } from 'node:util';
import { z } from 'zod';
import { type Decider, invalid, notFound } from './decider.ts';
import { defineEvent, type EventOf } from './events.ts';
import { freeText, id, isoDateTime, nonEmpty, openingHours, usZip, webUrl } from './schemas.ts';

export const streamId = (storeId: number) => `store-${storeId}`;

/** Each US state, district and territory, with the IANA time zone most of its people live in. */
const stateTimeZones = {
  AL: 'America/Chicago',
  AK: 'America/Anchorage',
  AZ: 'America/Phoenix',
  AR: 'America/Chicago',
  CA: 'America/Los_Angeles',
  CO: 'America/Denver',
  CT: 'America/New_York',
  DE: 'America/New_York',
  DC: 'America/New_York',
  FL: 'America/New_York',
  GA: 'America/New_York',
  HI: 'Pacific/Honolulu',
  ID: 'America/Boise',
  IL: 'America/Chicago',
  IN: 'America/Indiana/Indianapolis',
  IA: 'America/Chicago',
  KS: 'America/Chicago',
  KY: 'America/New_York',
  LA: 'America/Chicago',
  ME: 'America/New_York',
  MD: 'America/New_York',
  MA: 'America/New_York',
  MI: 'America/Detroit',
  MN: 'America/Chicago',
  MS: 'America/Chicago',
  MO: 'America/Chicago',
  MT: 'America/Denver',
  NE: 'America/Chicago',
  NV: 'America/Los_Angeles',
  NH: 'America/New_York',
  NJ: 'America/New_York',
  NM: 'America/Denver',
  NY: 'America/New_York',
  NC: 'America/New_York',
  ND: 'America/Chicago',
  OH: 'America/New_York',
  OK: 'America/Chicago',
  OR: 'America/Los_Angeles',
  PA: 'America/New_York',
  RI: 'America/New_York',
  SC: 'America/New_York',
  SD: 'America/Chicago',
  TN: 'America/Chicago',
  TX: 'America/Chicago',
  UT: 'America/Denver',
  VT: 'America/New_York',
  VA: 'America/New_York',
  WA: 'America/Los_Angeles',
  WV: 'America/New_York',
  WI: 'America/Chicago',
  WY: 'America/Denver',
  PR: 'America/Puerto_Rico',
  GU: 'Pacific/Guam',
  VI: 'America/St_Thomas',
  AS: 'Pacific/Pago_Pago',
  MP: 'Pacific/Saipan',
} as const;
export type UsState = keyof typeof stateTimeZones;
export const usStates = Object.keys(stateTimeZones) as [UsState, ...UsState[]];
/** The time zone a store gets when its upsert names none: the one most of its state lives in. */
export const defaultTimeZone = (state: UsState): string => stateTimeZones[state];

const usState = z.enum(usStates, { error: 'expected a two-letter US state code in capitals, e.g. "CA"' });

function isTimeZone(name: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: name });
    return true;
  } catch {
    return false;
  }
}
/** An IANA time zone name such as `America/Los_Angeles` (or `UTC`); offsets like `+05:00` are refused. */
const timeZone = z
  .string()
  .regex(
    /^(UTC|[A-Z][A-Za-z_-]+(\/[A-Z][A-Za-z0-9_+-]*)+)$/,
    'expected an IANA time zone, e.g. "America/Denver"',
  )
  .refine(isTimeZone, 'unknown time zone');
/** 7 to 15 digits, optionally a leading +, with spaces, dots, dashes and parentheses between them. */
const phone = z
  .string()
  .trim()
  .regex(/^\+?(?:[ ().-]*\d){7,15}[ ().-]*$/, 'expected a phone number, e.g. "+1 415-555-0100"');

/** Body of `PUT /stores/{id}`. Defaults: see the field comments. */
export const storeFields = z.strictObject({
  name: nonEmpty(200),
  display_name: nonEmpty(200).nullable().default(null),
  store_url: webUrl.nullable().default(null),
  address: nonEmpty(300),
  city: nonEmpty(100),
  state: usState,
  zip: usZip,
  lat: z.number().min(-90).max(90),
  long: z.number().min(-180).max(180),
  phone: phone.nullable().default(null),
  /** Absent: the time zone of the store's state (`defaultTimeZone`). */
  time_zone: timeZone.optional(),
  recreational: z.boolean().default(true),
  medical: z.boolean().default(false),
  pickup: z.boolean().default(true),
  delivery: z.boolean().default(false),
  curbside: z.boolean().default(false),
  working_hours: openingHours.default([]),
});
export type StoreFields = z.infer<typeof storeFields>;

/** What the arrival form asks when a store has not set its own fields. */
export const defaultArrivalFormFields = () => [
  { name: 'vehicle_make', label: 'Vehicle make', required: true },
  { name: 'vehicle_color', label: 'Vehicle color', required: true },
  { name: 'parking_spot', label: 'Parking spot', required: false },
];

const arrivalFormField = z.strictObject({
  name: z.string().regex(/^[a-z][a-z0-9_]{0,49}$/, 'expected a snake_case field name, e.g. "vehicle_make"'),
  label: nonEmpty(100),
  required: z.boolean().default(false),
});

const duplicateName = (fields: { name: string }[]) =>
  fields.map((f) => f.name).find((name, i, names) => names.indexOf(name) !== i);

/**
 * Body of `PUT /stores/{id}/curbside_pickup_setting`. Defaults: no arrival instructions, `hours` empty
 * (curbside follows the store's working hours), 15-minute windows, 10 orders per window, no payment
 * options listed, and the arrival form of `defaultArrivalFormFields`.
 */
export const curbsidePickupSettingFields = z.strictObject({
  enabled: z.boolean(),
  arrival_instructions: freeText(2000).nullable().default(null),
  hours: openingHours.default([]),
  window_minutes: z.number().int().min(5).max(240).default(15),
  max_orders_per_window: z.number().int().min(1).max(1000).default(10),
  payment_options: z.array(nonEmpty(50)).max(20).default([]),
  arrival_form_fields: z
    .array(arrivalFormField)
    .max(20)
    .default(defaultArrivalFormFields)
    .superRefine((fields, ctx) => {
      const name = duplicateName(fields);
      if (name !== undefined) ctx.addIssue({ code: 'custom', message: `field name "${name}" appears twice` });
    }),
});
export type CurbsidePickupSettingFields = z.infer<typeof curbsidePickupSettingFields>;

const hours = z.array(z.object({ day: z.string(), from: z.string(), to: z.string() }));

export const events = {
  StoreUpserted: defineEvent(
    'StoreUpserted',
    z.object({
      store_id: id,
      name: z.string(),
      display_name: z.string().nullable(),
      store_url: z.string().nullable(),
      address: z.string(),
      city: z.string(),
      state: z.string(),
      zip: z.string(),
      lat: z.number(),
      long: z.number(),
      phone: z.string().nullable(),
      time_zone: z.string(),
      recreational: z.boolean(),
      medical: z.boolean(),
      pickup: z.boolean(),
      delivery: z.boolean(),
      curbside: z.boolean(),
      working_hours: hours,
      upserted_at: isoDateTime,
    }),
  ),
  CurbsidePickupSettingChanged: defineEvent(
    'CurbsidePickupSettingChanged',
    z.object({
      store_id: id,
      enabled: z.boolean(),
      arrival_instructions: z.string().nullable(),
      hours,
      window_minutes: z.number().int(),
      max_orders_per_window: z.number().int(),
      payment_options: z.array(z.string()),
      arrival_form_fields: z.array(z.object({ name: z.string(), label: z.string(), required: z.boolean() })),
      changed_at: isoDateTime,
    }),
  ),
};
export type StoreEvent = EventOf<typeof events>;

export type StoreCommand =
  | { type: 'UpsertStore'; store_id: number; fields: StoreFields; at: string }
  | { type: 'SetCurbsidePickupSetting'; store_id: number; fields: CurbsidePickupSettingFields; at: string };

type StoreData = Omit<z.output<typeof events.StoreUpserted.schema>, 'upserted_at'>;
export type CurbsidePickupSetting = Omit<
  z.output<typeof events.CurbsidePickupSettingChanged.schema>,
  'store_id' | 'changed_at'
>;

/** The setting a store has until its first `SetCurbsidePickupSetting`: curbside off, the default form. */
export const defaultCurbsidePickupSetting = (): CurbsidePickupSetting => ({
  enabled: false,
  arrival_instructions: null,
  hours: [],
  window_minutes: 15,
  max_orders_per_window: 10,
  payment_options: [],
  arrival_form_fields: defaultArrivalFormFields(),
});

export type StoreState =
  | { exists: false }
  | (StoreData & {
      exists: true;
      updated_at: string;
      curbside_pickup_setting: CurbsidePickupSetting;
      /** When the setting last changed; the store's creation time while it still has the default. */
      curbside_updated_at: string;
    });

export const decider: Decider<StoreCommand, StoreEvent, StoreState> = {
  initialState: { exists: false },
  decide(command, state) {
    switch (command.type) {
      case 'UpsertStore': {
        const { time_zone, ...fields } = command.fields;
        const event = events.StoreUpserted({
          store_id: command.store_id,
          ...fields,
          time_zone: time_zone ?? defaultTimeZone(fields.state),
          upserted_at: command.at,
        });
        // An upsert that changes nothing appends nothing, so retries and replays are harmless.
        if (state.exists && isDeepStrictEqual(storeData(state), withoutKey(event.data, 'upserted_at')))
          return [];
        return [event];
      }
      case 'SetCurbsidePickupSetting': {
        if (!state.exists) throw notFound('store_not_found', `store ${command.store_id} does not exist`);
        const name = duplicateName(command.fields.arrival_form_fields);
        if (name !== undefined) {
          throw invalid('duplicate_arrival_form_field', `arrival form field "${name}" appears twice`, {
            name,
          });
        }
        const event = events.CurbsidePickupSettingChanged({
          store_id: command.store_id,
          ...command.fields,
          changed_at: command.at,
        });
        const { store_id: _, changed_at: __, ...setting } = event.data;
        if (isDeepStrictEqual(state.curbside_pickup_setting, setting)) return [];
        return [event];
      }
    }
  },
  evolve(state, event) {
    switch (event.type) {
      case 'StoreUpserted': {
        const { upserted_at, ...data } = event.data;
        return state.exists
          ? { ...state, ...data, updated_at: upserted_at }
          : {
              ...data,
              exists: true,
              updated_at: upserted_at,
              curbside_pickup_setting: defaultCurbsidePickupSetting(),
              curbside_updated_at: upserted_at,
            };
      }
      case 'CurbsidePickupSettingChanged': {
        if (!state.exists) return state;
        const { store_id: _, changed_at, ...setting } = event.data;
        return { ...state, curbside_pickup_setting: setting, curbside_updated_at: changed_at };
      }
    }
  },
};

function withoutKey<T extends object, K extends keyof T>(value: T, key: K): Omit<T, K> {
  const { [key]: _, ...rest } = value;
  return rest;
}

function storeData(state: Extract<StoreState, { exists: true }>): StoreData {
  const {
    exists: _,
    updated_at: __,
    curbside_pickup_setting: ___,
    curbside_updated_at: ____,
    ...data
  } = state;
  return data;
}

/** Whether curbside arrivals (and curbside checkouts) are accepted: the store exists and its setting is on. */
export const curbsideEnabled = (state: StoreState) => state.exists && state.curbside_pickup_setting.enabled;

/** The partner `store` record, without the read side's `rating` and `reviews_count`; null if no store. */
export function toRecord(state: StoreState) {
  if (!state.exists) return null;
  const { store_id, ...data } = storeData(state);
  return { id: store_id, ...data, updated_at: state.updated_at };
}
export type StoreRecord = NonNullable<ReturnType<typeof toRecord>>;

/** The partner `curbside_pickup_setting` record; null if no store. */
export function toCurbsidePickupSettingRecord(state: StoreState) {
  if (!state.exists) return null;
  return {
    store_id: state.store_id,
    ...state.curbside_pickup_setting,
    updated_at: state.curbside_updated_at,
  };
}
export type CurbsidePickupSettingRecord = NonNullable<ReturnType<typeof toCurbsidePickupSettingRecord>>;
