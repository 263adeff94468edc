/**
 * `pds operators …` and `pds whoami`: the people who run the service, their roles and tokens, through
 * the admin API (docs/operations.md, "Accounts and roles"). Account management needs an admin's token.
 *
 *   pds operators create --name <name> --email <email> --role <role> [--expires-in-days <n> | --expires-at <iso>]
 *   pds operators list [--role <role>]
 *   pds operators show <id>
 *   pds operators set-role <id> <role>
 *   pds operators disable <id>
 *   pds operators enable <id>
 *   pds operators tokens list <id>
 *   pds operators tokens issue <id> [--expires-in-days <n> | --expires-at <iso>]
 *   pds operators tokens rotate <id> <token_id> [--expires-in-days <n> | --expires-at <iso>]
 *   pds operators tokens revoke <id> <token_id>
 *   pds whoami
 *
 * Each prints a table, or the API's answer with `--json`. `create`, `tokens issue` and `tokens rotate`
 * print the new token: it is shown this once (only its hash is stored).
 */
import type { Command } from 'commander';
import {
  MAX_TOKEN_DAYS,
  type OperatorRecord,
  type OperatorTokenRecord,
  operatorRoles,
} from '../../domain/operator-account.ts';
import { CliError, createAdminClient, EXIT, fetchAll, table } from '../client.ts';
import { positiveInteger, printJson } from '../options.ts';
import { runClientCommand } from './run.ts';

const BASE = '/admin/v1/operators';
const accountPath = (id: string) => `${BASE}/${encodeURIComponent(id)}`;
const tokenPath = (id: string, tokenId: string) => `${accountPath(id)}/tokens/${encodeURIComponent(tokenId)}`;

interface TokenWritten {
  token: OperatorTokenRecord;
  operator_token: string | null;
  revoked_token_id?: string;
}

function roleOption(option: string, raw: string | undefined): string | undefined {
  if (raw !== undefined && !(operatorRoles as readonly string[]).includes(raw)) {
    throw new CliError(
      `${option}: expected one of ${operatorRoles.join(', ')}, got ${JSON.stringify(raw)}`,
      EXIT.usage,
    );
  }
  return raw;
}

type ExpiryOptions = { expiresInDays?: string; expiresAt?: string };

/** The token's expiry as the API takes it; both at once is a usage error. */
function expiry(options: ExpiryOptions): { expires_in_days?: number; expires_at?: string } {
  if (options.expiresInDays !== undefined && options.expiresAt !== undefined) {
    throw new CliError('give --expires-in-days or --expires-at, not both', EXIT.usage);
  }
  if (options.expiresInDays !== undefined) {
    return { expires_in_days: positiveInteger('--expires-in-days', options.expiresInDays, MAX_TOKEN_DAYS) };
  }
  if (options.expiresAt !== undefined) {
    if (Number.isNaN(Date.parse(options.expiresAt)) || !/^\d{4}-\d\d-\d\dT/.test(options.expiresAt)) {
      throw new CliError(
        `--expires-at: expected an ISO 8601 date-time with an offset, e.g. 2027-01-31T00:00:00Z, got ${JSON.stringify(options.expiresAt)}`,
        EXIT.usage,
      );
    }
    return { expires_at: options.expiresAt };
  }
  return {};
}

const withExpiry = (command: Command) =>
  command
    .option('--expires-in-days <n>', `days the token works, 1-${MAX_TOKEN_DAYS} (default 90)`)
    .option('--expires-at <iso>', `when the token stops working (at most ${MAX_TOKEN_DAYS} days ahead)`);

const working = (o: OperatorRecord) => o.tokens.filter((k) => k.status === 'active').length;

function listTable(accounts: OperatorRecord[]): string {
  return `${table(
    ['operator_id', 'name', 'email', 'role', 'enabled', 'active_tokens', 'created_at'],
    accounts.map((o) => [
      o.operator_id,
      o.name,
      o.email,
      o.role,
      String(o.enabled),
      working(o),
      o.created_at,
    ]),
  )}\n`;
}

