import test from 'ava';
import { fold } from '../../domain/decider.ts';
import {
  DEFAULT_TOKEN_DAYS,
  decider,
  events,
  MAX_ACTIVE_TOKENS,
  type OperatorAccountCommand,
  type OperatorAccountEvent,
  operatorEmailInput,
  roleCovers,
  streamId,
  type TokenMaterial,
  tokenExpiry,
  tokenWorks,
  toOperatorRecord,
} from '../../domain/operator-account.ts';
import { scenario } from './gwt.ts';

const at = '2026-03-01T10:00:00.000Z';
const later = '2026-03-02T10:00:00.000Z';
const operator_id = '7d1c2a3b-6d7e-4f80-9a1b-2c3d4e5f6071';
const hash = (n: number) => n.toString(16).padStart(64, '0');
const token = (n: number, expires_at = '2026-05-30T10:00:00.000Z'): TokenMaterial => ({
  token_id: `tok_${n}`,
  token_hash: hash(n),
  token_prefix: `pds_op_${n}`,
  expires_at,
});
const account = scenario(decider);

type Create = Extract<OperatorAccountCommand, { type: 'CreateOperatorAccount' }>;
const create = (over: Partial<Create> = {}): Create => ({
  type: 'CreateOperatorAccount',
  operator_id,
  name: 'Ana Lee',
  email: 'ana@example.com',
  role: 'auditor',
  token: token(1),
  email_taken_by: null,
  at,
  ...over,
});
const created: OperatorAccountEvent[] = [
  events.OperatorAccountCreated({
    operator_id,
    name: 'Ana Lee',
    email: 'ana@example.com',
    role: 'auditor',
    created_at: at,
  }),
  events.OperatorTokenIssued({ operator_id, ...token(1), issued_at: at }),
];
const disabled = events.OperatorAccountDisabled({ operator_id, disabled_at: at });
const revoked = events.OperatorTokenRevoked({ operator_id, token_id: 'tok_1', revoked_at: at });

test('streamId is operator-<id>', (t) => {
  t.is(streamId(operator_id), `operator-${operator_id}`);
});

test('roles are ordered: admin covers all, operator covers auditor, auditor only itself', (t) => {
  t.true(roleCovers('admin', 'admin') && roleCovers('admin', 'operator') && roleCovers('admin', 'auditor'));
  t.true(roleCovers('operator', 'operator') && roleCovers('operator', 'auditor'));
  t.false(roleCovers('operator', 'admin'));
  t.true(roleCovers('auditor', 'auditor'));
  t.false(roleCovers('auditor', 'operator'));
  t.false(roleCovers('auditor', 'admin'));
});

// CreateOperatorAccount

test('CreateOperatorAccount: the account and its first token, with the trimmed name', (t) => {
  account
    .given([])
    .when(create({ name: '  Ana Lee  ' }))
    .thenEmits(t, created);
});

test('CreateOperatorAccount refuses an account that exists, a taken email, a bad name or email', (t) => {
  account.given(created).when(create()).thenRefused(t, 'operator_exists', 'conflict');
  const taken = account
    .given([])
    .when(create({ email_taken_by: 'other-account' }))
    .thenRefused(t, 'email_taken', 'conflict');
  t.false(taken?.message.includes('ana@example.com'), 'the address is not repeated');
  t.is(taken?.details?.operator_id, 'other-account');
  account
    .given([])
    .when(create({ name: ' ' }))
    .thenRefused(t, 'invalid_name', 'invalid');
  account
    .given([])
    .when(create({ email: 'not an email' }))
    .thenRefused(t, 'invalid_email', 'invalid');
});

test('a token expires after it is issued and within 365 days; 90 days by default', (t) => {
  account
    .given([])
    .when(create({ token: token(1, at) }))
    .thenRefused(t, 'invalid_expiry', 'invalid');
  account
    .given([])
    .when(create({ token: token(1, '2027-03-02T10:00:00.000Z') }))
    .thenRefused(t, 'invalid_expiry', 'invalid');
  account
    .given([])
    .when(create({ token: token(1, '2027-03-01T10:00:00.000Z') }))
    .thenEmits(t, [
      created[0],
      events.OperatorTokenIssued({ operator_id, ...token(1, '2027-03-01T10:00:00.000Z'), issued_at: at }),
    ]);
  t.is(tokenExpiry(at, {}), new Date(Date.parse(at) + DEFAULT_TOKEN_DAYS * 86_400_000).toISOString());
  t.is(tokenExpiry(at, { expires_in_days: 1 }), '2026-03-02T10:00:00.000Z');
  t.is(tokenExpiry(at, { expires_at: '2026-04-01T12:00:00+02:00' }), '2026-04-01T10:00:00.000Z');
});

test('emails are compared as typed lower-cased and trimmed; anything else is refused', (t) => {
  t.is(operatorEmailInput.parse('  Ana.Lee@Example.COM '), 'ana.lee@example.com');
  t.false(operatorEmailInput.safeParse('ana@').success);
  t.false(operatorEmailInput.safeParse(`${'a'.repeat(250)}@example.com`).success);
});

// UpdateOperatorAccount

