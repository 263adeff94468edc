/**
 * Who calls the admin and platform APIs: the person an operator token stands for, with their role
 * (docs/operations.md, "Accounts and roles"). The token the service generates in its data dir (or
 * `PDS_OPERATOR_TOKEN`) is the bootstrap credential: an `admin` for the first start and break-glass.
 */
import type { OperatorRole } from '../domain/operator-account.ts';
import type { Actor } from '../eventstore/port.ts';
import { hashApiKey, matchesSecret } from './credentials.ts';

export interface OperatorPrincipal {
  /** The account's id, or `bootstrap` for the bootstrap token. */
  operator_id: string;
  name: string;
  role: OperatorRole;
  /**
   * The token that authenticated the request: an account token's id, or for the bootstrap token
   * `bootstrap:` and a fingerprint of it, so a session it opened ends when it is replaced.
   */
  token_id: string | null;
}

export interface OperatorAuthenticator {
  /** The person a bearer token stands for; `undefined` for an unknown, expired or revoked token. */
  authenticate(token: string): Promise<OperatorPrincipal | undefined>;
  /**
   * The person as they stand now (their role may have changed); `undefined` once the token that
   * authenticated them is revoked or expired, or their account disabled. A console session asks at
   * every request.
   */
  current(principal: OperatorPrincipal): Promise<OperatorPrincipal | undefined>;
}

export const BOOTSTRAP_OPERATOR: OperatorPrincipal = Object.freeze({
  operator_id: 'bootstrap',
  name: 'bootstrap token',
  role: 'admin',
  token_id: null,
});

/** The bootstrap token alone, compared in constant time. */
export function bootstrapAuthenticator(bootstrapToken: string): OperatorAuthenticator {
  const isBootstrapToken = matchesSecret(bootstrapToken);
  // A fingerprint, not the token: 64 bits of its hash say which token it was, and nothing of it.
  const bootstrap = Object.freeze({
    ...BOOTSTRAP_OPERATOR,
    token_id: `bootstrap:${hashApiKey(bootstrapToken).slice(0, 16)}`,
  });
  return {
    async authenticate(token) {
      return isBootstrapToken(token) ? bootstrap : undefined;
    },
    async current(principal) {
      return principal.operator_id === bootstrap.operator_id && principal.token_id === bootstrap.token_id
        ? bootstrap
        : undefined;
    },
  };
}

export const isBootstrap = (principal: OperatorPrincipal): boolean =>
  principal.operator_id === BOOTSTRAP_OPERATOR.operator_id;

/** The actor of the events a person's request causes: the person, not a shared "operator". */
export function operatorActor(principal: OperatorPrincipal): Actor {
  return { type: 'operator', id: principal.operator_id };
}
