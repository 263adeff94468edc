import type { LookupAddress, LookupOptions } from 'node:dns';
import test from 'ava';
import {
  type AddressCategory,
  checkWebhookUrl,
  classifyAddress,
  pinnedLookup,
  type Resolver,
  withoutResolvedAddresses,
} from '../../webhooks/url-guard.ts';

const familyOf = (address: string) => (address.includes(':') ? 6 : 4);

/** A resolver answering from a table; unknown names fail as getaddrinfo does. */
function fakeDns(table: Record<string, string[]>): Resolver & { calls: string[] } {
  const calls: string[] = [];
  const resolve = async (hostname: string): Promise<LookupAddress[]> => {
    calls.push(hostname);
    const addresses = table[hostname];
    if (!addresses)
      throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
    return addresses.map((address) => ({ address, family: familyOf(address) }));
  };
  return Object.assign(resolve, { calls });
}

const ADDRESSES: [string, AddressCategory | null][] = [
  // public
  ['8.8.8.8', null],
  ['1.1.1.1', null],
  ['172.15.255.255', null],
  ['172.32.0.0', null],
  ['100.63.255.255', null],
  ['100.128.0.0', null],
  ['169.253.255.255', null],
  ['2606:4700:4700::1111', null],
  ['2001:4860:4860::8888', null],
  ['::ffff:8.8.8.8', null],
  ['64:ff9b::808:808', null], // NAT64 of 8.8.8.8
  ['2002:808:808::1', null], // 6to4 of 8.8.8.8
  // private
  ['10.0.0.1', 'private'],
  ['10.255.255.255', 'private'],
  ['172.16.0.1', 'private'],
  ['172.31.255.254', 'private'],
  ['192.168.1.1', 'private'],
  ['fc00::1', 'private'],
  ['fd12:3456:789a::1', 'private'],
  ['fec0::1', 'private'],
  // loopback
  ['127.0.0.1', 'loopback'],
  ['127.255.255.254', 'loopback'],
  ['::1', 'loopback'],
  // link-local and metadata
  ['169.254.0.1', 'link_local'],
  ['169.254.169.254', 'metadata'],
  ['100.100.100.200', 'metadata'], // Alibaba Cloud, inside carrier-grade NAT space
  ['fd00:ec2::254', 'metadata'],
  ['fe80::1', 'link_local'],
  ['fe80::1%eth0', 'link_local'],
  ['febf::1', 'link_local'],
  // unspecified
  ['0.0.0.0', 'unspecified'],
  ['0.1.2.3', 'unspecified'],
  ['::', 'unspecified'],
  // carrier-grade NAT
  ['100.64.0.1', 'shared_address_space'],
  ['100.127.255.254', 'shared_address_space'],
  ['100.100.100.199', 'shared_address_space'],
  // multicast and reserved
  ['224.0.0.1', 'multicast'],
  ['239.255.255.250', 'multicast'],
  ['ff02::1', 'multicast'],
  ['240.0.0.1', 'reserved'],
  ['255.255.255.255', 'reserved'],
  ['192.0.2.10', 'reserved'],
  ['198.18.0.1', 'reserved'],
  ['203.0.113.7', 'reserved'],
  ['2001:db8::1', 'reserved'],
  ['100::1', 'reserved'],
  ['2001::1', 'reserved'], // Teredo
  ['::7f00:1', 'reserved'], // IPv4-compatible (deprecated)
  ['4000::1', 'reserved'], // outside 2000::/3, unallocated
  // IPv4 embedded in IPv6: mapped, NAT64 and 6to4 forms of the ranges above
  ['::ffff:127.0.0.1', 'loopback'],
  ['::ffff:7f00:1', 'loopback'],
  ['::ffff:10.1.2.3', 'private'],
  ['::ffff:169.254.169.254', 'metadata'],
  ['::ffff:0.0.0.0', 'unspecified'],
  ['64:ff9b::a00:1', 'private'],
  ['64:ff9b::7f00:1', 'loopback'],
  ['64:ff9b::a9fe:a9fe', 'metadata'],
  ['::ffff:100.100.100.200', 'metadata'],
  ['::ffff:a9fe:101', 'link_local'],
  ['2002:a9fe:a9fe::', 'metadata'],
  ['64:ff9b::6464:64c8', 'metadata'],
  // IPv4-compatible forms of the ranges refused even where private URLs are allowed
  ['::a9fe:a9fe', 'metadata'],
  ['::169.254.0.9', 'link_local'],
  ['::6464:64c8', 'metadata'],
  ['2002:c0a8:101::1', 'private'],
  ['2002:7f00:1::', 'loopback'],
];

