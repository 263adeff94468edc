/**
 * Operator accounts and their tokens (docs/operations.md, "Accounts and roles"), on the admin router,
 * for admins only (`route-roles.ts`), and `GET /me` for everyone:
 *
 * - `POST /operators` {name, email, role, expires_in_days? | expires_at?} → 201 {operator,
 *   operator_token}: the account and its first token, shown this once. 409 `email_taken`.
 * - `GET /operators?role=&limit=&cursor=`, `GET /operators/{id}`: accounts with their tokens (prefix,
 *   status, expiry; never a token or its hash).
 * - `PATCH /operators/{id}` {role?, enabled?}: a disabled account's tokens stop working until it is
 *   enabled again. An admin cannot demote or disable their own account (409 `own_account`).
 * - `GET /operators/{id}/tokens`, `POST /operators/{id}/tokens` (a new token, shown once),
 *   `POST /operators/{id}/tokens/{token_id}/rotate` (a new one, the old revoked at the same instant),
 *   `DELETE /operators/{id}/tokens/{token_id}` (revoked).
 *
 * Writes decide on the account's stream and answer once the `operators` read model, which
 * authentication reads, holds them: a new token works as soon as the answer that shows it arrives, and a
 * revoked one or a disabled account is refused from then on.
 */
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { CommandHandler, CommandResult } from '../application/command-handler.ts';
import { generateOperatorToken } from '../application/credentials.ts';
import type { OperatorPrincipal } from '../application/operator-principal.ts';
import type { Clock } from '../domain/clock.ts';
import * as account from '../domain/operator-account.ts';
import { isoDateTime } from '../domain/schemas.ts';
import {
  listOperators,
  OPERATORS,
  OPERATORS_PROJECTION,
  type OperatorDoc,
  operatorWithEmail,
} from '../projections/read-models/operators.ts';
import type { Collection, ReadStore } from '../projections/read-store.ts';
import { type AdminRoute, adminRoute } from './admin-route-table.ts';
import { ADMIN_BASE, uuidAfterCursor, waitForProjection } from './admin-support.ts';
import { type AppContext, HttpProblem } from './http.ts';
import { requestActor } from './operator-auth.ts';
import { ifMatch, pathUuid } from './validation.ts';
import { answerWrite, commandMetadata } from './write-support.ts';

export interface OperatorAdminDeps {
  commands: CommandHandler;
  readStore: ReadStore;
  clock: Clock;
}

const operatorParams = z.object({ id: pathUuid });
const tokenParams = z.object({ id: pathUuid, token_id: account.tokenId });
const expiry = {
  expires_in_days: z
    .int()
    .min(1)
    .max(account.MAX_TOKEN_DAYS)
    .optional()
    .describe(`Days the token works, 1-${account.MAX_TOKEN_DAYS} (default ${account.DEFAULT_TOKEN_DAYS}).`),
  expires_at: isoDateTime
    .optional()
    .describe(`When the token stops working, at most ${account.MAX_TOKEN_DAYS} days ahead.`),
};
const creation = z
  .strictObject({
    name: account.operatorName,
    email: account.operatorEmailInput,
    role: account.operatorRole,
    ...expiry,
  })
  .meta({ id: 'OperatorCreation' });
const update = z
  .strictObject({ role: account.operatorRole.optional(), enabled: z.boolean().optional() })
  .meta({ id: 'OperatorUpdate' });
const tokenExpiry = z.strictObject(expiry).meta({ id: 'OperatorTokenExpiry' });
const listQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(500).default(100),
  cursor: z.string().max(200).optional(),
  role: account.operatorRole.optional(),
});

const written = { revision: z.int(), position: z.int() };
const secret = z
  .string()
  .nullable()
  .describe('The token itself, shown this once (null in an idempotent replay: rotate it if it was lost).');
/**
 * Who is calling, as `GET /me` and the console's session (`admin-session.ts`) both show them: one
 * shape, declared here only.
 */
