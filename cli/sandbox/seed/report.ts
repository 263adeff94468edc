/**
 * What a seeding shows a person: a progress bar while it writes, and afterwards what the sandbox holds,
 * its API keys and a request to try.
 */
import { SingleBar } from 'cli-progress';
import type * as partner from '../../../domain/partner.ts';
import { plural } from '../../terminal.ts';
import type { SandboxPartnerCredential, SeedProgress, SeedResult } from './types.ts';

/**
 * `onProgress` for a seeding: a bar on stderr when `bar` is asked for and stderr is a terminal, and
 * `onStart` once records are being written (not for a store seeded before). `stop` removes the bar.
 */
export function seedProgress(options: { bar: boolean; onStart?: () => void }) {
  const bar =
    options.bar && process.stderr.isTTY
      ? new SingleBar({
          format: 'sandbox [{bar}] {percentage}% | {value}/{total} records | {phase}',
          hideCursor: true,
          stream: process.stderr,
        })
      : undefined;
  let started = false;
  return {
    onProgress({ phase, done, total }: SeedProgress) {
      if (!started) {
        started = true;
        options.onStart?.();
        bar?.start(total, 0, { phase });
      }
      bar?.update(done, { phase });
    },
    stop: () => bar?.stop(),
  };
}

/** The partner API request the banner suggests: the store operator's menu, which every size has. */
export function sampleRequest(result: Pick<SeedResult, 'partners'>, baseUrl: string) {
  const operator = result.partners.find((p) => p.kind === 'store_operator' && p.api_key);
  const any = operator ?? result.partners.find((p) => p.api_key);
  if (!any?.api_key) return null;
  const paths: Record<partner.PartnerKind, string> = {
    store_operator: `/partner/store/v1/menu_products?store_id=${any.store_ids[0]}&limit=3`,
    store_menu_feed: `/partner/store-menu-feed/v1/menu_products?store_id=${any.store_ids[0]}&limit=3`,
    brand: '/partner/brand/v1/stores?limit=3',
    brand_feed: '/partner/brand-feed/v1/reviews?limit=3',
  };
  const url = `${baseUrl.replace(/\/+$/, '')}${paths[any.kind]}`;
  return { url, api_key: any.api_key, curl: `curl -H 'Authorization: Bearer ${any.api_key}' '${url}'` };
}

const scopeText = (p: SandboxPartnerCredential) =>
  p.all_brands
    ? 'all brands'
    : p.brand_ids.length > 0
      ? `brands ${p.brand_ids.join(', ')}`
      : p.store_ids.length > 3
        ? `stores ${p.store_ids[0]}-${p.store_ids[p.store_ids.length - 1]} (${p.store_ids.length})`
        : `stores ${p.store_ids.join(', ')}`;

const thousands = (n: number) => n.toLocaleString('en-US');

/** The lines that tell a person what the sandbox holds and how to try it (never logged: they hold keys). */
export function describeSandbox(result: SeedResult, baseUrl: string): string {
  const c = result.counts;
  const lines = [
    result.outcome === 'seeded'
      ? `sandbox seeded: ${plural(result.events_written, 'event', 'events', thousands)} in ${result.seconds} s`
      : `sandbox: seeded before (seed ${result.seed}, size ${result.size}, at ${result.reference_time})`,
    `sandbox data: ${[
      plural(c.stores, 'store', 'stores', thousands),
      plural(c.brands, 'brand', 'brands', thousands),
      plural(c.products, 'product', 'products', thousands),
      plural(c.menu_products, 'menu product', 'menu products', thousands),
      plural(c.reviews, 'review', 'reviews', thousands),
      plural(c.specials, 'special', 'specials', thousands),
      plural(c.carts, 'cart', 'carts', thousands),
    ].join(', ')}`,
    `docs: ${baseUrl.replace(/\/+$/, '')}/docs`,
    'sandbox API keys (one partner per kind):',
  ];
  const width = Math.max(...result.partners.map((p) => p.kind.length));
  for (const p of result.partners) {
    const key =
      p.api_key ??
      `(${p.key_prefix}… ${p.key_status}: issue a new one with pds partners keys issue ${p.partner_id})`;
    lines.push(`  ${p.kind.padEnd(width)}  ${key}  ${p.name}, ${scopeText(p)}, partner ${p.partner_id}`);
  }
  const sample = sampleRequest(result, baseUrl);
  if (sample) lines.push(`try: ${sample.curl}`);
  return lines.join('\n');
}

/**
 * The sandbox's API keys as shell assignments, one variable per partner kind (`BRAND_KEY`,
 * `BRAND_FEED_KEY`, `STORE_OPERATOR_KEY`, `STORE_MENU_FEED_KEY`), for `eval "$(pds sandbox seed --env)"`
 * (README, "The first five minutes"). A key the operator revoked or rotated is never shown: a comment
 * says how to issue one instead.
 */
export function sandboxShellVariables(result: Pick<SeedResult, 'partners'>): string {
  return result.partners
    .map((p) => {
      const name = `${p.kind.toUpperCase()}_KEY`;
      return p.api_key
        ? `export ${name}='${p.api_key}'`
        : `# ${name}: ${p.key_prefix}… is ${p.key_status}; issue a new key with pds partners keys issue ${p.partner_id}`;
    })
    .join('\n');
}