test('classifyAddress: table of public and non-public addresses', (t) => {
  for (const [address, expected] of ADDRESSES) t.is(classifyAddress(address), expected, address);
});

test('classifyAddress: anything that is not an IP address is invalid, never public', (t) => {
  for (const value of ['', 'localhost', '1.2.3', '256.1.1.1', '::g', 'example.com']) {
    t.is(classifyAddress(value), 'invalid_address', value);
  }
});

const dns = fakeDns({
  'hooks.partner.example': ['93.184.216.34', '2606:2800:220:1:248:1893:25c8:1946'],
  'internal.partner.example': ['10.1.2.3'],
  'localhost.partner.example': ['127.0.0.1'],
  'mixed.partner.example': ['93.184.216.34', '192.168.0.10'],
  'mixed6.partner.example': ['2606:2800:220:1::1', 'fe80::1'],
  'mapped.partner.example': ['::ffff:127.0.0.1'],
  'metadata.partner.example': ['169.254.169.254'],
  'cgnat.partner.example': ['100.100.1.1'],
  'empty.partner.example': [],
  'garbage.partner.example': ['not-an-ip'],
});

const URLS: [string, string | 'ok'][] = [
  ['https://hooks.partner.example/webhooks/pds', 'ok'],
  ['https://hooks.partner.example:8443/x?y=1#frag', 'ok'],
  ['https://93.184.216.34/hook', 'ok'],
  ['https://[2606:2800:220:1::1]/hook', 'ok'],
  ['http://hooks.partner.example/hook', 'https_required'],
  ['ftp://hooks.partner.example/hook', 'unsupported_scheme'],
  ['file:///etc/passwd', 'unsupported_scheme'],
  ['javascript:alert(1)', 'unsupported_scheme'],
  ['gopher://hooks.partner.example/', 'unsupported_scheme'],
  ['not a url', 'invalid_url'],
  ['/relative/path', 'invalid_url'],
  ['https://user:s3cr3t@hooks.partner.example/hook', 'credentials_in_url'],
  ['https://user@hooks.partner.example/hook', 'credentials_in_url'],
  ['https://internal.partner.example/hook', 'private'],
  ['https://localhost.partner.example/hook', 'loopback'],
  ['https://mixed.partner.example/hook', 'private'],
  ['https://mixed6.partner.example/hook', 'link_local'],
  ['https://mapped.partner.example/hook', 'loopback'],
  ['https://metadata.partner.example/hook', 'metadata'],
  ['https://cgnat.partner.example/hook', 'shared_address_space'],
  ['https://nowhere.partner.example/hook', 'unresolvable'],
  ['https://empty.partner.example/hook', 'unresolvable'],
  ['https://garbage.partner.example/hook', 'invalid_address'],
  // Literal addresses in every spelling the URL parser accepts.
  ['https://127.0.0.1/hook', 'loopback'],
  ['https://2130706433/hook', 'loopback'],
  ['https://0x7f.1/hook', 'loopback'],
  ['https://0177.0.0.1/hook', 'loopback'],
  ['https://[::1]/hook', 'loopback'],
  ['https://[::ffff:127.0.0.1]/hook', 'loopback'],
  ['https://[::ffff:a9fe:a9fe]/latest/meta-data', 'metadata'],
  ['https://169.254.169.254/latest/meta-data', 'metadata'],
  ['https://[fe80::1]/hook', 'link_local'],
  ['https://0.0.0.0/hook', 'unspecified'],
  ['https://[::]/hook', 'unspecified'],
  ['https://10.0.0.1/hook', 'private'],
  ['https://[fd00::1]/hook', 'private'],
  ['https://224.0.0.1/hook', 'multicast'],
];

test('checkWebhookUrl: table of URLs (private URLs not allowed)', async (t) => {
  for (const [url, expected] of URLS) {
    const check = await checkWebhookUrl(url, { allowPrivate: false, resolve: dns });
    t.is(check.ok ? 'ok' : check.reason, expected, url);
    if (!check.ok) {
      t.false(check.message.includes('s3cr3t'), 'a refusal never repeats URL credentials');
    }
  }
});