export const person = z
  .object({
    operator_id: z.string().describe('The account id, or `bootstrap` for the bootstrap token.'),
    name: z.string(),
    role: account.operatorRole,
    token_id: z
      .string()
      .nullable()
      .describe(
        'The token that authenticated the person (for a console session, the one that signed in): an ' +
          "account token's id, or `bootstrap:` and a fingerprint of the bootstrap token.",
      ),
  })
  .meta({ id: 'Person' });

export const personOf = (p: OperatorPrincipal): z.output<typeof person> => ({
  operator_id: p.operator_id,
  name: p.name,
  role: p.role,
  token_id: p.token_id,
});

const me = z.object({ operator: person }).meta({ id: 'Me' });
const operatorWritten = z
  .object({ operator: account.operatorRecord, ...written })
  .meta({ id: 'OperatorWritten' });
const tokenWritten = z
  .object({
    token: account.operatorTokenRecord,
    operator_token: secret,
    revoked_token_id: z.string().optional(),
    ...written,
  })
  .meta({ id: 'OperatorTokenIssued' });

type Expiry = { expires_in_days?: number; expires_at?: string };

/** When the new token expires; both ways of saying it at once is a 422. */
function expiresAt(at: string, body: Expiry): string {
  if (body.expires_in_days !== undefined && body.expires_at !== undefined) {
    throw new HttpProblem(422, {
      code: 'validation_failed',
      detail: 'give expires_in_days or expires_at, not both',
      errors: [{ field: 'expires_at', message: 'not with expires_in_days' }],
    });
  }
  return account.tokenExpiry(at, body);
}

function shared(deps: OperatorAdminDeps) {
  const { commands, readStore, clock } = deps;
  let collection: Collection<OperatorDoc> | undefined;
  const operators = async () => {
    collection ??= await readStore.collection<OperatorDoc>(OPERATORS);
    return collection;
  };
  /** A token works as soon as the answer arrives: wait until authentication can see the write. */
  const seen = (position: number) => waitForProjection(readStore, OPERATORS_PROJECTION, position);
  async function load(id: string) {
    const loaded = await commands.load(account.streamId(id), account.decider);
    if (!loaded.state.exists)
      throw new HttpProblem(404, { code: 'operator_not_found', detail: `no operator account ${id}` });
    return { ...loaded, state: loaded.state };
  }
  async function run(
    ctx: AppContext,
    id: string,
    command: account.OperatorAccountCommand,
    conditional = false,
  ) {
    const result = await commands.handle(
      account.streamId(id),
      account.decider,
      command,
      commandMetadata(ctx, requestActor(ctx), clock),
      conditional ? { ifMatch: ifMatch(ctx) } : {},
    );
    await seen(result.position);
    if (!result.state.exists) throw new Error('an account write left no account');
    return result as CommandResult<account.OperatorAccount, account.OperatorAccountEvent>;
  }
  const now = () => clock.now();
  return { operators, load, run, now };
}

const tokenOf = (state: account.OperatorAccount, id: string, now: Date) => {
  const token = state.tokens.find((t) => t.token_id === id);
  if (!token) throw new Error(`token ${id} missing after the command`);
  return account.toTokenRecord(token, now);
};

/** `GET /me`: who the token belongs to (the console and `pds whoami` ask). */
const meRoute = adminRoute({
  method: 'get',
  path: '/me',
  operationId: 'getMe',
  summary: 'Who the token belongs to',
  description: 'The person calling: account id (`bootstrap` for the bootstrap token), name and role.',
  response: { status: 200, description: 'The caller.', schema: me },
  problems: [],
  async handler(ctx, { operator }) {
    ctx.body = { operator: personOf(operator) };
  },
});