function tokensTable(tokens: OperatorTokenRecord[]): string {
  return `${table(
    ['token_id', 'prefix', 'status', 'issued_at', 'expires_at', 'revoked_at'],
    tokens.map((k) => [k.token_id, `${k.token_prefix}…`, k.status, k.issued_at, k.expires_at, k.revoked_at]),
  )}\n`;
}

function recordTable(o: OperatorRecord): string {
  const fields = table(
    ['field', 'value'],
    [
      ['operator_id', o.operator_id],
      ['name', o.name],
      ['email', o.email],
      ['role', o.role],
      ['enabled', String(o.enabled)],
      ['created_at', o.created_at],
      ['updated_at', o.updated_at],
    ],
  );
  return `${fields}\n\ntokens:\n${tokensTable(o.tokens)}`;
}

/** The new token, shown once. */
const tokenLine = (token: string | null) =>
  token
    ? `\ntoken (shown once, hand it to its person now): ${token}\n`
    : '\ntoken: not shown (an idempotent replay never repeats a token; rotate it if the first answer was lost)\n';

async function request<T>(method: string, url: string, body?: unknown): Promise<T> {
  return (await createAdminClient()).request<T>(method, url, body);
}

export function registerOperators(program: Command): void {
  const operators = program
    .command('operators')
    .description(
      'operator accounts, their roles and tokens (admins): create, list, show, set-role, disable, enable, tokens',
    );
  createCommand(operators);
  operators
    .command('list')
    .description('every account (all pages), in id order')
    .option('--role <role>', `only accounts of this role (${operatorRoles.join(', ')})`)
    .option('--json', 'print {operators: [...]} as JSON')
    .action((options: { role?: string; json?: boolean }) =>
      runClientCommand(async () => {
        const role = roleOption('--role', options.role);
        const list = await fetchAll<OperatorRecord>(
          await createAdminClient(),
          BASE,
          'operators',
          new URLSearchParams(role ? { role } : {}),
        );
        return options.json ? printJson({ operators: list }) : listTable(list);
      }),
    );
  operators
    .command('show')
    .description('one account with its tokens (never a token itself)')
    .argument('<id>', 'the account id')
    .option('--json', 'print the answer as JSON')
    .action((id: string, options: { json?: boolean }) =>
      runClientCommand(async () => {
        const out = await request<{ operator: OperatorRecord }>('GET', accountPath(id));
        return options.json ? printJson(out) : recordTable(out.operator);
      }),
    );
  const change = async (id: string, body: object, json?: boolean) => {
    const out = await request<{ operator: OperatorRecord }>('PATCH', accountPath(id), body);
    return json ? printJson(out) : recordTable(out.operator);
  };
  operators
    .command('set-role')
    .description('change the account’s role')
    .argument('<id>', 'the account id')
    .argument('<role>', operatorRoles.join(', '))
    .option('--json', 'print the answer as JSON')
    .action((id: string, role: string, options: { json?: boolean }) =>
      runClientCommand(async () => change(id, { role: roleOption('role', role) }, options.json)),
    );
  for (const [name, enabled, description] of [
    ['disable', false, 'refuse every token of the account until it is enabled again'],
    ['enable', true, 'let the account’s tokens in again'],
  ] as const) {
    operators
      .command(name)
      .description(description)
      .argument('<id>', 'the account id')
      .option('--json', 'print the answer as JSON')
      .action((id: string, options: { json?: boolean }) =>
        runClientCommand(async () => change(id, { enabled }, options.json)),
      );
  }
  tokenCommands(operators);
}

