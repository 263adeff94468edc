/**
 * `pds partners …`: partners and their API keys through the admin API.
 *
 *   pds partners create --name <name> --kind <kind> [--brand <id...> | --all-brands | --store <id...>] [--rate-limit <n>]
 *   pds partners list [--kind <kind>]
 *   pds partners show <id>
 *   pds partners set-rate-limit <id> <per-minute>
 *   pds partners keys list <id>
 *   pds partners keys issue <id>
 *   pds partners keys rotate <id> <key_id>
 *   pds partners keys revoke <id> <key_id>
 *
 * Each prints a table, or the API's answer with `--json`. `create`, `keys issue` and `keys rotate`
 * print the new API key: it is shown this once (only its hash is stored).
 */
import type { Command } from 'commander';
import { type PartnerRecord, partnerKinds } from '../../domain/partner.ts';
import { CliError, createAdminClient, EXIT, fetchAll, table } from '../client.ts';
import { idList, printJson } from '../options.ts';
import { runClientCommand } from './run.ts';

const BASE = '/admin/v1/partners';

type KeyRecord = PartnerRecord['keys'][number];
interface KeyWritten {
  key: KeyRecord;
  api_key: string | null;
  revoked_key_id?: string;
}

const partnerPath = (id: string) => `${BASE}/${encodeURIComponent(id)}`;
const keyPath = (id: string, keyId: string) => `${partnerPath(id)}/keys/${encodeURIComponent(keyId)}`;

function rateLimit(raw: string): number {
  if (!/^\d{1,9}$/.test(raw.trim())) {
    throw new CliError(
      `rate limit: ${JSON.stringify(raw)} is not a whole number of requests per minute`,
      EXIT.usage,
    );
  }
  return Number(raw);
}

function kindOption(raw: string | undefined): string | undefined {
  if (raw !== undefined && !(partnerKinds as readonly string[]).includes(raw)) {
    throw new CliError(
      `--kind: expected one of ${partnerKinds.join(', ')}, got ${JSON.stringify(raw)}`,
      EXIT.usage,
    );
  }
  return raw;
}

const scope = (p: PartnerRecord) =>
  p.all_brands
    ? 'all brands'
    : p.brand_ids.length > 0
      ? `brands ${p.brand_ids.join(',')}`
      : `stores ${p.store_ids.join(',')}`;
const activeKeys = (p: PartnerRecord) => p.keys.filter((k) => k.status === 'active').length;

function listTable(partners: PartnerRecord[]): string {
  return `${table(
    ['partner_id', 'name', 'kind', 'scope', 'active_keys', 'rate_limit', 'created_at'],
    partners.map((p) => [
      p.partner_id,
      p.name,
      p.kind,
      scope(p),
      activeKeys(p),
      `${p.rate_limit_per_minute}/min`,
      p.created_at,
    ]),
  )}\n`;
}

function keysTable(keys: KeyRecord[]): string {
  return `${table(
    ['key_id', 'prefix', 'status', 'issued_at', 'revoked_at'],
    keys.map((k) => [k.key_id, `${k.key_prefix}…`, k.status, k.issued_at, k.revoked_at]),
  )}\n`;
}

function recordTable(p: PartnerRecord): string {
  const fields = table(
    ['field', 'value'],
    [
      ['partner_id', p.partner_id],
      ['name', p.name],
      ['kind', p.kind],
      ['brand_ids', p.brand_ids.join(', ')],
      ['store_ids', p.store_ids.join(', ')],
      ['all_brands', String(p.all_brands)],
      ['rate_limit_per_minute', p.rate_limit_per_minute],
      ['created_at', p.created_at],
      ['updated_at', p.updated_at],
    ],
  );
  return `${fields}\n\nkeys:\n${keysTable(p.keys)}`;
}

/** The new key, shown once. */
const keyLine = (apiKey: string | null) =>
  apiKey
    ? `\napi key (shown once, store it now): ${apiKey}\n`
    : '\napi key: not shown (an idempotent replay never repeats a key; rotate it if the first answer was lost)\n';

/** Every partner (all pages), of one kind when given. */
async function partnerList(kind: string | undefined): Promise<PartnerRecord[]> {
  const query = new URLSearchParams(kind ? { kind } : {});
  return fetchAll<PartnerRecord>(await createAdminClient(), BASE, 'partners', query);
}

export function registerPartners(program: Command): void {
  const partners = program
    .command('partners')
    .description('partners of the four kinds and their API keys: create, list, show, set-rate-limit, keys');
  createCommand(partners);
  listCommand(partners);
  showCommand(partners);
  setRateLimitCommand(partners);
  keyCommands(partners);
}

