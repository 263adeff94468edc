/**
 * Webhook URL guard against server-side request forgery (docs/webhooks.md): a subscription must not turn the
 * service into a proxy for the operator's internal network or the cloud metadata endpoint.
 *
 * `checkWebhookUrl` parses the URL, resolves its host and refuses it when any resolved address is not a
 * public unicast address (one bad address is enough: the connection could go to any of them). Unless
 * private URLs are allowed it also requires https, so the bearer token and the body are not sent in clear.
 * Link-local and cloud metadata addresses (169.254.0.0/16, fe80::/10, 100.100.100.200, fd00:ec2::254)
 * and the unspecified ones (0.0.0.0/8, `::`, which reach the local host) are refused even where private
 * URLs are allowed: no receiver lives there, and the metadata service hands out the host's credentials.
 * A refusal names the host and the kind of address, never the address a name resolved to: the
 * operator's answer and the delivery log must not map an internal network.
 * `pinnedLookup` then hands the HTTP agent only the addresses that were checked, so a DNS answer that
 * changes between the check and the connection (DNS rebinding) cannot redirect the request.
 *
 * Ranges are matched with node:net's BlockList (no dependency). BlockList applies IPv4 rules to
 * IPv4-mapped IPv6 addresses (`::ffff:10.0.0.1`) by itself; NAT64 (`64:ff9b::/96`) and 6to4 (`2002::/16`)
 * addresses embed an IPv4 address too, so each IPv4 range is also added in those two forms, and the
 * ranges always refused in the deprecated IPv4-compatible form (`::169.254.169.254`) as well.
 */
import type { LookupAddress } from 'node:dns';
import { lookup as dnsLookup } from 'node:dns/promises';
import { BlockList, isIP, type LookupFunction } from 'node:net';

/** Why an address is not public. */
export type AddressCategory =
  | 'unspecified'
  | 'loopback'
  | 'metadata'
  | 'link_local'
  | 'private'
  | 'shared_address_space'
  | 'multicast'
  | 'reserved';

export type UrlRefusalReason =
  | 'invalid_url'
  | 'unsupported_scheme'
  | 'https_required'
  | 'credentials_in_url'
  | 'unresolvable'
  | 'invalid_address'
  | AddressCategory;

export interface UrlRefusal {
  ok: false;
  reason: UrlRefusalReason;
  /** One line, safe to log and to return to the operator (never contains URL credentials). */
  message: string;
}

export interface UrlApproval {
  ok: true;
  url: URL;
  /** The host as the HTTP client will look it up (URL hostname, IPv6 brackets removed). */
  hostname: string;
  /** Every address the host resolved to, all checked; pin the connection to these. */
  addresses: readonly LookupAddress[];
}

export type UrlCheck = UrlApproval | UrlRefusal;

/** Resolves a host name to all its addresses (default: node:dns/promises `lookup` with `all: true`). */
export type Resolver = (hostname: string) => Promise<readonly LookupAddress[]>;

export interface CheckOptions {
  /** `PDS_ALLOW_PRIVATE_WEBHOOK_URLS`: permits http and private addresses (never link-local, unspecified or cloud metadata ones). */
  allowPrivate: boolean;
  resolve?: Resolver;
}

export const defaultResolver: Resolver = (hostname) => dnsLookup(hostname, { all: true, order: 'verbatim' });

// ---------------------------------------------------------------------------------------------
// Address ranges (IANA special-purpose registries, RFC 6890 and successors)

const V4: readonly (readonly [AddressCategory, string, number])[] = [
  ['unspecified', '0.0.0.0', 8], // "this network"; connecting to 0.0.0.0 reaches the local host
  ['loopback', '127.0.0.0', 8],
  ['metadata', '169.254.169.254', 32], // cloud instance metadata (AWS, GCP, Azure, OpenStack…)
  ['metadata', '100.100.100.200', 32], // Alibaba Cloud instance metadata (inside 100.64.0.0/10)
  ['link_local', '169.254.0.0', 16],
  ['private', '10.0.0.0', 8],
  ['private', '172.16.0.0', 12],
  ['private', '192.168.0.0', 16],
  ['shared_address_space', '100.64.0.0', 10], // carrier-grade NAT
  ['multicast', '224.0.0.0', 4],
  ['reserved', '192.0.0.0', 24], // IETF protocol assignments
  ['reserved', '192.0.2.0', 24], // documentation
  ['reserved', '198.51.100.0', 24], // documentation
  ['reserved', '203.0.113.0', 24], // documentation
  ['reserved', '198.18.0.0', 15], // benchmarking
  ['reserved', '192.88.99.0', 24], // former 6to4 relay anycast
  ['reserved', '240.0.0.0', 4], // future use, and 255.255.255.255 broadcast
];