test('UpdateOperatorAccount changes the role, disables and enables; what it already is appends nothing', (t) => {
  account
    .given(created)
    .when({ type: 'UpdateOperatorAccount', role: 'operator', enabled: false, at: later })
    .thenEmits(t, [
      events.OperatorRoleChanged({ operator_id, role: 'operator', changed_at: later }),
      events.OperatorAccountDisabled({ operator_id, disabled_at: later }),
    ]);
  account
    .given(created)
    .when({ type: 'UpdateOperatorAccount', role: 'auditor', enabled: true, at })
    .thenEmits(t, []);
  account
    .given([...created, disabled])
    .when({ type: 'UpdateOperatorAccount', enabled: true, at: later })
    .thenEmits(t, [events.OperatorAccountEnabled({ operator_id, enabled_at: later })]);
  account
    .given([])
    .when({ type: 'UpdateOperatorAccount', role: 'admin', at })
    .thenRefused(t, 'operator_not_found', 'not_found');
});

// Tokens

test('IssueOperatorToken adds a token; refused for a disabled account, a reused id or hash, too many', (t) => {
  account
    .given(created)
    .when({ type: 'IssueOperatorToken', token: token(2), at: later })
    .thenEmits(t, [events.OperatorTokenIssued({ operator_id, ...token(2), issued_at: later })]);
  account
    .given([...created, disabled])
    .when({ type: 'IssueOperatorToken', token: token(2), at: later })
    .thenRefused(t, 'operator_disabled', 'conflict');
  account
    .given(created)
    .when({ type: 'IssueOperatorToken', token: { ...token(2), token_id: 'tok_1' }, at: later })
    .thenRefused(t, 'token_exists', 'conflict');
  account
    .given(created)
    .when({ type: 'IssueOperatorToken', token: { ...token(2), token_hash: hash(1) }, at: later })
    .thenRefused(t, 'token_exists', 'conflict');
  const full = [
    ...created,
    ...Array.from({ length: MAX_ACTIVE_TOKENS - 1 }, (_, i) =>
      events.OperatorTokenIssued({ operator_id, ...token(i + 2), issued_at: at }),
    ),
  ];
  account
    .given(full)
    .when({ type: 'IssueOperatorToken', token: token(99), at: later })
    .thenRefused(t, 'too_many_tokens', 'conflict');
  // An expired token no longer counts.
  account
    .given(full)
    .when({
      type: 'IssueOperatorToken',
      token: token(99, '2026-09-01T00:00:00.000Z'),
      at: '2026-06-01T00:00:00.000Z',
    })
    .thenEmits(t, [
      events.OperatorTokenIssued({
        operator_id,
        ...token(99, '2026-09-01T00:00:00.000Z'),
        issued_at: '2026-06-01T00:00:00.000Z',
      }),
    ]);
});

test('RevokeOperatorToken revokes an active token; unknown is 404, revoked twice is 409', (t) => {
  account.given(created).when({ type: 'RevokeOperatorToken', token_id: 'tok_1', at }).thenEmits(t, [revoked]);
  account
    .given(created)
    .when({ type: 'RevokeOperatorToken', token_id: 'tok_9', at })
    .thenRefused(t, 'token_not_found', 'not_found');
  account
    .given([...created, revoked])
    .when({ type: 'RevokeOperatorToken', token_id: 'tok_1', at })
    .thenRefused(t, 'token_revoked', 'conflict');
});

test('RotateOperatorToken replaces an active token at one instant', (t) => {
  account
    .given(created)
    .when({ type: 'RotateOperatorToken', token_id: 'tok_1', token: token(2), at: later })
    .thenEmits(t, [
      events.OperatorTokenRotated({ operator_id, old_token_id: 'tok_1', ...token(2), rotated_at: later }),
    ]);
  account
    .given([...created, revoked])
    .when({ type: 'RotateOperatorToken', token_id: 'tok_1', token: token(2), at: later })
    .thenRefused(t, 'token_revoked', 'conflict');
  account
    .given([...created, disabled])
    .when({ type: 'RotateOperatorToken', token_id: 'tok_1', token: token(2), at: later })
    .thenRefused(t, 'operator_disabled', 'conflict');
});

test('the state and record: tokens by status, expired by the clock, never a hash in the record', (t) => {
  const state = fold(decider, [
    ...created,
    events.OperatorTokenRotated({ operator_id, old_token_id: 'tok_1', ...token(2), rotated_at: later }),
    events.OperatorTokenIssued({ operator_id, ...token(3, '2026-03-10T00:00:00.000Z'), issued_at: later }),
  ]);
  if (!state.exists) throw new Error('no account');
  const now = new Date('2026-04-01T00:00:00.000Z');
  t.deepEqual(
    state.tokens.map((tk) => [tk.token_id, tk.status, tokenWorks(tk, now)]),
    [
      ['tok_1', 'revoked', false],
      ['tok_2', 'active', true],
      ['tok_3', 'active', false],
    ],
  );
  const record = toOperatorRecord(state, now);
  t.deepEqual(
    record.tokens.map((tk) => tk.status),
    ['revoked', 'active', 'expired'],
  );
  t.false(JSON.stringify(record).includes(hash(2)), 'no token hash in the record');
  t.like(record, { operator_id, name: 'Ana Lee', email: 'ana@example.com', role: 'auditor', enabled: true });
});
