/**
 * Operator account aggregate (`operator-<operator_id>`): one of the people who run the service besides
 * partners, with a role, and the API tokens they call the admin and platform APIs with
 * (docs/operations.md, "Accounts and roles").
 *
 * A token never enters an event or the state in plaintext: only its SHA-256 hash (for the lookup at
 * authentication), a short prefix (to tell tokens apart on screen) and its expiry. The handler
 * generates the token (`application/credentials.ts`), shows it once and hands this aggregate only
 * `{token_id, token_hash, token_prefix, expires_at}`. Each command is decided by a small named
 * function below. The email is personal data: it is validated and stored, and never logged.
 */
import { z } from 'zod';
import { conflict, type Decider, invalid, notFound } from './decider.ts';
import { defineEvent, type EventOf } from './events.ts';
import { keyHash, keyId } from './partner.ts';
import { isoDateTime, nonEmpty, uuid } from './schemas.ts';

export const STREAM_PREFIX = 'operator-';
export const streamId = (operatorId: string) => `${STREAM_PREFIX}${operatorId}`;

/**
 * `admin`: everything, accounts included. `operator`: partners and their keys, webhooks, projections,
 * the platform write API, redeliveries. `auditor`: reads only (cart histories, delivery logs and health,
 * projection status), never a secret and never a write.
 */
export const operatorRoles = ['admin', 'operator', 'auditor'] as const;
export const operatorRole = z.enum(operatorRoles);
export type OperatorRole = z.infer<typeof operatorRole>;

/** Whether `role` may do what `needed` may: admin > operator > auditor. */
export function roleCovers(role: OperatorRole, needed: OperatorRole): boolean {
  return operatorRoles.indexOf(role) <= operatorRoles.indexOf(needed);
}

/** How long a token works when its issuer names no expiry, and the longest it may. */
export const DEFAULT_TOKEN_DAYS = 90;
export const MAX_TOKEN_DAYS = 365;
const DAY_MS = 86_400_000;
/** Tokens an account may hold at once (a rotation replaces one, so it never hits the limit). */
export const MAX_ACTIVE_TOKENS = 10;

export const operatorName = nonEmpty(200);
/** An email address as stored: trimmed and lower-cased (two spellings of one address are one address). */
export const operatorEmail = z.email().max(254);
/** An email address as a client sends it. */
export const operatorEmailInput = z.string().trim().toLowerCase().pipe(operatorEmail);
export const tokenId = keyId;
export const tokenPrefix = z.string().min(1).max(16);
export const tokenMaterial = z.strictObject({
  token_id: tokenId,
  token_hash: keyHash,
  token_prefix: tokenPrefix,
  expires_at: isoDateTime,
});
export type TokenMaterial = z.infer<typeof tokenMaterial>;

export const events = {
  OperatorAccountCreated: defineEvent(
    'OperatorAccountCreated',
    z.object({
      operator_id: uuid,
      name: operatorName,
      email: operatorEmail,
      role: operatorRole,
      created_at: isoDateTime,
    }),
  ),
  OperatorRoleChanged: defineEvent(
    'OperatorRoleChanged',
    z.object({ operator_id: uuid, role: operatorRole, changed_at: isoDateTime }),
  ),
  /** The account's tokens stop working (they are not revoked: enabling the account brings them back). */
  OperatorAccountDisabled: defineEvent(
    'OperatorAccountDisabled',
    z.object({ operator_id: uuid, disabled_at: isoDateTime }),
  ),
  OperatorAccountEnabled: defineEvent(
    'OperatorAccountEnabled',
    z.object({ operator_id: uuid, enabled_at: isoDateTime }),
  ),
  OperatorTokenIssued: defineEvent(
    'OperatorTokenIssued',
    z.object({ operator_id: uuid, ...tokenMaterial.shape, issued_at: isoDateTime }),
  ),
  OperatorTokenRevoked: defineEvent(
    'OperatorTokenRevoked',
    z.object({ operator_id: uuid, token_id: tokenId, revoked_at: isoDateTime }),
  ),
  /** The old token is revoked and the new one works, at the same instant. */
  OperatorTokenRotated: defineEvent(
    'OperatorTokenRotated',
    z.object({ operator_id: uuid, old_token_id: tokenId, ...tokenMaterial.shape, rotated_at: isoDateTime }),
  ),
};
export type OperatorAccountEvent = EventOf<typeof events>;