const V6: readonly (readonly [AddressCategory, string, number])[] = [
  ['unspecified', '::', 128],
  ['loopback', '::1', 128],
  ['metadata', 'fd00:ec2::254', 128], // AWS instance metadata over IPv6
  ['link_local', 'fe80::', 10],
  ['private', 'fc00::', 7], // unique local
  ['private', 'fec0::', 10], // deprecated site-local, still the "private" of old stacks
  ['multicast', 'ff00::', 8],
  ['reserved', '::', 96], // deprecated IPv4-compatible addresses
  ['reserved', '100::', 64], // discard-only
  ['reserved', '2001::', 32], // Teredo: the embedded IPv4 address is obfuscated, so refuse it all
  ['reserved', '2001:2::', 48], // benchmarking
  ['reserved', '2001:10::', 28], // ORCHID
  ['reserved', '2001:20::', 28], // ORCHIDv2
  ['reserved', '2001:db8::', 32], // documentation
  ['reserved', '3fff::', 20], // documentation
  ['reserved', '5f00::', 16], // SRv6 SIDs
  ['reserved', '64:ff9b:1::', 48], // local-use IPv4/IPv6 translation
];

/** An IPv4 address as the two 16-bit hex groups of an IPv6 address: `10.0.0.1` → `a00:1`. */
function v4AsV6Groups(v4: string): string {
  const [a, b, c, d] = v4.split('.').map(Number);
  return `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
}

/** One BlockList per category, checked in this order (the first match names the refusal). */
const CATEGORY_ORDER: readonly AddressCategory[] = [
  'unspecified',
  'loopback',
  'metadata',
  'link_local',
  'private',
  'shared_address_space',
  'multicast',
  'reserved',
];

/**
 * Categories refused even when private URLs are allowed (docs/webhooks.md, "Subscriptions"): no
 * receiver lives at a link-local or metadata address, and an unspecified one reaches the local host.
 */
const ALWAYS_REFUSED: ReadonlySet<AddressCategory> = new Set(['metadata', 'link_local', 'unspecified']);

const LISTS = new Map<AddressCategory, BlockList>(CATEGORY_ORDER.map((c) => [c, new BlockList()]));
for (const [category, network, prefix] of V4) {
  const list = LISTS.get(category)!;
  list.addSubnet(network, prefix, 'ipv4');
  // The same range reached through NAT64 (RFC 6052 well-known prefix) or 6to4.
  list.addSubnet(`64:ff9b::${v4AsV6Groups(network)}`, 96 + prefix, 'ipv6');
  list.addSubnet(`2002:${v4AsV6Groups(network)}::`, 16 + prefix, 'ipv6');
  // IPv4-compatible (`::a.b.c.d`, deprecated; a stack with a 6in4 tunnel may still send it on). Not
  // for 0.0.0.0/8, whose form `::/104` holds `::1`.
  if (ALWAYS_REFUSED.has(category) && category !== 'unspecified') {
    list.addSubnet(`::${v4AsV6Groups(network)}`, 96 + prefix, 'ipv6');
  }
}
for (const [category, network, prefix] of V6) LISTS.get(category)!.addSubnet(network, prefix, 'ipv6');

// Outside these, an IPv6 address is not global unicast (IANA has allocated nothing else for it).
const V6_ROUTABLE = new BlockList();
V6_ROUTABLE.addSubnet('2000::', 3, 'ipv6');
V6_ROUTABLE.addSubnet('64:ff9b::', 96, 'ipv6');
V6_ROUTABLE.addSubnet('::ffff:0:0', 96, 'ipv6');

/**
 * The category of a non-public address, `null` for a public unicast one, or `'invalid_address'`
 * when it is not an IP address at all (BlockList answers `false` for garbage, so validate first).
 */
export function classifyAddress(address: string): AddressCategory | 'invalid_address' | null {
  // A zone (`fe80::1%eth0`) makes BlockList answer false; the zone does not change the range.
  const bare = address.replace(/%.*$/, '');
  const version = isIP(bare);
  if (version === 0) return 'invalid_address';
  const type = version === 4 ? 'ipv4' : 'ipv6';
  for (const category of CATEGORY_ORDER) {
    if (LISTS.get(category)!.check(bare, type)) return category;
  }
  if (type === 'ipv6' && !V6_ROUTABLE.check(bare, 'ipv6')) return 'reserved';
  return null;
}

const DESCRIPTIONS: Record<AddressCategory | 'invalid_address', string> = {
  unspecified: 'an unspecified address',
  loopback: 'a loopback address',
  metadata: 'the cloud instance metadata address',
  link_local: 'a link-local address',
  private: 'a private address',
  shared_address_space: 'a carrier-grade NAT (shared) address',
  multicast: 'a multicast address',
  reserved: 'a reserved or non-routable address',
  invalid_address: 'not an IP address',
};

function refuse(reason: UrlRefusalReason, message: string): UrlRefusal {
  return { ok: false, reason, message };
}

/**
 * Checks a webhook URL and resolves its host. Never throws: every problem is a typed refusal.
 * Use it when a subscription is created or changed, and again before every delivery (DNS changes).
 */
export async function checkWebhookUrl(raw: string, options: CheckOptions): Promise<UrlCheck> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return refuse('invalid_url', 'not an absolute URL');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    return refuse('unsupported_scheme', `scheme ${url.protocol} is not allowed; use https`);
  }
  if (url.username !== '' || url.password !== '') {
    // The receiver authenticates us by the subscription's auth token; URL credentials would be logged.
    return refuse('credentials_in_url', 'the URL must not contain a user name or password');
  }
  if (url.protocol === 'http:' && !options.allowPrivate) {
    return refuse('https_required', 'webhook URLs must use https');
  }
  // The WHATWG parser has already normalised 2130706433, 0x7f.1 and friends to dotted IPv4.
  const hostname = url.hostname.replace(/^\[(.*)\]$/, '$1');
  if (hostname === '') return refuse('invalid_url', 'the URL has no host');

  let addresses: readonly LookupAddress[];
  if (isIP(hostname) !== 0) {
    addresses = [{ address: hostname, family: isIP(hostname) }];
  } else {
    try {
      addresses = await (options.resolve ?? defaultResolver)(hostname);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
      return refuse('unresolvable', `the host ${hostname} could not be resolved (${code})`);
    }
    if (addresses.length === 0) return refuse('unresolvable', `the host ${hostname} has no address`);
  }

  // The address a name resolved to is not said: what the operator and the delivery log see must not
  // map the network (an IP literal is the host itself, so the host names it).
  for (const { address } of addresses) {
    const category = classifyAddress(address);
    if (category === null) continue;
    if (category === 'invalid_address') {
      return refuse(
        'invalid_address',
        `the host ${hostname} resolved to something that is not an IP address`,
      );
    }
    const always = ALWAYS_REFUSED.has(category);
    if (options.allowPrivate && !always) continue;
    return refuse(
      category,
      `the host ${hostname} resolves to ${DESCRIPTIONS[category]}; ${always ? 'no webhook is ever sent there' : 'webhook URLs must be public'}`,
    );
  }
  return { ok: true, url, hostname, addresses };
}

/**
 * A connection error's message without the address a name resolved to (`connect ECONNREFUSED
 * 10.0.0.7:443` → `connect ECONNREFUSED`): the delivery log says what failed, not where the name points.
 * An IP literal host is the URL's own, and stays.
 */
export function withoutResolvedAddresses(
  message: string,
  approval: Pick<UrlApproval, 'hostname' | 'addresses'>,
): string {
  if (isIP(approval.hostname) !== 0) return message;
  let out = message;
  for (const { address } of approval.addresses) {
    const escaped = address.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    out = out.replace(new RegExp(` ?\\[?${escaped}\\]?(?::\\d+)?`, 'g'), '');
  }
  return out;
}

function lookupError(message: string, code: string, hostname: string): NodeJS.ErrnoException {
  return Object.assign(new Error(message), { code, hostname });
}

/**
 * A `lookup` for net/http/got (`dnsLookup`) that answers only with the addresses `checkWebhookUrl`
 * approved, and only for that host: the connection goes where the check looked, whatever DNS says now.
 * Handles both forms Node uses: a single address, and `all: true` (happy eyeballs / autoSelectFamily).
 */
export function pinnedLookup(approval: Pick<UrlApproval, 'hostname' | 'addresses'>): LookupFunction {
  const expected = approval.hostname.toLowerCase();
  const addresses = approval.addresses.map(({ address, family }) => ({ address, family }));
  return (hostname, options, callback) => {
    if (hostname.toLowerCase() !== expected) {
      // Only reachable if something tried another host (a redirect, a proxy): fail closed.
      callback(
        lookupError(`lookup of ${hostname} refused: only ${expected} was checked`, 'ENOTFOUND', hostname),
        '',
      );
      return;
    }
    const family = options.family === 'IPv4' ? 4 : options.family === 'IPv6' ? 6 : (options.family ?? 0);
    const usable = family === 0 ? addresses : addresses.filter((a) => a.family === family);
    if (usable.length === 0) {
      callback(lookupError(`no checked IPv${family} address for ${hostname}`, 'ENOTFOUND', hostname), '');
    } else if (options.all) {
      callback(null, usable);
    } else {
      callback(null, usable[0].address, usable[0].family);
    }
  };
}
