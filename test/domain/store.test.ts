import test from 'ava';
import {
  curbsideEnabled,
  curbsidePickupSettingFields,
  decider,
  defaultCurbsidePickupSetting,
  events,
  storeFields,
  streamId,
  toCurbsidePickupSettingRecord,
  toRecord,
} from '../../domain/store.ts';
import { scenario } from './gwt.ts';

const at = '2026-03-01T10:00:00.000Z';
const later = '2026-03-02T10:00:00.000Z';
const store = scenario(decider);

const body = {
  name: 'Green Leaf',
  address: '1 Main St',
  city: 'Denver',
  state: 'CO',
  zip: '80202',
  lat: 39.75,
  long: -104.99,
};
const fields = storeFields.parse(body);
const upserted = events.StoreUpserted({
  store_id: 3,
  name: 'Green Leaf',
  display_name: null,
  store_url: null,
  address: '1 Main St',
  city: 'Denver',
  state: 'CO',
  zip: '80202',
  lat: 39.75,
  long: -104.99,
  phone: null,
  time_zone: 'America/Denver',
  recreational: true,
  medical: false,
  pickup: true,
  delivery: false,
  curbside: false,
  working_hours: [],
  upserted_at: at,
});
const settingBody = { enabled: true, arrival_instructions: 'Park in bay 2' };
const setting = curbsidePickupSettingFields.parse(settingBody);
const settingChanged = events.CurbsidePickupSettingChanged({
  store_id: 3,
  enabled: true,
  arrival_instructions: 'Park in bay 2',
  hours: [],
  window_minutes: 15,
  max_orders_per_window: 10,
  payment_options: [],
  arrival_form_fields: [
    { name: 'vehicle_make', label: 'Vehicle make', required: true },
    { name: 'vehicle_color', label: 'Vehicle color', required: true },
    { name: 'parking_spot', label: 'Parking spot', required: false },
  ],
  changed_at: later,
});

test('streamId', (t) => {
  t.is(streamId(3), 'store-3');
});

test('UpsertStore on a new store: StoreUpserted with the defaults filled in', (t) => {
  store.given([]).when({ type: 'UpsertStore', store_id: 3, fields, at }).thenEmits(t, [upserted]);
});

test('UpsertStore without a time zone takes the one of its state', (t) => {
  const f = storeFields.parse({ ...body, state: 'CA', zip: '94103' });
  const [event] = decider.decide({ type: 'UpsertStore', store_id: 3, fields: f, at }, decider.initialState);
  t.is(event.type === 'StoreUpserted' && event.data.time_zone, 'America/Los_Angeles');
});

test('UpsertStore with every field: StoreUpserted carrying them', (t) => {
  const full = storeFields.parse({
    ...body,
    display_name: 'Green Leaf Denver',
    store_url: 'https://greenleaf.example.com',
    phone: '(303) 555-0100',
    time_zone: 'America/Phoenix',
    recreational: false,
    medical: true,
    pickup: false,
    delivery: true,
    curbside: true,
    working_hours: [{ day: 'monday', from: '09:00', to: '21:00' }],
  });
  store
    .given([upserted])
    .when({ type: 'UpsertStore', store_id: 3, fields: full, at: later })
    .thenEmits(t, [
      events.StoreUpserted({
        ...upserted.data,
        display_name: 'Green Leaf Denver',
        store_url: 'https://greenleaf.example.com',
        phone: '(303) 555-0100',
        time_zone: 'America/Phoenix',
        recreational: false,
        medical: true,
        pickup: false,
        delivery: true,
        curbside: true,
        working_hours: [{ day: 'monday', from: '09:00', to: '21:00' }],
        upserted_at: later,
      }),
    ]);
});

test('UpsertStore with the same data: nothing', (t) => {
  store.given([upserted]).when({ type: 'UpsertStore', store_id: 3, fields, at: later }).thenEmits(t, []);
});

