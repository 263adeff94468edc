/**
 * `pds webhooks …`: webhook subscriptions through the admin API.
 *
 *   pds webhooks create --url <url> (--auth-token <token> | --auth-token-file <file|->) --store <id...> [--events <kind...>]
 *   pds webhooks list [--store <id>] [--enabled | --disabled]   (each ok or FAILING, with why)
 *   pds webhooks show <id>
 *   pds webhooks update <id> [--url <url>] [--auth-token <token> | --auth-token-file <file|->] [--store <id...>] [--events <kind...>]
 *   pds webhooks disable <id> | enable <id>
 *   pds webhooks rotate-secret <id>
 *   pds webhooks delete <id>
 *   pds webhooks deliveries <id> [--status <status...>] [--limit <n>] [--cursor <cursor>]
 *   pds webhooks redeliver <delivery_id>
 *   pds webhooks recover <id> --since <iso date-time | duration ago, e.g. 6h>
 *   pds webhooks test-send <id> [--event cart_status_updated|cart_abandoned]
 *   pds webhooks health <id> [--window 1h|24h]
 *   pds webhooks fan-out
 *
 * Each prints a table, or the API's answer with `--json`; `list --json` adds each subscription's
 * `status` and `trouble` (null for one past the first 500 the health overview judges, and then
 * `health_truncated: true`), as its table does. `create` and `rotate-secret` print the
 * signing secret: it is shown this once. `--auth-token-file` keeps the token out of the shell history
 * and the process list (`-` reads it from standard input).
 *
 * `deliveries` lists newest first, `--limit` of them (default 50, fetched in pages of at most 500);
 * `--json` prints {deliveries, next_cursor}, and `--cursor` continues from a `next_cursor`.
 * `test-send` sends one signed sample request now and prints how the receiver answered; it exits with
 * 1 when the request was not delivered (the result is printed all the same). `fan-out` says how far
 * the webhook fan-out has got, and exits with 1 when it is behind (or no dispatcher has started).
 */
import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import type { SubscriptionStatusFields } from '../../api/admin-trouble.ts';
import { MAX_SUBSCRIPTIONS } from '../../api/admin-webhook-health.ts';
import type { WebhookRecord } from '../../domain/webhook-subscription.ts';
import { webhookEventKinds } from '../../domain/webhook-subscription.ts';
import { CliError, createAdminClient, EXIT, fetchAll, table } from '../client.ts';
import { idList, oneOrMoreOf, printJson } from '../options.ts';
import { runClientCommand } from './run.ts';
import { registerDeliveryCommands } from './webhook-deliveries.ts';
import { fanOutCommand } from './webhook-fan-out.ts';

const BASE = '/admin/v1/webhooks';

interface Written {
  webhook: WebhookRecord;
  signing_secret?: string | null;
  revision: number;
  position: number;
}

interface TokenOptions {
  authToken?: string;
  authTokenFile?: string;
}

const path = (id: string) => `${BASE}/${encodeURIComponent(id)}`;