/** The admin routes of accounts and their tokens, and `GET /me`. */
export function operatorRoutes(deps: OperatorAdminDeps): AdminRoute[] {
  const { operators, load, run, now } = shared(deps);
  const create = adminRoute({
    method: 'post',
    path: '/operators',
    operationId: 'createOperator',
    summary: 'Create an account and its first token',
    description: 'The token is shown once. Emails are unique among accounts (compared lower-cased).',
    body: creation,
    response: {
      status: 201,
      description: 'The account, and its first token.',
      schema: z
        .object({ operator: account.operatorRecord, operator_token: secret, ...written })
        .meta({ id: 'OperatorCreated' }),
    },
    problems: [409],
    async handler(ctx, { body }) {
      const at = now().toISOString();
      const token = generateOperatorToken();
      const id = randomUUID();
      const { expires_in_days, expires_at, ...fields } = body;
      const result = await run(ctx, id, {
        type: 'CreateOperatorAccount',
        operator_id: id,
        ...fields,
        token: { ...material(token), expires_at: expiresAt(at, { expires_in_days, expires_at }) },
        email_taken_by: await operatorWithEmail(await operators(), fields.email),
        at,
      });
      ctx.set('Location', `${ADMIN_BASE}/operators/${id}`);
      answerWrite(
        ctx,
        201,
        { operator: account.toOperatorRecord(result.state, now()), operator_token: token.token },
        result,
      );
    },
  });

  const list = adminRoute({
    method: 'get',
    path: '/operators',
    operationId: 'listOperators',
    summary: 'List accounts',
    description: 'In account id order; `role` keeps one role.',
    query: listQuery,
    response: {
      status: 200,
      description: 'A page of accounts.',
      schema: z
        .object({ operators: z.array(account.operatorRecord), next_cursor: z.string().nullable() })
        .meta({ id: 'OperatorPage' }),
    },
    problems: [],
    async handler(ctx, { query }) {
      const afterId = query.cursor ? uuidAfterCursor(query.cursor) : undefined;
      const found = await listOperators(await operators(), {
        limit: query.limit + 1,
        afterId,
        role: query.role,
      });
      const page = found.slice(0, query.limit).map((s) => account.toOperatorRecord(s, now()));
      const next =
        found.length > query.limit
          ? Buffer.from(page[page.length - 1].operator_id).toString('base64url')
          : null;
      if (next) {
        const params = new URLSearchParams({
          limit: String(query.limit),
          cursor: next,
          ...(query.role ? { role: query.role } : {}),
        });
        ctx.set('Link', `<${ADMIN_BASE}/operators?${params}>; rel="next"`);
      }
      ctx.body = { operators: page, next_cursor: next };
    },
  });

  const show = adminRoute({
    method: 'get',
    path: '/operators/{id}',
    operationId: 'getOperator',
    summary: 'One account with its tokens',
    params: operatorParams,
    response: {
      status: 200,
      description: 'The account; its stream revision is also the `ETag`.',
      schema: z.object({ operator: account.operatorRecord, revision: z.int() }).meta({ id: 'OperatorShown' }),
    },
    problems: [404],
    async handler(ctx, { params }) {
      const loaded = await load(params.id);
      ctx.set('ETag', `"${loaded.revision}"`);
      ctx.body = { operator: account.toOperatorRecord(loaded.state, now()), revision: loaded.revision };
    },
  });

  const patch = adminRoute({
    method: 'patch',
    path: '/operators/{id}',
    operationId: 'updateOperator',
    summary: 'Change the role, disable or enable an account',
    description:
      "A disabled account's tokens are refused until it is enabled again. `If-Match` makes the change " +
      'conditional. An admin cannot demote or disable their own account.',
    params: operatorParams,
    body: update,
    ifMatch: true,
    response: { status: 200, description: 'The account as it is now.', schema: operatorWritten },
    problems: [404, 409, 412],
    async handler(ctx, { params, body, operator }) {
      await load(params.id);
      const demoting = body.role !== undefined && body.role !== 'admin';
      if (params.id === operator.operator_id && (demoting || body.enabled === false)) {
        throw new HttpProblem(409, {
          code: 'own_account',
          detail: 'an admin cannot demote or disable their own account: ask another admin',
        });
      }
      const at = now().toISOString();
      const result = await run(ctx, params.id, { type: 'UpdateOperatorAccount', ...body, at }, true);
      answerWrite(ctx, 200, { operator: account.toOperatorRecord(result.state, now()) }, result);
    },
  });

  return [meRoute, create, list, show, patch, ...tokenRoutes({ load, run, now })];
}

const material = (t: ReturnType<typeof generateOperatorToken>) => ({
  token_id: t.token_id,
  token_hash: t.token_hash,
  token_prefix: t.token_prefix,
});

