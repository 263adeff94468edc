/**
 * Who the bearer of an operator token is (docs/operations.md, "Accounts and roles"): the bootstrap
 * token (break-glass, an `admin` named `bootstrap`), or an account's token, found by its hash in the
 * `operator_tokens` read model. One read-store lookup per request, as for partner keys: no event store
 * read. A revoked token or a disabled account has no document there, so it stops working as soon as
 * the projection applies the change; an expired one is refused by the service's clock.
 */
import { hashApiKey, isWellFormedOperatorToken } from '../application/credentials.ts';
import {
  bootstrapAuthenticator,
  isBootstrap,
  type OperatorAuthenticator,
  type OperatorPrincipal,
} from '../application/operator-principal.ts';
import type { Clock } from '../domain/clock.ts';
import { tokenWorks } from '../domain/operator-account.ts';
import {
  OPERATOR_TOKENS,
  OPERATORS,
  type OperatorDoc,
  type OperatorTokenDoc,
  operatorById,
  tokenByHash,
} from '../projections/read-models/operators.ts';
import type { Collection, ReadStore } from '../projections/read-store.ts';

export interface OperatorAuthenticatorDeps {
  readStore: ReadStore;
  clock: Clock;
  /** The data dir's token or `PDS_OPERATOR_TOKEN`. */
  bootstrapToken: string;
}

export function createOperatorAuthenticator(deps: OperatorAuthenticatorDeps): OperatorAuthenticator {
  const bootstrap = bootstrapAuthenticator(deps.bootstrapToken);
  // Opened at the first request; a store that failed to open is asked again at the next.
  let tokens: Collection<OperatorTokenDoc> | undefined;
  let accounts: Collection<OperatorDoc> | undefined;
  const tokensCollection = async () => {
    tokens ??= await deps.readStore.collection<OperatorTokenDoc>(OPERATOR_TOKENS);
    return tokens;
  };
  const accountsCollection = async () => {
    accounts ??= await deps.readStore.collection<OperatorDoc>(OPERATORS);
    return accounts;
  };
  return {
    async authenticate(token) {
      const boot = await bootstrap.authenticate(token);
      if (boot) return boot;
      if (!isWellFormedOperatorToken(token)) return undefined;
      const doc = await tokenByHash(await tokensCollection(), hashApiKey(token));
      if (!doc || Date.parse(doc.expires_at) <= deps.clock.now().getTime()) return undefined;
      return { operator_id: doc.operator_id, name: doc.name, role: doc.role, token_id: doc.token_id };
    },
    async current(principal): Promise<OperatorPrincipal | undefined> {
      if (isBootstrap(principal)) return bootstrap.current(principal);
      const state = await operatorById(await accountsCollection(), principal.operator_id);
      const token = state?.tokens.find((t) => t.token_id === principal.token_id);
      if (!state?.enabled || !token || !tokenWorks(token, deps.clock.now())) return undefined;
      return { operator_id: state.operator_id, name: state.name, role: state.role, token_id: token.token_id };
    },
  };
}
