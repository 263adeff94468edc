import test from 'ava';
import { generateApiKey } from '../../application/credentials.ts';
import { fold } from '../../domain/decider.ts';
import {
  decider,
  events,
  MAX_ACTIVE_KEYS,
  type PartnerCommand,
  type PartnerEvent,
  type PartnerKind,
  streamId,
  toPartnerRecord,
} from '../../domain/partner.ts';
import { scenario } from './gwt.ts';

const at = '2026-03-01T10:00:00.000Z';
const later = '2026-03-02T10:00:00.000Z';
const partner_id = '0b9f3c1e-5d2a-4c8e-9f1a-2b3c4d5e6f70';
const partner = scenario(decider);

const hex = (c: string) => c.repeat(64);
const key1 = { key_id: 'key_aaaaaaaaaaaa', key_hash: hex('a'), key_prefix: 'pds_key_aaaa' };
const key2 = { key_id: 'key_bbbbbbbbbbbb', key_hash: hex('b'), key_prefix: 'pds_key_bbbb' };
const key3 = { key_id: 'key_cccccccccccc', key_hash: hex('c'), key_prefix: 'pds_key_cccc' };

type Register = Extract<PartnerCommand, { type: 'RegisterPartner' }>;
const register = (over: Partial<Register> = {}): Register => ({
  type: 'RegisterPartner',
  partner_id,
  name: 'Kiva Marketing',
  kind: 'brand',
  brand_ids: [7],
  store_ids: [],
  all_brands: false,
  key: key1,
  unknown_brand_ids: [],
  unknown_store_ids: [],
  at,
  ...over,
});

const registered = (over: Partial<Parameters<typeof events.PartnerRegistered>[0]> = {}) =>
  events.PartnerRegistered({
    partner_id,
    name: 'Kiva Marketing',
    kind: 'brand',
    brand_ids: [7],
    store_ids: [],
    all_brands: false,
    rate_limit_per_minute: 600,
    registered_at: at,
    ...over,
  });
const issued = (key = key1, when = at) => events.PartnerKeyIssued({ partner_id, ...key, issued_at: when });
const history: PartnerEvent[] = [registered(), issued()];

test('streamId is partner-<id>', (t) => {
  t.is(streamId(partner_id), `partner-${partner_id}`);
});

// RegisterPartner

test('RegisterPartner: PartnerRegistered and PartnerKeyIssued, rate limit 600 by default', (t) => {
  partner.given([]).when(register()).thenEmits(t, history);
});

test('RegisterPartner keeps a given rate limit, trims the name, sorts and dedupes ids', (t) => {
  partner
    .given([])
    .when(register({ name: '  Kiva  ', brand_ids: [9, 7, 9], rate_limit_per_minute: 60 }))
    .thenEmits(t, [registered({ name: 'Kiva', brand_ids: [7, 9], rate_limit_per_minute: 60 }), issued()]);
});

test('RegisterPartner of each kind with a valid scope', (t) => {
  const ok: [PartnerKind, Partial<Register>][] = [
    ['brand', { brand_ids: [1, 2] }],
    ['brand_feed', { brand_ids: [1] }],
    ['brand_feed', { brand_ids: [], all_brands: true }],
    ['store_operator', { brand_ids: [], store_ids: [3] }],
    ['store_menu_feed', { brand_ids: [], store_ids: [3, 4] }],
  ];
  for (const [kind, scope] of ok) {
    const [e] = decider.decide(register({ kind, ...scope }), decider.initialState);
    t.is(e.type, 'PartnerRegistered', kind);
    if (e.type === 'PartnerRegistered') {
      t.is(e.data.kind, kind);
      t.deepEqual(e.data.brand_ids, scope.brand_ids);
      t.deepEqual(e.data.store_ids, scope.store_ids ?? []);
      t.is(e.data.all_brands, scope.all_brands ?? false);
    }
  }
});