export type OperatorAccountCommand =
  | {
      type: 'CreateOperatorAccount';
      operator_id: string;
      name: string;
      email: string;
      role: OperatorRole;
      /** The account's first token. */
      token: TokenMaterial;
      /** Context from the handler: the account that already has this email, if one does. */
      email_taken_by: string | null;
      at: string;
    }
  /** Changes the role, disables or enables the account; what it already is appends nothing. */
  | { type: 'UpdateOperatorAccount'; role?: OperatorRole; enabled?: boolean; at: string }
  | { type: 'IssueOperatorToken'; token: TokenMaterial; at: string }
  | { type: 'RevokeOperatorToken'; token_id: string; at: string }
  | { type: 'RotateOperatorToken'; token_id: string; token: TokenMaterial; at: string };

export type OperatorToken = {
  token_id: string;
  token_hash: string;
  token_prefix: string;
  status: 'active' | 'revoked';
  issued_at: string;
  expires_at: string;
  revoked_at: string | null;
};

export type OperatorAccount = {
  exists: true;
  operator_id: string;
  name: string;
  email: string;
  role: OperatorRole;
  enabled: boolean;
  /** In the order they were issued. */
  tokens: OperatorToken[];
  created_at: string;
  updated_at: string;
};
export type OperatorAccountState = { exists: false } | OperatorAccount;

/** Whether a token lets its bearer in at `now`: not revoked, not expired. The account must be enabled too. */
export const tokenWorks = (token: OperatorToken, now: Date) =>
  token.status === 'active' && Date.parse(token.expires_at) > now.getTime();

/** When a token issued at `at` expires: `expires_at`, else `expires_in_days` (default 90) from `at`. */
export function tokenExpiry(at: string, choice: { expires_at?: string; expires_in_days?: number }): string {
  if (choice.expires_at !== undefined) return new Date(choice.expires_at).toISOString();
  return new Date(Date.parse(at) + (choice.expires_in_days ?? DEFAULT_TOKEN_DAYS) * DAY_MS).toISOString();
}

type Command<T extends OperatorAccountCommand['type']> = Extract<OperatorAccountCommand, { type: T }>;

function checkExpiry(token: TokenMaterial, at: string): void {
  const expires = Date.parse(token.expires_at);
  const now = Date.parse(at);
  if (!(expires > now) || expires > now + MAX_TOKEN_DAYS * DAY_MS) {
    throw invalid(
      'invalid_expiry',
      `a token expires after it is issued and at most ${MAX_TOKEN_DAYS} days later`,
      { field: 'expires_at', max_days: MAX_TOKEN_DAYS },
    );
  }
}

function checkNewToken(state: OperatorAccount, token: TokenMaterial, at: string): void {
  if (!state.enabled) {
    throw conflict('operator_disabled', `account ${state.operator_id} is disabled: enable it first`, {
      operator_id: state.operator_id,
    });
  }
  if (state.tokens.some((t) => t.token_id === token.token_id || t.token_hash === token.token_hash)) {
    throw conflict('token_exists', `token ${token.token_id} already exists`, { token_id: token.token_id });
  }
  checkExpiry(token, at);
}

function activeToken(state: OperatorAccount, id: string): OperatorToken {
  const token = state.tokens.find((t) => t.token_id === id);
  if (!token)
    throw notFound('token_not_found', `account ${state.operator_id} has no token ${id}`, { token_id: id });
  if (token.status === 'revoked') {
    throw conflict('token_revoked', `token ${id} is already revoked`, {
      token_id: id,
      revoked_at: token.revoked_at,
    });
  }
  return token;
}