test('checkWebhookUrl: a host with one private address among public ones is refused, naming the host and the kind, not the address', async (t) => {
  const check = await checkWebhookUrl('https://mixed.partner.example/hook', {
    allowPrivate: false,
    resolve: dns,
  });
  t.false(check.ok);
  if (check.ok) return;
  t.is(check.reason, 'private');
  t.deepEqual(Object.keys(check).sort(), ['message', 'ok', 'reason']);
  t.is(
    check.message,
    'the host mixed.partner.example resolves to a private address; webhook URLs must be public',
  );
});

test('checkWebhookUrl: approval carries the URL, the bare host and every checked address', async (t) => {
  const check = await checkWebhookUrl('https://hooks.partner.example/webhooks/pds', {
    allowPrivate: false,
    resolve: dns,
  });
  t.true(check.ok);
  if (!check.ok) return;
  t.is(check.url.href, 'https://hooks.partner.example/webhooks/pds');
  t.is(check.hostname, 'hooks.partner.example');
  t.deepEqual(
    check.addresses.map((a) => a.address),
    ['93.184.216.34', '2606:2800:220:1:248:1893:25c8:1946'],
  );
  const literal = await checkWebhookUrl('https://[2606:2800:220:1::1]/', {
    allowPrivate: false,
    resolve: dns,
  });
  t.true(literal.ok && literal.hostname === '2606:2800:220:1::1');
});

test('checkWebhookUrl: literal addresses are not looked up', async (t) => {
  const local = fakeDns({});
  await checkWebhookUrl('https://93.184.216.34/', { allowPrivate: false, resolve: local });
  await checkWebhookUrl('https://[::1]/', { allowPrivate: false, resolve: local });
  t.deepEqual(local.calls, []);
});

test('checkWebhookUrl: allowPrivate lets http and loopback/private through, never the metadata address', async (t) => {
  const allowed = { allowPrivate: true, resolve: dns };
  for (const url of [
    'http://127.0.0.1:8080/hook',
    'http://[::1]:8080/hook',
    'http://localhost.partner.example/hook',
    'https://internal.partner.example/hook',
    'https://mixed.partner.example/hook',
    'http://hooks.partner.example/hook',
  ]) {
    const check = await checkWebhookUrl(url, allowed);
    t.true(check.ok, url);
  }
  for (const url of [
    'http://169.254.169.254/latest/meta-data',
    'http://[fd00:ec2::254]/latest/meta-data',
    'https://metadata.partner.example/hook',
  ]) {
    const check = await checkWebhookUrl(url, allowed);
    t.is(check.ok ? 'ok' : check.reason, 'metadata', url);
  }
  // The other refusals do not depend on the setting.
  for (const [url, reason] of [
    ['ftp://127.0.0.1/', 'unsupported_scheme'],
    ['http://u:p@127.0.0.1/', 'credentials_in_url'],
    ['http://nowhere.partner.example/', 'unresolvable'],
  ]) {
    const check = await checkWebhookUrl(url, allowed);
    t.is(check.ok ? 'ok' : check.reason, reason, url);
  }
});

/** Names that resolve to an address no webhook is ever sent to, whatever PDS_ALLOW_PRIVATE_WEBHOOK_URLS says. */
const NEVER = fakeDns({
  'linklocal.partner.example': ['169.254.7.7'],
  'aws.partner.example': ['169.254.169.254'],
  'alibaba.partner.example': ['100.100.100.200'],
  'aws6.partner.example': ['fd00:ec2::254'],
  'fe80.partner.example': ['fe80::1234:5678'],
  'mapped.partner.example': ['::ffff:169.254.169.254'],
  'mapped-hex.partner.example': ['::ffff:a9fe:707'],
  'compat.partner.example': ['::a9fe:a9fe'],
  'nat64.partner.example': ['64:ff9b::a9fe:a9fe'],
  'zero.partner.example': ['0.0.0.0'],
  'zero6.partner.example': ['::'],
  // One such address among public ones is enough: the connection could go to any of them.
  'mixed.partner.example': ['93.184.216.34', '169.254.3.3'],
  'mixed6.partner.example': ['2606:2800:220:1::1', 'fe80::99'],
});