const badScopes: [string, Partial<Register>, string][] = [
  ['brand without brand ids', { kind: 'brand', brand_ids: [] }, 'brand_ids'],
  ['brand with store ids', { kind: 'brand', store_ids: [3] }, 'store_ids'],
  ['brand with all_brands', { kind: 'brand', all_brands: true }, 'all_brands'],
  ['brand feed without brand ids or all_brands', { kind: 'brand_feed', brand_ids: [] }, 'brand_ids'],
  ['brand feed with brand ids and all_brands', { kind: 'brand_feed', all_brands: true }, 'brand_ids'],
  ['brand feed with store ids', { kind: 'brand_feed', store_ids: [3] }, 'store_ids'],
  ['store operator without store ids', { kind: 'store_operator', brand_ids: [] }, 'store_ids'],
  ['store operator with brand ids', { kind: 'store_operator', store_ids: [3] }, 'brand_ids'],
  [
    'store operator with all_brands',
    { kind: 'store_operator', brand_ids: [], store_ids: [3], all_brands: true },
    'all_brands',
  ],
  ['store menu feed without store ids', { kind: 'store_menu_feed', brand_ids: [] }, 'store_ids'],
  ['store menu feed with brand ids', { kind: 'store_menu_feed', store_ids: [3] }, 'brand_ids'],
  ['too many brand ids', { brand_ids: Array.from({ length: 1001 }, (_, i) => i + 1) }, 'brand_ids'],
];
for (const [name, over, field] of badScopes) {
  test(`RegisterPartner refused: ${name}`, (t) => {
    const err = partner.given([]).when(register(over)).thenRefused(t, 'invalid_scope', 'invalid');
    t.is(err?.details?.field, field);
  });
}

test('RegisterPartner with unknown brand ids is refused, naming them', (t) => {
  const err = partner
    .given([])
    .when(register({ brand_ids: [7, 8, 9], unknown_brand_ids: [9, 8] }))
    .thenRefused(t, 'unknown_brand_id', 'invalid');
  t.deepEqual(err?.details?.brand_ids, [8, 9]);
});

test('RegisterPartner with unknown store ids is refused, naming them', (t) => {
  const err = partner
    .given([])
    .when(register({ kind: 'store_operator', brand_ids: [], store_ids: [3, 4], unknown_store_ids: [4] }))
    .thenRefused(t, 'unknown_store_id', 'invalid');
  t.deepEqual(err?.details?.store_ids, [4]);
});

test('RegisterPartner with an empty name is refused', (t) => {
  partner
    .given([])
    .when(register({ name: '   ' }))
    .thenRefused(t, 'invalid_name', 'invalid');
});

test('RegisterPartner with a bad rate limit is refused', (t) => {
  for (const rate_limit_per_minute of [0, -1, 1.5, 1_000_000]) {
    partner
      .given([])
      .when(register({ rate_limit_per_minute }))
      .thenRefused(t, 'invalid_rate_limit', 'invalid');
  }
});

test('RegisterPartner on an existing partner is refused', (t) => {
  partner.given(history).when(register()).thenRefused(t, 'partner_exists', 'conflict');
});

// IssuePartnerKey

test('IssuePartnerKey: PartnerKeyIssued', (t) => {
  partner
    .given(history)
    .when({ type: 'IssuePartnerKey', key: key2, at: later })
    .thenEmits(t, [issued(key2, later)]);
});

test('IssuePartnerKey beyond the active-key limit is refused', (t) => {
  const keys = Array.from({ length: MAX_ACTIVE_KEYS - 1 }, (_, i) =>
    issued({ key_id: `key_n${i}`, key_hash: hex(i.toString(16)), key_prefix: `pds_key_n${i}` }),
  );
  partner
    .given([...history, ...keys])
    .when({ type: 'IssuePartnerKey', key: key2, at })
    .thenRefused(t, 'too_many_keys', 'conflict');
});

test('IssuePartnerKey counts only active keys toward the limit', (t) => {
  const keys = Array.from({ length: MAX_ACTIVE_KEYS - 1 }, (_, i) =>
    issued({ key_id: `key_n${i}`, key_hash: hex(i.toString(16)), key_prefix: `pds_key_n${i}` }),
  );
  const revoked = events.PartnerKeyRevoked({ partner_id, key_id: 'key_n0', revoked_at: at });
  partner
    .given([...history, ...keys, revoked])
    .when({ type: 'IssuePartnerKey', key: key2, at })
    .thenEmits(t, [issued(key2)]);
});

test('IssuePartnerKey with a key id or hash already used is refused', (t) => {
  partner
    .given(history)
    .when({ type: 'IssuePartnerKey', key: { ...key2, key_id: key1.key_id }, at })
    .thenRefused(t, 'key_exists', 'conflict');
  partner
    .given(history)
    .when({ type: 'IssuePartnerKey', key: { ...key2, key_hash: key1.key_hash }, at })
    .thenRefused(t, 'key_exists', 'conflict');
});