function createAccount(command: Command<'CreateOperatorAccount'>, state: OperatorAccountState) {
  if (state.exists) {
    throw conflict('operator_exists', `account ${command.operator_id} already exists`, {
      operator_id: command.operator_id,
    });
  }
  const name = operatorName.safeParse(command.name);
  if (!name.success)
    throw invalid('invalid_name', 'an account needs a name of 1-200 characters', { field: 'name' });
  if (!operatorEmail.safeParse(command.email).success) {
    throw invalid('invalid_email', 'email is not an email address', { field: 'email' });
  }
  if (command.email_taken_by !== null) {
    // The address itself is not repeated: it is personal data, and problems are logged.
    throw conflict('email_taken', `account ${command.email_taken_by} already has this email`, {
      field: 'email',
      operator_id: command.email_taken_by,
    });
  }
  checkExpiry(command.token, command.at);
  const operator_id = command.operator_id;
  return [
    events.OperatorAccountCreated({
      operator_id,
      name: name.data,
      email: command.email,
      role: command.role,
      created_at: command.at,
    }),
    events.OperatorTokenIssued({ operator_id, ...command.token, issued_at: command.at }),
  ];
}

function changeRole(state: OperatorAccount, role: OperatorRole, at: string) {
  if (state.role === role) return [];
  return [events.OperatorRoleChanged({ operator_id: state.operator_id, role, changed_at: at })];
}

function setEnabled(state: OperatorAccount, enabled: boolean, at: string) {
  if (state.enabled === enabled) return [];
  const operator_id = state.operator_id;
  return [
    enabled
      ? events.OperatorAccountEnabled({ operator_id, enabled_at: at })
      : events.OperatorAccountDisabled({ operator_id, disabled_at: at }),
  ];
}

/** A role change and an enable or disable, in one append. Retries are harmless: no change, no event. */
function updateAccount(command: Command<'UpdateOperatorAccount'>, state: OperatorAccount) {
  return [
    ...(command.role === undefined ? [] : changeRole(state, command.role, command.at)),
    ...(command.enabled === undefined ? [] : setEnabled(state, command.enabled, command.at)),
  ];
}

function issueToken(command: Command<'IssueOperatorToken'>, state: OperatorAccount) {
  const now = new Date(command.at);
  const working = state.tokens.filter((t) => tokenWorks(t, now)).length;
  if (working >= MAX_ACTIVE_TOKENS) {
    throw conflict(
      'too_many_tokens',
      `an account holds at most ${MAX_ACTIVE_TOKENS} working tokens; revoke one first`,
      { max_active_tokens: MAX_ACTIVE_TOKENS },
    );
  }
  checkNewToken(state, command.token, command.at);
  return [
    events.OperatorTokenIssued({ operator_id: state.operator_id, ...command.token, issued_at: command.at }),
  ];
}

function revokeToken(command: Command<'RevokeOperatorToken'>, state: OperatorAccount) {
  activeToken(state, command.token_id);
  return [
    events.OperatorTokenRevoked({
      operator_id: state.operator_id,
      token_id: command.token_id,
      revoked_at: command.at,
    }),
  ];
}

function rotateToken(command: Command<'RotateOperatorToken'>, state: OperatorAccount) {
  activeToken(state, command.token_id);
  checkNewToken(state, command.token, command.at);
  return [
    events.OperatorTokenRotated({
      operator_id: state.operator_id,
      old_token_id: command.token_id,
      ...command.token,
      rotated_at: command.at,
    }),
  ];
}

function decide(command: OperatorAccountCommand, state: OperatorAccountState): OperatorAccountEvent[] {
  if (command.type === 'CreateOperatorAccount') return createAccount(command, state);
  if (!state.exists) throw notFound('operator_not_found', 'no such operator account');
  switch (command.type) {
    case 'UpdateOperatorAccount':
      return updateAccount(command, state);
    case 'IssueOperatorToken':
      return issueToken(command, state);
    case 'RevokeOperatorToken':
      return revokeToken(command, state);
    case 'RotateOperatorToken':
      return rotateToken(command, state);
  }
}