test('UpsertStore after a curbside change with the same store data: nothing', (t) => {
  store
    .given([upserted, settingChanged])
    .when({ type: 'UpsertStore', store_id: 3, fields, at: later })
    .thenEmits(t, []);
});

test('SetCurbsidePickupSetting: CurbsidePickupSettingChanged with the full setting', (t) => {
  store
    .given([upserted])
    .when({ type: 'SetCurbsidePickupSetting', store_id: 3, fields: setting, at: later })
    .thenEmits(t, [settingChanged]);
});

test('SetCurbsidePickupSetting with the same setting: nothing', (t) => {
  store
    .given([upserted, settingChanged])
    .when({ type: 'SetCurbsidePickupSetting', store_id: 3, fields: setting, at: later })
    .thenEmits(t, []);
});

test('SetCurbsidePickupSetting to the default a store starts with: nothing', (t) => {
  store
    .given([upserted])
    .when({
      type: 'SetCurbsidePickupSetting',
      store_id: 3,
      fields: curbsidePickupSettingFields.parse({ enabled: false }),
      at,
    })
    .thenEmits(t, []);
});

test('SetCurbsidePickupSetting on a missing store is refused', (t) => {
  store
    .given([])
    .when({ type: 'SetCurbsidePickupSetting', store_id: 3, fields: setting, at })
    .thenRefused(t, 'store_not_found', 'not_found');
});

test('SetCurbsidePickupSetting with a form field named twice is refused', (t) => {
  const err = store
    .given([upserted])
    .when({
      type: 'SetCurbsidePickupSetting',
      store_id: 3,
      fields: {
        ...setting,
        arrival_form_fields: [
          { name: 'plate', label: 'Plate', required: true },
          { name: 'plate', label: 'License plate', required: false },
        ],
      },
      at,
    })
    .thenRefused(t, 'duplicate_arrival_form_field', 'invalid');
  t.deepEqual(err?.details, { name: 'plate' });
});

test('state: a new store has curbside off with the default form; a change turns it on', (t) => {
  const before = store.given([upserted]).state;
  t.false(curbsideEnabled(before));
  t.deepEqual(before.exists && before.curbside_pickup_setting, defaultCurbsidePickupSetting());
  const after = store.given([upserted, settingChanged]).state;
  t.true(curbsideEnabled(after));
  t.false(curbsideEnabled(store.given([]).state));
});

test('toRecord: the partner store record', (t) => {
  t.is(toRecord(store.given([]).state), null);
  t.deepEqual(toRecord(store.given([upserted, settingChanged]).state), {
    id: 3,
    name: 'Green Leaf',
    display_name: null,
    store_url: null,
    address: '1 Main St',
    city: 'Denver',
    state: 'CO',
    zip: '80202',
    lat: 39.75,
    long: -104.99,
    phone: null,
    time_zone: 'America/Denver',
    recreational: true,
    medical: false,
    pickup: true,
    delivery: false,
    curbside: false,
    working_hours: [],
    updated_at: at,
  });
});

test('toCurbsidePickupSettingRecord: the setting with its store and time', (t) => {
  t.is(toCurbsidePickupSettingRecord(store.given([]).state), null);
  t.deepEqual(toCurbsidePickupSettingRecord(store.given([upserted]).state), {
    store_id: 3,
    ...defaultCurbsidePickupSetting(),
    updated_at: at,
  });
  const { store_id, changed_at, ...data } = settingChanged.data;
  t.deepEqual(toCurbsidePickupSettingRecord(store.given([upserted, settingChanged]).state), {
    store_id,
    ...data,
    updated_at: changed_at,
  });
});

// --- request schemas ---------------------------------------------------------------------------

const issuePaths = (r: { success: boolean; error?: { issues: { path: PropertyKey[] }[] } }) => [
  ...new Set(r.error?.issues.map((i) => i.path.join('.'))),
];