test('IssuePartnerKey for a missing partner is refused', (t) => {
  partner
    .given([])
    .when({ type: 'IssuePartnerKey', key: key2, at })
    .thenRefused(t, 'partner_not_found', 'not_found');
});

// RevokePartnerKey

test('RevokePartnerKey: PartnerKeyRevoked', (t) => {
  partner
    .given(history)
    .when({ type: 'RevokePartnerKey', key_id: key1.key_id, at: later })
    .thenEmits(t, [events.PartnerKeyRevoked({ partner_id, key_id: key1.key_id, revoked_at: later })]);
});

test('RevokePartnerKey of an unknown key is refused', (t) => {
  partner
    .given(history)
    .when({ type: 'RevokePartnerKey', key_id: 'key_nope', at })
    .thenRefused(t, 'key_not_found', 'not_found');
});

test('RevokePartnerKey of a revoked key is refused', (t) => {
  partner
    .given([...history, events.PartnerKeyRevoked({ partner_id, key_id: key1.key_id, revoked_at: at })])
    .when({ type: 'RevokePartnerKey', key_id: key1.key_id, at })
    .thenRefused(t, 'key_revoked', 'conflict');
});

test('RevokePartnerKey for a missing partner is refused', (t) => {
  partner
    .given([])
    .when({ type: 'RevokePartnerKey', key_id: key1.key_id, at })
    .thenRefused(t, 'partner_not_found', 'not_found');
});

// RotatePartnerKey

test('RotatePartnerKey: one PartnerKeyRotated; the old key revoked, the new one active', (t) => {
  const rotated = events.PartnerKeyRotated({
    partner_id,
    old_key_id: key1.key_id,
    key_id: key2.key_id,
    key_hash: key2.key_hash,
    key_prefix: key2.key_prefix,
    rotated_at: later,
  });
  partner
    .given(history)
    .when({ type: 'RotatePartnerKey', key_id: key1.key_id, key: key2, at: later })
    .thenEmits(t, [rotated]);
  const state = fold(decider, [...history, rotated]);
  t.true(state.exists);
  if (state.exists) {
    t.deepEqual(state.keys, [
      { ...key1, status: 'revoked', issued_at: at, revoked_at: later },
      { ...key2, status: 'active', issued_at: later, revoked_at: null },
    ]);
  }
});

test('RotatePartnerKey works at the active-key limit', (t) => {
  const keys = Array.from({ length: MAX_ACTIVE_KEYS - 1 }, (_, i) =>
    issued({ key_id: `key_n${i}`, key_hash: hex(i.toString(16)), key_prefix: `pds_key_n${i}` }),
  );
  const result = decider.decide(
    { type: 'RotatePartnerKey', key_id: key1.key_id, key: key2, at },
    fold(decider, [...history, ...keys]),
  );
  t.is(result.length, 1);
});

test('RotatePartnerKey of an unknown key is refused', (t) => {
  partner
    .given(history)
    .when({ type: 'RotatePartnerKey', key_id: 'key_nope', key: key2, at })
    .thenRefused(t, 'key_not_found', 'not_found');
});

test('RotatePartnerKey of a revoked key is refused', (t) => {
  partner
    .given([
      ...history,
      issued(key2),
      events.PartnerKeyRevoked({ partner_id, key_id: key1.key_id, revoked_at: at }),
    ])
    .when({ type: 'RotatePartnerKey', key_id: key1.key_id, key: key3, at })
    .thenRefused(t, 'key_revoked', 'conflict');
});

test('RotatePartnerKey to a key id already used is refused', (t) => {
  partner
    .given([...history, issued(key2)])
    .when({ type: 'RotatePartnerKey', key_id: key1.key_id, key: { ...key3, key_id: key2.key_id }, at })
    .thenRefused(t, 'key_exists', 'conflict');
});

test('RotatePartnerKey for a missing partner is refused', (t) => {
  partner
    .given([])
    .when({ type: 'RotatePartnerKey', key_id: key1.key_id, key: key2, at })
    .thenRefused(t, 'partner_not_found', 'not_found');
});

// ChangePartnerRateLimit