const issued = (d: TokenMaterial, at: string): OperatorToken => ({
  token_id: d.token_id,
  token_hash: d.token_hash,
  token_prefix: d.token_prefix,
  status: 'active',
  issued_at: at,
  expires_at: d.expires_at,
  revoked_at: null,
});
const revoked = (tokens: OperatorToken[], id: string, at: string) =>
  tokens.map((t) => (t.token_id === id ? { ...t, status: 'revoked' as const, revoked_at: at } : t));

function evolve(state: OperatorAccountState, event: OperatorAccountEvent): OperatorAccountState {
  if (event.type === 'OperatorAccountCreated') {
    const d = event.data;
    return {
      exists: true,
      operator_id: d.operator_id,
      name: d.name,
      email: d.email,
      role: d.role,
      enabled: true,
      tokens: [],
      created_at: d.created_at,
      updated_at: d.created_at,
    };
  }
  if (!state.exists) return state;
  switch (event.type) {
    case 'OperatorRoleChanged':
      return { ...state, role: event.data.role, updated_at: event.data.changed_at };
    case 'OperatorAccountDisabled':
      return { ...state, enabled: false, updated_at: event.data.disabled_at };
    case 'OperatorAccountEnabled':
      return { ...state, enabled: true, updated_at: event.data.enabled_at };
    case 'OperatorTokenIssued':
      return {
        ...state,
        tokens: [...state.tokens, issued(event.data, event.data.issued_at)],
        updated_at: event.data.issued_at,
      };
    case 'OperatorTokenRevoked':
      return {
        ...state,
        tokens: revoked(state.tokens, event.data.token_id, event.data.revoked_at),
        updated_at: event.data.revoked_at,
      };
    case 'OperatorTokenRotated': {
      const at = event.data.rotated_at;
      return {
        ...state,
        tokens: [...revoked(state.tokens, event.data.old_token_id, at), issued(event.data, at)],
        updated_at: at,
      };
    }
  }
}

export const decider: Decider<OperatorAccountCommand, OperatorAccountEvent, OperatorAccountState> = {
  initialState: { exists: false },
  decide,
  evolve,
};

/** A token as the admin API shows it: never its hash. `expired` once its expiry has passed. */
export const operatorTokenRecord = z
  .object({
    token_id: z.string(),
    token_prefix: z.string(),
    status: z.enum(['active', 'expired', 'revoked']),
    issued_at: z.string(),
    expires_at: z.string(),
    revoked_at: z.string().nullable(),
  })
  .meta({ id: 'OperatorToken' });
export type OperatorTokenRecord = z.infer<typeof operatorTokenRecord>;

/** An account as the admin API shows it, with its tokens. */
export const operatorRecord = z
  .object({
    operator_id: z.uuid(),
    name: z.string(),
    email: z.string(),
    role: operatorRole,
    enabled: z.boolean(),
    tokens: z.array(operatorTokenRecord),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .meta({ id: 'Operator' });
export type OperatorRecord = z.infer<typeof operatorRecord>;

export function toTokenRecord(token: OperatorToken, now: Date): OperatorTokenRecord {
  const expired = token.status === 'active' && !tokenWorks(token, now);
  return {
    token_id: token.token_id,
    token_prefix: token.token_prefix,
    status: expired ? 'expired' : token.status,
    issued_at: token.issued_at,
    expires_at: token.expires_at,
    revoked_at: token.revoked_at,
  };
}

export function toOperatorRecord(state: OperatorAccount, now: Date): OperatorRecord {
  return {
    operator_id: state.operator_id,
    name: state.name,
    email: state.email,
    role: state.role,
    enabled: state.enabled,
    tokens: state.tokens.map((t) => toTokenRecord(t, now)),
    created_at: state.created_at,
    updated_at: state.updated_at,
  };
}
