/**
 * Read model `operators` (docs/operations.md, "Accounts and roles"): what operator authentication
 * needs, shared through the read store as partner keys are (`partner-keys.ts`), so every API process
 * of a split deployment authenticates a person without reading the event store.
 *
 * - `operator_tokens`: one document per token that may let its bearer in, `_id` = the token's SHA-256
 *   hash, with its account's id, name and role and the token's expiry (checked at each request against
 *   the service's clock). A revoked or rotated-away token, or any token of a disabled account, has no
 *   document, so a lookup that finds nothing is a 401.
 * - `operators`: one document per account, its fields plus the private `_state` (the folded account,
 *   token hashes included) the token documents are derived from. The admin API renders accounts from
 *   `_state`; a token hash is never shown. Indexed by `email`, which the admin API keeps unique.
 */
import { isDeepStrictEqual } from 'node:util';
import { domainEventOf } from '../../application/read-state.ts';
import { eventRegistry } from '../../domain/index.ts';
import * as account from '../../domain/operator-account.ts';
import type { Projection } from '../projection.ts';
import type { Collection, Doc, DocId } from '../read-store.ts';

export const OPERATORS = 'operators';
export const OPERATOR_TOKENS = 'operator_tokens';
/** The projection's name: the checkpoint an account write waits for. */
export const OPERATORS_PROJECTION = 'operators';

export type OperatorTokenDoc = Doc & {
  /** SHA-256 of the token, lowercase hex. */
  _id: string;
  operator_id: string;
  token_id: string;
  name: string;
  role: account.OperatorRole;
  expires_at: string;
};

export type OperatorDoc = Doc & {
  _id: string;
  name: string;
  email: string;
  role: account.OperatorRole;
  enabled: boolean;
  created_at: string;
  updated_at: string;
  _state: account.OperatorAccount;
};

const accountEventTypes = new Set<string>(Object.keys(account.events));

const withoutPosition = <T extends Doc>(doc: T): T => {
  const { _position: _, ...rest } = doc;
  return rest as T;
};

/** The token documents an account's state implies: one per token not revoked, none while disabled. */
function tokenDocs(state: account.OperatorAccount): OperatorTokenDoc[] {
  if (!state.enabled) return [];
  return state.tokens
    .filter((t) => t.status === 'active')
    .map((t) => ({
      _id: t.token_hash,
      operator_id: state.operator_id,
      token_id: t.token_id,
      name: state.name,
      role: state.role,
      expires_at: t.expires_at,
    }));
}

/** The tokens whose documents an event may create, change or remove, by hash. */
function touchedTokens(event: account.OperatorAccountEvent, state: account.OperatorAccount): string[] {
  const hashOf = (id: string) => state.tokens.find((t) => t.token_id === id)?.token_hash;
  switch (event.type) {
    case 'OperatorAccountCreated':
      return [];
    case 'OperatorTokenIssued':
      return [event.data.token_hash];
    case 'OperatorTokenRevoked':
      return [hashOf(event.data.token_id)].filter((h): h is string => h !== undefined);
    case 'OperatorTokenRotated':
      return [hashOf(event.data.old_token_id), event.data.token_hash].filter(
        (h): h is string => h !== undefined,
      );
    case 'OperatorRoleChanged':
    case 'OperatorAccountDisabled':
    case 'OperatorAccountEnabled':
      return state.tokens.filter((t) => t.status === 'active').map((t) => t.token_hash);
  }
}