function createCommand(operators: Command): void {
  withExpiry(
    operators
      .command('create')
      .description('create an account and its first token (shown once)')
      .requiredOption('--name <name>', 'the person’s name')
      .requiredOption('--email <email>', 'their email (unique among accounts)')
      .requiredOption('--role <role>', operatorRoles.join(', ')),
  )
    .option('--json', 'print the answer as JSON')
    .action((options: { name: string; email: string; role: string; json?: boolean } & ExpiryOptions) =>
      runClientCommand(async () => {
        roleOption('--role', options.role);
        const body = { name: options.name, email: options.email, role: options.role, ...expiry(options) };
        const out = await request<{ operator: OperatorRecord; operator_token: string | null }>(
          'POST',
          BASE,
          body,
        );
        return options.json ? printJson(out) : recordTable(out.operator) + tokenLine(out.operator_token);
      }),
    );
}

/** `pds operators tokens list | issue | rotate | revoke`. */
function tokenCommands(operators: Command): void {
  const tokens = operators.command('tokens').description('an account’s tokens: list, issue, rotate, revoke');
  tokens
    .command('list')
    .description('the account’s tokens, active, expired and revoked (prefixes only)')
    .argument('<id>', 'the account id')
    .option('--json', 'print {operator_id, tokens: [...]} as JSON')
    .action((id: string, options: { json?: boolean }) =>
      runClientCommand(async () => {
        const out = await request<{ tokens: OperatorTokenRecord[] }>('GET', `${accountPath(id)}/tokens`);
        return options.json ? printJson(out) : tokensTable(out.tokens);
      }),
    );
  withExpiry(
    tokens
      .command('issue')
      .description('issue another token; prints it once')
      .argument('<id>', 'the account id'),
  )
    .option('--json', 'print the answer as JSON')
    .action((id: string, options: { json?: boolean } & ExpiryOptions) =>
      runClientCommand(async () => {
        const out = await request<TokenWritten>('POST', `${accountPath(id)}/tokens`, expiry(options));
        return options.json ? printJson(out) : tokensTable([out.token]) + tokenLine(out.operator_token);
      }),
    );
  withExpiry(
    tokens
      .command('rotate')
      .description('replace a token: a new one (printed once) and the old one revoked, at the same instant')
      .argument('<id>', 'the account id')
      .argument('<token_id>', 'the token to replace'),
  )
    .option('--json', 'print the answer as JSON')
    .action((id: string, tokenId: string, options: { json?: boolean } & ExpiryOptions) =>
      runClientCommand(async () => {
        const out = await request<TokenWritten>('POST', `${tokenPath(id, tokenId)}/rotate`, expiry(options));
        return options.json
          ? printJson(out)
          : `revoked ${out.revoked_token_id}\n${tokensTable([out.token])}${tokenLine(out.operator_token)}`;
      }),
    );
  tokens
    .command('revoke')
    .description('revoke a token: it is refused from the moment this answers')
    .argument('<id>', 'the account id')
    .argument('<token_id>', 'the token to revoke')
    .option('--json', 'print the answer as JSON')
    .action((id: string, tokenId: string, options: { json?: boolean }) =>
      runClientCommand(async () => {
        const out = await request<{ token: OperatorTokenRecord }>('DELETE', tokenPath(id, tokenId));
        return options.json ? printJson(out) : tokensTable([out.token]);
      }),
    );
}

/** `pds whoami`: whose token the command line uses, and their role. */
export function registerWhoami(program: Command): void {
  program
    .command('whoami')
    .description('the person whose token this command line uses: account id, name and role')
    .option('--json', 'print the answer as JSON')
    .action((options: { json?: boolean }) =>
      runClientCommand(async () => {
        const out = await request<{
          operator: { operator_id: string; name: string; role: string; token_id: string | null };
        }>('GET', '/admin/v1/me');
        const me = out.operator;
        return options.json
          ? printJson(out)
          : `${table(['operator_id', 'name', 'role', 'token_id'], [[me.operator_id, me.name, me.role, me.token_id]])}\n`;
      }),
    );
}