test('checkWebhookUrl: link-local, metadata and unspecified addresses are refused in every form, even where private URLs are allowed', async (t) => {
  const literals: [string, AddressCategory][] = [
    ['http://169.254.0.1/hook', 'link_local'],
    ['http://169.254.255.255:8080/hook', 'link_local'],
    ['http://169.254.169.254/latest/meta-data', 'metadata'],
    ['http://100.100.100.200/latest/meta-data', 'metadata'],
    ['http://[fd00:ec2::254]/latest/meta-data', 'metadata'],
    ['http://[fe80::1]/hook', 'link_local'],
    ['http://[febf:ffff::1]/hook', 'link_local'],
    ['http://[::ffff:169.254.169.254]/latest', 'metadata'],
    ['http://[::ffff:a9fe:101]/hook', 'link_local'],
    ['http://[::ffff:100.100.100.200]/latest', 'metadata'],
    ['http://[::169.254.169.254]/latest', 'metadata'],
    ['http://[64:ff9b::a9fe:a9fe]/latest', 'metadata'],
    ['http://[2002:a9fe:a9fe::1]/latest', 'metadata'],
    ['http://2852039166/latest', 'metadata'], // 169.254.169.254 as one number
    ['http://0xa9.0xfe.0xa9.0xfe/latest', 'metadata'],
    ['http://0.0.0.0:8080/hook', 'unspecified'],
    ['http://0/hook', 'unspecified'],
    ['http://[::]/hook', 'unspecified'],
    ['http://[::ffff:0.0.0.0]/hook', 'unspecified'],
  ];
  const names: [string, AddressCategory][] = [
    ['http://linklocal.partner.example/hook', 'link_local'],
    ['http://aws.partner.example/hook', 'metadata'],
    ['http://alibaba.partner.example/hook', 'metadata'],
    ['http://aws6.partner.example/hook', 'metadata'],
    ['http://fe80.partner.example/hook', 'link_local'],
    ['http://mapped.partner.example/hook', 'metadata'],
    ['http://mapped-hex.partner.example/hook', 'link_local'],
    ['http://compat.partner.example/hook', 'metadata'],
    ['http://nat64.partner.example/hook', 'metadata'],
    ['http://zero.partner.example/hook', 'unspecified'],
    ['http://zero6.partner.example/hook', 'unspecified'],
    ['https://mixed.partner.example/hook', 'link_local'],
    ['https://mixed6.partner.example/hook', 'link_local'],
  ];
  for (const allowPrivate of [true, false]) {
    for (const [url, expected] of [...literals, ...names]) {
      // https where http is refused anyway, so the address is what refuses it.
      const asked = allowPrivate ? url : url.replace(/^http:/, 'https:');
      const check = await checkWebhookUrl(asked, { allowPrivate, resolve: NEVER });
      t.is(check.ok ? 'ok' : check.reason, expected, `${asked} (private URLs allowed: ${allowPrivate})`);
    }
  }
  // What a name resolved to is never said; the host and the kind of address are.
  for (const [url] of names) {
    const check = await checkWebhookUrl(url, { allowPrivate: true, resolve: NEVER });
    if (check.ok) continue;
    const host = new URL(url).hostname;
    const resolved = (await NEVER(host)).map((a) => a.address);
    t.true(check.message.startsWith(`the host ${host} resolves to `), check.message);
    t.regex(check.message, /no webhook is ever sent there$/);
    for (const address of resolved)
      t.false(check.message.includes(address), `${check.message} names ${address}`);
    t.false(/\d+\.\d+\.\d+\.\d+|[0-9a-f]*::[0-9a-f]*/i.test(check.message.replace(host, '')), check.message);
  }
  // The neighbours stay allowed where private URLs are: loopback, private, carrier-grade NAT.
  for (const url of [
    'http://127.0.0.1/h',
    'http://10.0.0.1/h',
    'http://100.100.100.199/h',
    'http://[fd00:ec2::253]/h',
  ]) {
    const check = await checkWebhookUrl(url, { allowPrivate: true, resolve: NEVER });
    t.true(check.ok, url);
  }
});