export const operatorsProjection: Projection = {
  name: OPERATORS_PROJECTION,
  version: 1,
  collections: { [OPERATOR_TOKENS]: [], [OPERATORS]: [{ keys: [['email', 1]] }] },
  filter: { streamPrefixes: [account.STREAM_PREFIX] },
  prefetch(event) {
    if (!event.streamId.startsWith(account.STREAM_PREFIX)) return [];
    const out: Array<[string, DocId]> = [[OPERATORS, event.streamId.slice(account.STREAM_PREFIX.length)]];
    const hash = (event.data as { token_hash?: unknown } | null)?.token_hash;
    if (typeof hash === 'string') out.push([OPERATOR_TOKENS, hash]);
    return out;
  },
  apply(event, tx) {
    if (!event.streamId.startsWith(account.STREAM_PREFIX) || !accountEventTypes.has(event.type)) return;
    const id = event.streamId.slice(account.STREAM_PREFIX.length);
    const e = domainEventOf<account.OperatorAccountEvent>(eventRegistry, event);
    const current = tx.get<OperatorDoc>(OPERATORS, id);
    // As for partner keys: the account document's `_position` tells a replayed event, and the token
    // documents are made to agree with the state rather than rebuilt from the event, so a replayed
    // issue of a token revoked since never lets it in again, even briefly.
    const replay =
      current !== undefined && typeof current._position === 'number' && current._position >= event.position;
    let state: account.OperatorAccountState;
    if (replay) {
      state = current._state;
    } else {
      state = account.decider.evolve(current ? current._state : { exists: false }, e);
      if (!state.exists) return;
      tx.put(OPERATORS, {
        _id: id,
        name: state.name,
        email: state.email,
        role: state.role,
        enabled: state.enabled,
        created_at: state.created_at,
        updated_at: state.updated_at,
        _state: state,
      });
    }
    if (!state.exists) return;
    const wanted = new Map(tokenDocs(state).map((d) => [d._id, d]));
    const touched = touchedTokens(e, state);
    const stored = tx.getMany<OperatorTokenDoc>(OPERATOR_TOKENS, touched);
    touched.forEach((hash, i) => {
      const doc = wanted.get(hash);
      const old = stored[i];
      if (doc && !(old && isDeepStrictEqual(withoutPosition(old), doc))) tx.put(OPERATOR_TOKENS, doc);
      else if (!doc && old) tx.delete(OPERATOR_TOKENS, hash);
    });
  },
};

// ---- queries --------------------------------------------------------------------------------------

/** The token document with this hash (a token that may let its bearer in: check its expiry), or null. */
export async function tokenByHash(
  collection: Collection<OperatorTokenDoc>,
  tokenHash: string,
): Promise<OperatorTokenDoc | null> {
  const [doc] = await collection.findByIds([tokenHash]);
  return doc ?? null;
}

/** The account, as its read model holds it, or null. */
export async function operatorById(
  collection: Collection<OperatorDoc>,
  operatorId: string,
): Promise<account.OperatorAccount | null> {
  const [doc] = await collection.findByIds([operatorId]);
  return doc ? doc._state : null;
}

/** The id of the account with this (normalised) email, or null. */
export async function operatorWithEmail(
  collection: Collection<OperatorDoc>,
  email: string,
): Promise<string | null> {
  const [doc] = await collection.find({ email }, { limit: 1 });
  return doc ? String(doc._id) : null;
}

/** The names of these accounts, by id (ids of no account are left out). */
export async function operatorNames(
  collection: Collection<OperatorDoc>,
  ids: readonly string[],
): Promise<Map<string, string>> {
  if (ids.length === 0) return new Map();
  const docs = await collection.findByIds([...new Set(ids)]);
  return new Map(docs.map((d) => [String(d._id), d.name]));
}

/** A page of accounts in id order, after `afterId`, of one role when given. */
export async function listOperators(
  collection: Collection<OperatorDoc>,
  options: { limit: number; afterId?: string; role?: account.OperatorRole },
): Promise<account.OperatorAccount[]> {
  const docs = await collection.find(
    {
      ...(options.role ? { role: options.role } : {}),
      ...(options.afterId ? { _id: { $gt: options.afterId } } : {}),
    },
    { sort: [['_id', 1]], limit: options.limit },
  );
  return docs.map((d) => d._state);
}