type Shared = Pick<ReturnType<typeof shared>, 'load' | 'run' | 'now'>;

function tokenRoutes({ load, run, now }: Shared): AdminRoute[] {
  /** A new token (shown once, stored as its hash with its expiry) for the command that adds it. */
  async function withNewToken(
    ctx: AppContext,
    id: string,
    body: Expiry,
    command: (token: account.TokenMaterial, at: string) => account.OperatorAccountCommand,
  ) {
    await load(id);
    const at = now().toISOString();
    const token = generateOperatorToken();
    const result = await run(ctx, id, command({ ...material(token), expires_at: expiresAt(at, body) }, at));
    return { token, result };
  }

  const list = adminRoute({
    method: 'get',
    path: '/operators/{id}/tokens',
    operationId: 'listOperatorTokens',
    summary: "An account's tokens",
    description: 'Active, expired and revoked, in the order they were issued; never a token or its hash.',
    params: operatorParams,
    response: {
      status: 200,
      description: 'The tokens.',
      schema: z
        .object({ operator_id: z.uuid(), tokens: z.array(account.operatorTokenRecord) })
        .meta({ id: 'OperatorTokens' }),
    },
    problems: [404],
    async handler(ctx, { params }) {
      const { state } = await load(params.id);
      ctx.body = {
        operator_id: state.operator_id,
        tokens: state.tokens.map((t) => account.toTokenRecord(t, now())),
      };
    },
  });

  const issue = adminRoute({
    method: 'post',
    path: '/operators/{id}/tokens',
    operationId: 'issueOperatorToken',
    summary: 'Issue a token',
    description: `Shown once. An account holds at most ${account.MAX_ACTIVE_TOKENS} working tokens.`,
    params: operatorParams,
    body: tokenExpiry,
    response: { status: 201, description: 'The new token.', schema: tokenWritten },
    problems: [404, 409],
    async handler(ctx, { params, body }) {
      const { token, result } = await withNewToken(ctx, params.id, body, (newToken, at) => ({
        type: 'IssueOperatorToken',
        token: newToken,
        at,
      }));
      answerWrite(
        ctx,
        201,
        { token: tokenOf(result.state, token.token_id, now()), operator_token: token.token },
        result,
      );
    },
  });

  const rotate = adminRoute({
    method: 'post',
    path: '/operators/{id}/tokens/{token_id}/rotate',
    operationId: 'rotateOperatorToken',
    summary: 'Replace a token',
    description: 'A new token (shown once) and the old one revoked, at the same instant.',
    params: tokenParams,
    body: tokenExpiry,
    response: { status: 201, description: 'The new token.', schema: tokenWritten },
    problems: [404, 409],
    async handler(ctx, { params, body }) {
      const { token, result } = await withNewToken(ctx, params.id, body, (newToken, at) => ({
        type: 'RotateOperatorToken',
        token_id: params.token_id,
        token: newToken,
        at,
      }));
      const answer = {
        token: tokenOf(result.state, token.token_id, now()),
        revoked_token_id: params.token_id,
      };
      answerWrite(ctx, 201, { ...answer, operator_token: token.token }, result);
    },
  });

  const revoke = adminRoute({
    method: 'delete',
    path: '/operators/{id}/tokens/{token_id}',
    operationId: 'revokeOperatorToken',
    summary: 'Revoke a token',
    description: 'It is refused from the moment this answer arrives.',
    params: tokenParams,
    response: {
      status: 200,
      description: 'The revoked token.',
      schema: z
        .object({ token: account.operatorTokenRecord, ...written })
        .meta({ id: 'OperatorTokenRevoked' }),
    },
    problems: [404, 409],
    async handler(ctx, { params }) {
      await load(params.id);
      const at = now().toISOString();
      const result = await run(ctx, params.id, {
        type: 'RevokeOperatorToken',
        token_id: params.token_id,
        at,
      });
      answerWrite(ctx, 200, { token: tokenOf(result.state, params.token_id, now()) }, result);
    },
  });

  return [list, issue, rotate, revoke];
}