async function authToken(options: TokenOptions): Promise<string | undefined> {
  if (options.authToken !== undefined && options.authTokenFile !== undefined) {
    throw new CliError('give --auth-token or --auth-token-file, not both', EXIT.usage);
  }
  if (options.authTokenFile === undefined) return options.authToken;
  try {
    const text =
      options.authTokenFile === '-' ? await readStdin() : await readFile(options.authTokenFile, 'utf8');
    return text.replace(/\r?\n$/, '');
  } catch (err) {
    throw new CliError(`cannot read --auth-token-file: ${(err as Error).message}`, EXIT.usage);
  }
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** What `GET /admin/v1/webhook-health` says of a subscription. */
type Judged = SubscriptionStatusFields & { webhook_id: string };

/** What `GET /admin/v1/webhook-health` answers that the list reads. */
interface HealthOverview {
  subscriptions: Judged[];
  /** More subscriptions than the first `MAX_SUBSCRIPTIONS` it judges. */
  truncated: boolean;
}

/**
 * `ok`, or `FAILING` with its reasons (docs/operations.md, "Health"); for one the overview did not
 * judge, that it judges the first 500 only, or blank (one made since it answered).
 */
const healthCell = (judged: Judged | undefined, truncated: boolean) =>
  !judged
    ? truncated
      ? `not judged (first ${MAX_SUBSCRIPTIONS} only)`
      : ''
    : judged.status === 'ok'
      ? 'ok'
      : `FAILING: ${judged.trouble.map((x) => x.detail).join('; ')}`;

function listTable(webhooks: WebhookRecord[], health: HealthOverview): string {
  const byId = new Map(health.subscriptions.map((j) => [j.webhook_id, j]));
  const rows = table(
    ['webhook_id', 'url', 'stores', 'events', 'enabled', 'health', 'updated_at'],
    webhooks.map((w) => [
      w.webhook_id,
      w.url,
      w.store_ids.join(','),
      w.events.join(','),
      w.enabled ? 'yes' : `no (${w.disabled_reason ?? 'disabled'})`,
      healthCell(byId.get(w.webhook_id), health.truncated),
      w.updated_at,
    ]),
  );
  const note = health.truncated
    ? `\nhealth judged for the first ${MAX_SUBSCRIPTIONS} subscriptions in id order only\n`
    : '';
  return `${rows}\n${note}`;
}

/** The list with each subscription's `status` and `trouble` (null when not judged), as JSON. */
function listJson(webhooks: WebhookRecord[], health: HealthOverview) {
  const byId = new Map(health.subscriptions.map((j) => [j.webhook_id, j]));
  return {
    webhooks: webhooks.map((w) => {
      const judged = byId.get(w.webhook_id);
      return { ...w, status: judged?.status ?? null, trouble: judged?.trouble ?? null };
    }),
    health_truncated: health.truncated,
  };
}

function recordTable(w: WebhookRecord): string {
  return `${table(
    ['field', 'value'],
    [
      ['webhook_id', w.webhook_id],
      ['url', w.url],
      ['store_ids', w.store_ids.join(', ')],
      ['events', w.events.join(', ')],
      ['enabled', String(w.enabled)],
      ['disabled_reason', w.disabled_reason],
      ['created_at', w.created_at],
      ['updated_at', w.updated_at],
    ],
  )}\n`;
}

/** The record, then the signing secret when the answer carries one (shown once). */
function writtenText(out: Written): string {
  let text = recordTable(out.webhook);
  if (out.signing_secret) {
    text += `\nsigning secret (shown once, store it now): ${out.signing_secret}\n`;
  }
  return text;
}

export function registerWebhooks(program: Command): void {
  const webhooks = program
    .command('webhooks')
    .description(
      'webhook subscriptions: create, list, show, update, enable, disable, rotate-secret, delete; deliveries, redeliver, recover, test-send, health; the fan-out',
    );
  createCommand(webhooks);
  listCommand(webhooks);
  showCommand(webhooks);
  updateCommand(webhooks);
  enableDisableCommands(webhooks);
  rotateSecretCommand(webhooks);
  deleteCommand(webhooks);
  registerDeliveryCommands(webhooks);
  fanOutCommand(webhooks);
}

function createCommand(webhooks: Command): void {
  webhooks
    .command('create')
    .description('subscribe a URL to the cart events of some stores; prints the signing secret once')
    .requiredOption('--url <url>', 'the receiving URL (https; http only where private URLs are allowed)')
    .option('--auth-token <token>', 'sent as `Authorization: Bearer <token>` with every request')
    .option('--auth-token-file <file>', 'read the auth token from a file (- for standard input)')
    .requiredOption('--store <id...>', 'the store ids the subscription covers')
    .option('--events <kind...>', `the event kinds (default: all of ${webhookEventKinds.join(', ')})`)
    .option('--json', 'print the answer as JSON')
    .action((options: TokenOptions & { url: string; store: string[]; events?: string[]; json?: boolean }) =>
      runClientCommand(async () => {
        const token = await authToken(options);
        if (token === undefined) throw new CliError('give --auth-token or --auth-token-file', EXIT.usage);
        const body = {
          url: options.url,
          auth_token: token,
          store_ids: idList('--store', options.store),
          ...(options.events ? { events: oneOrMoreOf('--events', options.events, webhookEventKinds) } : {}),
        };
        const client = await createAdminClient();
        const out = await client.request<Written>('POST', BASE, body);
        return options.json ? printJson(out) : writtenText(out);
      }),
    );
}

function listCommand(webhooks: Command): void {
  webhooks
    .command('list')
    .description('every subscription (all pages), in webhook id order, each ok or FAILING with why')
    .option('--store <id>', 'only those covering this store')
    .option('--enabled', 'only enabled ones')
    .option('--disabled', 'only disabled ones')
    .option('--json', 'print {webhooks: [... each with status and trouble], health_truncated} as JSON')
    .action((options: { store?: string; enabled?: boolean; disabled?: boolean; json?: boolean }) =>
      runClientCommand(async () => {
        if (options.enabled && options.disabled) {
          throw new CliError('give --enabled or --disabled, not both', EXIT.usage);
        }
        const query = new URLSearchParams();
        if (options.store !== undefined)
          query.set('store_id', String(idList('--store', [options.store])?.[0]));
        if (options.enabled) query.set('enabled', 'true');
        if (options.disabled) query.set('enabled', 'false');
        const client = await createAdminClient();
        const list = await fetchAll<WebhookRecord>(client, BASE, 'webhooks', query);
        const health = await client.request<HealthOverview>('GET', '/admin/v1/webhook-health');
        return options.json ? printJson(listJson(list, health)) : listTable(list, health);
      }),
    );
}

function showCommand(webhooks: Command): void {
  webhooks
    .command('show')
    .description('one subscription (never its auth token or signing secret)')
    .argument('<id>', 'the webhook id')
    .option('--json', 'print the answer as JSON')
    .action((id: string, options: { json?: boolean }) =>
      runClientCommand(async () => {
        const out = await (await createAdminClient()).request<Written>('GET', path(id));
        return options.json ? printJson(out) : recordTable(out.webhook);
      }),
    );
}

function updateCommand(webhooks: Command): void {
  webhooks
    .command('update')
    .description('change the URL, auth token, stores or event kinds of a subscription')
    .argument('<id>', 'the webhook id')
    .option('--url <url>', 'the new receiving URL')
    .option('--auth-token <token>', 'the new auth token')
    .option('--auth-token-file <file>', 'read the new auth token from a file (- for standard input)')
    .option('--store <id...>', 'the new store ids (replace the old ones)')
    .option('--events <kind...>', `the new event kinds (of ${webhookEventKinds.join(', ')})`)
    .option('--json', 'print the answer as JSON')
    .action(
      (
        id: string,
        options: TokenOptions & { url?: string; store?: string[]; events?: string[]; json?: boolean },
      ) =>
        runClientCommand(async () => {
          const token = await authToken(options);
          const body = {
            ...(options.url !== undefined ? { url: options.url } : {}),
            ...(token !== undefined ? { auth_token: token } : {}),
            ...(options.store !== undefined ? { store_ids: idList('--store', options.store) } : {}),
            ...(options.events !== undefined
              ? { events: oneOrMoreOf('--events', options.events, webhookEventKinds) }
              : {}),
          };
          if (Object.keys(body).length === 0) {
            throw new CliError(
              'nothing to change: give --url, --auth-token, --auth-token-file, --store or --events',
              EXIT.usage,
            );
          }
          const out = await (await createAdminClient()).request<Written>('PATCH', path(id), body);
          return options.json ? printJson(out) : writtenText(out);
        }),
    );
}

function enableDisableCommands(webhooks: Command): void {
  for (const [name, enabled, description] of [
    ['disable', false, 'stop sending events to a subscription (kept, can be enabled again)'],
    ['enable', true, 'send events to a subscription again'],
  ] as const) {
    webhooks
      .command(name)
      .description(description)
      .argument('<id>', 'the webhook id')
      .option('--json', 'print the answer as JSON')
      .action((id: string, options: { json?: boolean }) =>
        runClientCommand(async () => {
          const out = await (await createAdminClient()).request<Written>('PATCH', path(id), { enabled });
          return options.json ? printJson(out) : writtenText(out);
        }),
      );
  }
}

function rotateSecretCommand(webhooks: Command): void {
  webhooks
    .command('rotate-secret')
    .description('replace the signing secret (the old one stops signing at once); prints the new one once')
    .argument('<id>', 'the webhook id')
    .option('--json', 'print the answer as JSON')
    .action((id: string, options: { json?: boolean }) =>
      runClientCommand(async () => {
        const out = await (await createAdminClient()).request<Written>('POST', `${path(id)}/rotate-secret`);
        return options.json ? printJson(out) : writtenText(out);
      }),
    );
}

function deleteCommand(webhooks: Command): void {
  webhooks
    .command('delete')
    .description('remove a subscription for good')
    .argument('<id>', 'the webhook id')
    .option('--json', 'print the answer as JSON')
    .action((id: string, options: { json?: boolean }) =>
      runClientCommand(async () => {
        const out = await (await createAdminClient()).request<{ webhook_id: string; removed_at: string }>(
          'DELETE',
          path(id),
        );
        return options.json ? printJson(out) : `removed webhook ${out.webhook_id} at ${out.removed_at}\n`;
      }),
    );
}