function createCommand(partners: Command): void {
  partners
    .command('create')
    .description('register a partner and issue its first API key (shown once)')
    .requiredOption('--name <name>', 'the partner’s name')
    .requiredOption('--kind <kind>', `one of ${partnerKinds.join(', ')}`)
    .option('--brand <id...>', 'brand ids the key covers (brand, brand_feed)')
    .option('--all-brands', 'every brand (brand_feed only)')
    .option('--store <id...>', 'store ids the key covers (store_operator, store_menu_feed)')
    .option('--rate-limit <per-minute>', 'requests per minute per key (default 600)')
    .option('--json', 'print the answer as JSON')
    .action(
      (options: {
        name: string;
        kind: string;
        brand?: string[];
        allBrands?: boolean;
        store?: string[];
        rateLimit?: string;
        json?: boolean;
      }) =>
        runClientCommand(async () => {
          kindOption(options.kind);
          const body = {
            name: options.name,
            kind: options.kind,
            ...(options.brand ? { brand_ids: idList('--brand', options.brand) } : {}),
            ...(options.store ? { store_ids: idList('--store', options.store) } : {}),
            ...(options.allBrands ? { all_brands: true } : {}),
            ...(options.rateLimit !== undefined
              ? { rate_limit_per_minute: rateLimit(options.rateLimit) }
              : {}),
          };
          const out = await (await createAdminClient()).request<{
            partner: PartnerRecord;
            api_key: string | null;
          }>('POST', BASE, body);
          return options.json ? printJson(out) : recordTable(out.partner) + keyLine(out.api_key);
        }),
    );
}

function listCommand(partners: Command): void {
  partners
    .command('list')
    .description('every partner (all pages), in partner id order')
    .option('--kind <kind>', `only partners of this kind (${partnerKinds.join(', ')})`)
    .option('--json', 'print {partners: [...]} as JSON')
    .action((options: { kind?: string; json?: boolean }) =>
      runClientCommand(async () => {
        const list = await partnerList(kindOption(options.kind));
        return options.json ? printJson({ partners: list }) : listTable(list);
      }),
    );
}

function showCommand(partners: Command): void {
  partners
    .command('show')
    .description('one partner: scope, rate limit and keys (never a key itself)')
    .argument('<id>', 'the partner id')
    .option('--json', 'print the answer as JSON')
    .action((id: string, options: { json?: boolean }) =>
      runClientCommand(async () => {
        const out = await (await createAdminClient()).request<{ partner: PartnerRecord }>(
          'GET',
          partnerPath(id),
        );
        return options.json ? printJson(out) : recordTable(out.partner);
      }),
    );
}

function setRateLimitCommand(partners: Command): void {
  partners
    .command('set-rate-limit')
    .description('change how many requests per minute each of the partner’s keys may make')
    .argument('<id>', 'the partner id')
    .argument('<per-minute>', 'requests per minute, 1-100000')
    .option('--json', 'print the answer as JSON')
    .action((id: string, perMinute: string, options: { json?: boolean }) =>
      runClientCommand(async () => {
        const out = await (await createAdminClient()).request<{ partner: PartnerRecord }>(
          'PATCH',
          partnerPath(id),
          {
            rate_limit_per_minute: rateLimit(perMinute),
          },
        );
        return options.json ? printJson(out) : recordTable(out.partner);
      }),
    );
}

/** `pds partners keys list | issue | rotate | revoke`. */
function keyCommands(partners: Command): void {
  const keys = partners.command('keys').description('a partner’s API keys: list, issue, rotate, revoke');

  keys
    .command('list')
    .description('the partner’s keys, active and revoked (prefixes only)')
    .argument('<id>', 'the partner id')
    .option('--json', 'print {keys: [...]} as JSON')
    .action((id: string, options: { json?: boolean }) =>
      runClientCommand(async () => {
        const out = await (await createAdminClient()).request<{ partner: PartnerRecord }>(
          'GET',
          partnerPath(id),
        );
        return options.json ? printJson({ keys: out.partner.keys }) : keysTable(out.partner.keys);
      }),
    );

  keys
    .command('issue')
    .description('issue another API key (a partner holds at most 10 active keys); prints it once')
    .argument('<id>', 'the partner id')
    .option('--json', 'print the answer as JSON')
    .action((id: string, options: { json?: boolean }) =>
      runClientCommand(async () => {
        const out = await (await createAdminClient()).request<KeyWritten>(
          'POST',
          `${partnerPath(id)}/keys`,
          {},
        );
        return options.json ? printJson(out) : keysTable([out.key]) + keyLine(out.api_key);
      }),
    );

  keys
    .command('rotate')
    .description('replace a key: a new one (printed once) and the old one revoked, at the same instant')
    .argument('<id>', 'the partner id')
    .argument('<key_id>', 'the key to replace')
    .option('--json', 'print the answer as JSON')
    .action((id: string, keyId: string, options: { json?: boolean }) =>
      runClientCommand(async () => {
        const out = await (await createAdminClient()).request<KeyWritten>(
          'POST',
          `${keyPath(id, keyId)}/rotate`,
          {},
        );
        return options.json
          ? printJson(out)
          : `revoked ${out.revoked_key_id}\n${keysTable([out.key])}${keyLine(out.api_key)}`;
      }),
    );

  keys
    .command('revoke')
    .description('revoke a key: it stops working at once')
    .argument('<id>', 'the partner id')
    .argument('<key_id>', 'the key to revoke')
    .option('--json', 'print the answer as JSON')
    .action((id: string, keyId: string, options: { json?: boolean }) =>
      runClientCommand(async () => {
        const out = await (await createAdminClient()).request<{ key: KeyRecord }>(
          'DELETE',
          keyPath(id, keyId),
        );
        return options.json ? printJson(out) : keysTable([out.key]);
      }),
    );
}