test('withoutResolvedAddresses: a connection error names no address a name resolved to; an IP literal host keeps its own', (t) => {
  const named = {
    hostname: 'hooks.partner.example',
    addresses: [
      { address: '10.0.0.7', family: 4 },
      { address: 'fd12::7', family: 6 },
    ],
  };
  t.is(withoutResolvedAddresses('connect ECONNREFUSED 10.0.0.7:443', named), 'connect ECONNREFUSED');
  t.is(withoutResolvedAddresses('connect ECONNREFUSED fd12::7:8443', named), 'connect ECONNREFUSED');
  t.is(
    withoutResolvedAddresses('connect ETIMEDOUT [fd12::7]:443 after 10.0.0.7', named),
    'connect ETIMEDOUT after',
  );
  // 10.0.0.70 is another address, not the one resolved: only exact addresses are withheld.
  t.is(withoutResolvedAddresses('read ECONNRESET', named), 'read ECONNRESET');
  const literal = { hostname: '10.0.0.7', addresses: [{ address: '10.0.0.7', family: 4 }] };
  t.is(
    withoutResolvedAddresses('connect ECONNREFUSED 10.0.0.7:443', literal),
    'connect ECONNREFUSED 10.0.0.7:443',
  );
});

test('checkWebhookUrl: the default resolver (node:dns) resolves localhost to loopback', async (t) => {
  const refused = await checkWebhookUrl('https://localhost/hook', { allowPrivate: false });
  t.is(refused.ok ? 'ok' : refused.reason, 'loopback');
  const allowed = await checkWebhookUrl('http://localhost/hook', { allowPrivate: true });
  t.true(allowed.ok);
});

/** Calls a lookup function the way net does and returns what it answered. */
function callLookup(
  lookup: ReturnType<typeof pinnedLookup>,
  hostname: string,
  options: LookupOptions,
): Promise<{ error: NodeJS.ErrnoException | null; address: string | LookupAddress[]; family?: number }> {
  return new Promise((resolve) => {
    lookup(hostname, options, (error, address, family) => resolve({ error, address, family }));
  });
}

test('pinnedLookup: answers only with the checked addresses, in both forms net uses', async (t) => {
  const lookup = pinnedLookup({
    hostname: 'hooks.partner.example',
    addresses: [
      { address: '93.184.216.34', family: 4 },
      { address: '2606:2800:220:1::1', family: 6 },
    ],
  });
  t.deepEqual(await callLookup(lookup, 'hooks.partner.example', {}), {
    error: null,
    address: '93.184.216.34',
    family: 4,
  });
  t.deepEqual((await callLookup(lookup, 'HOOKS.partner.example', { all: true })).address, [
    { address: '93.184.216.34', family: 4 },
    { address: '2606:2800:220:1::1', family: 6 },
  ]);
  t.deepEqual(await callLookup(lookup, 'hooks.partner.example', { family: 6 }), {
    error: null,
    address: '2606:2800:220:1::1',
    family: 6,
  });
  const v4only = pinnedLookup({
    hostname: 'a.example',
    addresses: [{ address: '93.184.216.34', family: 4 }],
  });
  const none = await callLookup(v4only, 'a.example', { family: 6 });
  t.is(none.error?.code, 'ENOTFOUND');
});

test('pinnedLookup: refuses any other host name (fails closed)', async (t) => {
  const lookup = pinnedLookup({
    hostname: 'hooks.partner.example',
    addresses: [{ address: '93.184.216.34', family: 4 }],
  });
  const other = await callLookup(lookup, 'internal.partner.example', { all: true });
  t.is(other.error?.code, 'ENOTFOUND');
  t.regex(other.error?.message ?? '', /only hooks\.partner\.example was checked/);
});

test('DNS rebinding: an answer that turns private after the check never reaches the connection', async (t) => {
  // First answer public (passes the check), every later answer loopback (the rebinding attack).
  let calls = 0;
  const rebinding: Resolver = async () => [
    calls++ === 0 ? { address: '93.184.216.34', family: 4 } : { address: '127.0.0.1', family: 4 },
  ];
  const check = await checkWebhookUrl('https://rebind.partner.example/hook', {
    allowPrivate: false,
    resolve: rebinding,
  });
  t.true(check.ok);
  if (!check.ok) return;
  const lookup = pinnedLookup(check);
  for (let i = 0; i < 3; i++) {
    t.deepEqual((await callLookup(lookup, 'rebind.partner.example', { all: true })).address, [
      { address: '93.184.216.34', family: 4 },
    ]);
  }
  t.is(calls, 1);
  // A fresh check (the next attempt) sees the new answer and refuses.
  const again = await checkWebhookUrl('https://rebind.partner.example/hook', {
    allowPrivate: false,
    resolve: rebinding,
  });
  t.is(again.ok ? 'ok' : again.reason, 'loopback');
});