test('ChangePartnerRateLimit: PartnerRateLimitChanged', (t) => {
  partner
    .given(history)
    .when({ type: 'ChangePartnerRateLimit', rate_limit_per_minute: 1200, at: later })
    .thenEmits(t, [
      events.PartnerRateLimitChanged({ partner_id, rate_limit_per_minute: 1200, changed_at: later }),
    ]);
});

test('ChangePartnerRateLimit to the same limit: nothing', (t) => {
  partner
    .given(history)
    .when({ type: 'ChangePartnerRateLimit', rate_limit_per_minute: 600, at })
    .thenEmits(t, []);
});

test('ChangePartnerRateLimit to a bad limit is refused', (t) => {
  partner
    .given(history)
    .when({ type: 'ChangePartnerRateLimit', rate_limit_per_minute: 0, at })
    .thenRefused(t, 'invalid_rate_limit', 'invalid');
});

test('ChangePartnerRateLimit for a missing partner is refused', (t) => {
  partner
    .given([])
    .when({ type: 'ChangePartnerRateLimit', rate_limit_per_minute: 60, at })
    .thenRefused(t, 'partner_not_found', 'not_found');
});

// State and record

test('state: keys with status and dates, updated_at follows the last event', (t) => {
  const state = fold(decider, [
    ...history,
    issued(key2, later),
    events.PartnerKeyRevoked({ partner_id, key_id: key1.key_id, revoked_at: later }),
    events.PartnerRateLimitChanged({ partner_id, rate_limit_per_minute: 60, changed_at: later }),
  ]);
  if (!state.exists) return t.fail();
  t.is(state.rate_limit_per_minute, 60);
  t.is(state.updated_at, later);
  t.deepEqual(
    state.keys.map((k) => [k.key_id, k.status, k.issued_at, k.revoked_at]),
    [
      [key1.key_id, 'revoked', at, later],
      [key2.key_id, 'active', later, null],
    ],
  );
});

test('toPartnerRecord: scope, limit and keys without hashes', (t) => {
  const state = fold(decider, [
    ...history,
    events.PartnerKeyRevoked({ partner_id, key_id: key1.key_id, revoked_at: later }),
  ]);
  if (!state.exists) return t.fail();
  const record = toPartnerRecord(state);
  t.deepEqual(record, {
    partner_id,
    name: 'Kiva Marketing',
    kind: 'brand',
    brand_ids: [7],
    store_ids: [],
    all_brands: false,
    rate_limit_per_minute: 600,
    keys: [
      {
        key_id: key1.key_id,
        key_prefix: key1.key_prefix,
        status: 'revoked',
        issued_at: at,
        revoked_at: later,
      },
    ],
    created_at: at,
    updated_at: later,
  });
  t.false(JSON.stringify(record).includes(key1.key_hash));
});

test('events and state never carry the plaintext key', (t) => {
  const k1 = generateApiKey();
  const k2 = generateApiKey();
  const k3 = generateApiKey();
  const material = (k: typeof k1) => ({ key_id: k.key_id, key_hash: k.key_hash, key_prefix: k.key_prefix });
  const produced: PartnerEvent[] = [];
  let state = decider.initialState;
  for (const command of [
    register({ key: material(k1) }),
    { type: 'IssuePartnerKey', key: material(k2), at } as const,
    { type: 'RotatePartnerKey', key_id: k1.key_id, key: material(k3), at } as const,
  ]) {
    for (const e of decider.decide(command, state)) {
      produced.push(e);
      state = decider.evolve(state, e);
    }
  }
  t.deepEqual(
    produced.map((e) => e.type),
    ['PartnerRegistered', 'PartnerKeyIssued', 'PartnerKeyIssued', 'PartnerKeyRotated'],
  );
  const text = JSON.stringify({ produced, state });
  for (const k of [k1, k2, k3]) {
    t.false(text.includes(k.api_key));
    // Not even the random part of the key beyond its display prefix.
    t.false(text.includes(k.api_key.slice(12, 24)));
    t.true(text.includes(k.key_hash));
  }
});

test('an event handed a plaintext key by mistake drops it', (t) => {
  const k = generateApiKey();
  const e = events.PartnerKeyIssued({ partner_id, ...k, issued_at: at } as Parameters<
    typeof events.PartnerKeyIssued
  >[0]);
  t.false(JSON.stringify(e).includes(k.api_key));
  t.false('api_key' in e.data);
});