test('storeFields refuses unknown fields', (t) => {
  const r = storeFields.safeParse({ ...body, rating: 5 });
  t.false(r.success);
  t.is(r.error?.issues[0].code, 'unrecognized_keys');
});

test('storeFields refuses missing required fields, naming each', (t) => {
  const r = storeFields.safeParse({});
  t.deepEqual(issuePaths(r).sort(), ['address', 'city', 'lat', 'long', 'name', 'state', 'zip']);
});

test('storeFields refuses wrong types', (t) => {
  t.deepEqual(issuePaths(storeFields.safeParse({ ...body, lat: '39.7' })), ['lat']);
  t.deepEqual(issuePaths(storeFields.safeParse({ ...body, pickup: 'yes' })), ['pickup']);
  t.deepEqual(issuePaths(storeFields.safeParse({ ...body, working_hours: {} })), ['working_hours']);
});

test('storeFields refuses out-of-range and malformed values', (t) => {
  for (const [field, value] of [
    ['lat', 90.5],
    ['lat', -91],
    ['long', 180.1],
    ['long', -181],
    ['state', 'Colorado'],
    ['state', 'co'],
    ['state', 'XX'],
    ['zip', '8020'],
    ['zip', '80202-1234'],
    ['name', '   '],
    ['store_url', 'ftp://greenleaf.example.com'],
    ['store_url', 'not a url'],
    ['phone', '12345'],
    ['time_zone', 'Mars/Olympus_Mons'],
    ['time_zone', '+05:00'],
  ] as const) {
    t.deepEqual(
      issuePaths(storeFields.safeParse({ ...body, [field]: value })),
      [field],
      `${field}: ${value}`,
    );
  }
  t.deepEqual(
    issuePaths(
      storeFields.safeParse({ ...body, working_hours: [{ day: 'monday', from: '9am', to: '21:00' }] }),
    ),
    ['working_hours.0.from'],
  );
});

test('storeFields fills the defaults', (t) => {
  t.deepEqual(fields, {
    ...body,
    display_name: null,
    store_url: null,
    phone: null,
    recreational: true,
    medical: false,
    pickup: true,
    delivery: false,
    curbside: false,
    working_hours: [],
  });
});

test('curbsidePickupSettingFields fills the defaults', (t) => {
  const { store_id: _, changed_at: __, ...data } = settingChanged.data;
  t.deepEqual(setting, data);
});

test('curbsidePickupSettingFields refuses unknown, missing, wrong and out-of-range fields', (t) => {
  t.is(
    curbsidePickupSettingFields.safeParse({ enabled: true, colour: 'red' }).error?.issues[0].code,
    'unrecognized_keys',
  );
  t.deepEqual(issuePaths(curbsidePickupSettingFields.safeParse({})), ['enabled']);
  t.deepEqual(issuePaths(curbsidePickupSettingFields.safeParse({ enabled: 'true' })), ['enabled']);
  for (const [field, value] of [
    ['window_minutes', 0],
    ['window_minutes', 7.5],
    ['max_orders_per_window', 0],
    ['payment_options', ['']],
    ['arrival_instructions', 12],
  ] as const) {
    t.deepEqual(
      issuePaths(curbsidePickupSettingFields.safeParse({ enabled: true, [field]: value })),
      [field.concat(Array.isArray(value) ? '.0' : '')],
      `${field}: ${value}`,
    );
  }
  t.deepEqual(
    issuePaths(
      curbsidePickupSettingFields.safeParse({
        enabled: true,
        arrival_form_fields: [{ name: 'Vehicle Make', label: 'x' }],
      }),
    ),
    ['arrival_form_fields.0.name'],
  );
  t.deepEqual(
    issuePaths(
      curbsidePickupSettingFields.safeParse({
        enabled: true,
        arrival_form_fields: [
          { name: 'plate', label: 'Plate' },
          { name: 'plate', label: 'Plate again' },
        ],
      }),
    ),
    ['arrival_form_fields'],
  );
});
