/**
 * Hostile values for the hostile-input suite (issue 8, part 3): strings, numbers, JSON values, path
 * segments, query strings, header values and request bodies that a careless or malicious client sends.
 * Each arbitrary mixes a curated list (the values that have broken real services) with generated ones.
 */
import fc from 'fast-check';

// biome-ignore lint/suspicious/noExplicitAny: request templates are plain JSON
export type Json = Record<string, any>;

/** Strings that have broken parsers, coercions, query builders, templates and terminals. */
export const NASTY_STRINGS: readonly string[] = [
  '',
  ' ',
  '\t',
  '0',
  '-0',
  '-1',
  '1.5',
  '01',
  ' 1',
  '1 ',
  '0x1F',
  '1e3',
  '1e309',
  '-1e309',
  '9007199254740993',
  '18446744073709551616',
  '99999999999999999999999999999999',
  '1_000',
  '1,000',
  'NaN',
  'Infinity',
  '-Infinity',
  'null',
  'undefined',
  'true',
  'false',
  '[]',
  '{}',
  '[object Object]',
  '__proto__',
  'constructor',
  'prototype',
  'hasOwnProperty',
  'toString',
  '$where',
  '$gt',
  '{"$gt":""}',
  '{"$ne":null}',
  '{"$where":"sleep(1000)"}',
  '.*',
  "'; DROP TABLE events; --",
  "' OR '1'='1",
  '1; SELECT * FROM events',
  '../../etc/passwd',
  '..\\..\\windows\\win.ini',
  '%2e%2e%2f%2e%2e%2fetc%2fpasswd',
  'file:///etc/passwd',
  '<script>alert(1)</script>',
  '"><img src=x onerror=alert(1)>',
  'javascript:alert(1)',
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a template injection probe, sent as text
  '${7*7}',
  '{{7*7}}',
  '%s%s%s%n',
  '\\',
  '"',
  "'",
  '`',
  '\u0000',
  'a\u0000b',
  '\r\n',
  'x\r\nSet-Cookie: a=b',
  '\u2028\u2029',
  '\ud800',
  '\udfff',
  'a\ud83db',
  '\ufeff',
  '\u202eevil',
  'مرحبا بالعالم',
  'שלום',
  '🌿🔥💨',
  '👩‍👩‍👧‍👦',
  'Z̤͔ͧ̑̓ä͖̭̈̇lͮ̒ͫǧ̗͚̚o̙̔ͮ̇͐̇',
  '𝕳𝖊𝖑𝖑𝖔',
  '\u00a0',
  'A'.repeat(1000),
  '9'.repeat(400),
];

/** Numbers at the edges of int32, doubles and safe integers (NaN and ±Infinity are sent as raw JSON tokens). */
export const NASTY_NUMBERS: readonly number[] = [
  0,
  -0,
  -1,
  1.5,
  -1.5,
  2 ** 31,
  2 ** 53,
  2 ** 53 + 2,
  -(2 ** 53),
  1e21,
  1e308,
  -1e308,
  5e-324,
  0.1 + 0.2,
];

/** JSON number tokens JSON.parse turns into Infinity, -0, 0 or an inexact value. */
export const RAW_NUMBER_TOKENS: readonly string[] = [
  '1e400',
  '-1e400',
  '1e-400',
  '-0',
  '-0.0',
  '123456789012345678901234567890',
  '0.30000000000000004',
  '1E+2',
];

/** Lone surrogates, which `fc.string` never produces. */
const loneSurrogates = fc
  .array(fc.oneof(fc.integer({ min: 0xd800, max: 0xdfff }), fc.integer({ min: 0x20, max: 0x7e })), {
    minLength: 1,
    maxLength: 8,
  })
  .map((codes) => String.fromCharCode(...codes));

export const hostileString: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...NASTY_STRINGS) },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'grapheme', maxLength: 20 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary-ascii', maxLength: 20 }) },
  { weight: 1, arbitrary: loneSurrogates },
);

/** A JSON text whose parse sets `__proto__` or `constructor.prototype` as own keys (object literals cannot). */
const pollution: fc.Arbitrary<unknown> = fc
  .constantFrom(
    '{"__proto__":{"polluted":"yes"}}',
    '{"constructor":{"prototype":{"polluted":"yes"}}}',
    '{"__proto__":null}',
    '{"__proto__":[]}',
    '{"hasOwnProperty":"x","toString":"y","valueOf":1}',
  )
  .map((text) => JSON.parse(text) as unknown);

/** Values shaped like MongoDB query operators, which must only ever be data. */
const operatorLike: fc.Arbitrary<unknown> = fc.constantFrom(
  { $gt: '' },
  { $ne: null },
  { $where: 'this.store_id > 0' },
  { $regex: '.*' },
  { $in: [1, 2, 3] },
  [{ $gt: '' }],
  { $expr: { $eq: [1, 1] } },
);

export const hostileJsonValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: hostileString },
  { weight: 2, arbitrary: fc.constantFrom(...NASTY_NUMBERS) },
  { weight: 1, arbitrary: fc.integer() },
  { weight: 1, arbitrary: fc.double({ noNaN: true, noDefaultInfinity: true }) },
  { weight: 1, arbitrary: fc.constantFrom(null, true, false, [], {}) },
  { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  { weight: 2, arbitrary: pollution },
  { weight: 2, arbitrary: operatorLike },
  { weight: 1, arbitrary: fc.constantFrom(Array(5000).fill(1), 'x'.repeat(70_000)) },
);

/** Raw JSON text spliced in place of a value: tokens JSON.stringify never writes, and deep nesting. */
export const rawJsonValue: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(...RAW_NUMBER_TOKENS),
  fc.integer({ min: 100, max: 20_000 }).map((depth) => '['.repeat(depth) + ']'.repeat(depth)),
  fc.integer({ min: 100, max: 6_000 }).map((depth) => '{"a":'.repeat(depth) + '1' + '}'.repeat(depth)),
);

/** Whole bodies that are not JSON, or JSON of a surprising shape. */
export const RAW_BODIES: readonly string[] = [
  '',
  ' ',
  '{',
  '{"a":',
  '}',
  'null',
  '[]',
  '"text"',
  '123',
  'true',
  '\ufeff{}',
  '{"a":1}{"b":2}',
  '{"a":1,}',
  "{'a':1}",
  '{a:1}',
  'NaN',
  '{"a":NaN}',
  '{"a":Infinity}',
  '{"a":undefined}',
  '{"a":0x10}',
  '{"a":"\\ud800"}',
  '{"a":"\\u0000"}',
  '{"a":"\u0000"}',
  '{"a"\u0000:1}',
  '<xml/>',
  'a=1&b=2',
  '--boundary\r\nContent-Disposition: form-data; name="a"\r\n\r\n1\r\n--boundary--',
];

// ---- URL pieces ----------------------------------------------------------------------------------

const UNRESERVED = /[A-Za-z0-9\-._~]/;

/** Percent-encodes every byte of the UTF-8 form except unreserved ones (a lone surrogate becomes U+FFFD). */
export function pct(value: string): string {
  let out = '';
  for (const byte of Buffer.from(value, 'utf8')) {
    const ch = String.fromCharCode(byte);
    out += UNRESERVED.test(ch) ? ch : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/** Path segments sent as they are (not encoded): broken escapes, dot segments, delimiters. */
const RAW_SEGMENTS: readonly string[] = [
  '%',
  '%ZZ',
  '%E0%A4%A',
  '%00',
  '%2F',
  '%2e%2e',
  '..',
  '.',
  ';',
  ';a=1',
  '%FF%FE',
  '%C0%AE%C0%AE',
  'a%2Fb',
  '%u0041',
];

const ID_LIKE: readonly string[] = [
  '0',
  '-1',
  '1.0',
  '1e0',
  '0x1',
  '9007199254740991',
  '9007199254740993',
  '99999999999999999999',
  '00000000-0000-0000-0000-000000000000',
  'ffffffff-ffff-ffff-ffff-ffffffffffff',
  '{00000000-0000-4000-8000-000000000000}',
  '00000000000040008000000000000000',
  '00000000-0000-4000-8000-000000000000x',
];

/** A hostile path segment, ready to put in a URL. */
export const hostileSegment: fc.Arbitrary<string> = fc.oneof(
  { weight: 3, arbitrary: hostileString.map(pct) },
  { weight: 2, arbitrary: fc.constantFrom(...ID_LIKE).map(pct) },
  { weight: 2, arbitrary: fc.constantFrom(...RAW_SEGMENTS) },
  { weight: 1, arbitrary: fc.constant('x'.repeat(2000)) },
);

/** Query parameter names that are not the route's own. */
export const hostileQueryKey: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    '__proto__',
    'constructor',
    'prototype',
    '$where',
    'limit[$gt]',
    'store_id[]',
    'store_id[$ne]',
    'filter',
    '_id',
    '',
    ' ',
  ),
  hostileString,
);

/** A hostile query value, encoded (mostly) or raw. */
export const hostileQueryValue: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: hostileString.map(pct) },
  { weight: 1, arbitrary: fc.constantFrom('%', '%ZZ', '%00', 'a&b=c', '=', '+', '%2B', 'a+b') },
  { weight: 1, arbitrary: fc.constant('y'.repeat(2000)) },
);

// ---- headers -------------------------------------------------------------------------------------

/** What fetch can carry in a header value: no CR, LF or NUL, Latin-1 only, no surrounding space. */
const headerSafe = (s: string) =>
  /^[\x21-\x7e\x80-\xff](?:[\t\x20-\x7e\x80-\xff]*[\x21-\x7e\x80-\xff])?$/.test(s);

export const hostileHeaderValue: fc.Arbitrary<string> = fc.oneof(
  { weight: 3, arbitrary: hostileString.filter(headerSafe) },
  {
    weight: 1,
    arbitrary: fc.string({ unit: 'binary-ascii', minLength: 1, maxLength: 30 }).filter(headerSafe),
  },
  { weight: 1, arbitrary: fc.constant('z'.repeat(2000)) },
);

export const hostileContentType: fc.Arbitrary<string> = fc.constantFrom(
  'text/plain',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=boundary',
  'application/json; charset=utf-16',
  'application/json; charset=latin1',
  'application/json; charset=nonsense',
  'application/vnd.api+json',
  'application/merge-patch+json',
  'application/problem+json',
  'application/json, text/plain',
  '*/*',
  'application/xml',
  'json',
);

/** Authorization headers that authenticate nobody. */
export const hostileAuthorization: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    'Bearer',
    'Bearer ',
    'Bearer null',
    'Bearer undefined',
    'Basic YWRtaW46YWRtaW4=',
    `Bearer pds_key_${'A'.repeat(43)}`,
    `Bearer pds_key_${'A'.repeat(42)}`,
    'Bearer {"$gt":""}',
    "Bearer ' OR '1'='1",
    'Bearer ../../etc/passwd',
    `Bearer ${'t'.repeat(5000)}`,
  ),
  hostileHeaderValue.map((v) => `Bearer ${v}`),
  hostileHeaderValue,
);

// ---- bodies --------------------------------------------------------------------------------------

/** A path into a JSON template: keys and array indexes. */
type JsonPath = (string | number)[];

function pathsOf(value: unknown, prefix: JsonPath = []): JsonPath[] {
  const out: JsonPath[] = [];
  if (Array.isArray(value)) {
    value.forEach((v, i) => {
      out.push([...prefix, i], ...pathsOf(v, [...prefix, i]));
    });
  } else if (value !== null && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) out.push([...prefix, k], ...pathsOf(v, [...prefix, k]));
  }
  return out;
}

/** A copy of `template` with the value at `path` replaced (or removed when `remove`). */
function edit(template: unknown, path: JsonPath, replacement: unknown, remove = false): unknown {
  const copy = structuredClone(template) as Json;
  let node: Json = copy;
  for (const step of path.slice(0, -1)) node = node[step as string];
  const last = path[path.length - 1];
  if (remove) {
    if (Array.isArray(node)) node.splice(last as number, 1);
    else delete node[last as string];
  } else {
    // defineProperty: an own `__proto__` key rather than a prototype change.
    Object.defineProperty(node, last, {
      value: replacement,
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return copy;
}

const RAW_MARK = '\u0001raw\u0001';

/** A body: a mutation of a valid template, or something else entirely. Returned as the text to send. */
export function hostileBody(template: Json): fc.Arbitrary<{ text: string; how: string }> {
  const paths = pathsOf(template);
  // An empty template (`{}`) has no value to change: only the whole-body mutations apply.
  const some = paths.length > 0 ? 1 : 0;
  const anyPath = fc.constantFrom<JsonPath>(...paths, ['']);
  const json = (value: unknown, how: string) => ({ text: JSON.stringify(value) ?? 'null', how });
  return fc.oneof(
    {
      weight: 5 * some,
      arbitrary: fc
        .tuple(anyPath, hostileJsonValue)
        .map(([p, v]) => json(edit(template, p, v), `set ${p.join('.')}`)),
    },
    {
      weight: 2 * some,
      arbitrary: fc.tuple(anyPath, rawJsonValue).map(([p, raw]) => ({
        text: JSON.stringify(edit(template, p, RAW_MARK)).replace(JSON.stringify(RAW_MARK), raw),
        how: `raw ${p.join('.')} = ${raw.slice(0, 20)}`,
      })),
    },
    {
      weight: some,
      arbitrary: anyPath.map((p) => json(edit(template, p, undefined, true), `remove ${p.join('.')}`)),
    },
    {
      weight: 2,
      arbitrary: fc
        .tuple(fc.oneof(hostileQueryKey, fc.constantFrom('__proto__', 'constructor')), hostileJsonValue)
        .map(([k, v]) => json(edit(template, [k], v), `add ${JSON.stringify(k)}`)),
    },
    { weight: 1, arbitrary: hostileJsonValue.map((v) => json(v, 'replace body')) },
    { weight: 1, arbitrary: fc.constantFrom(...RAW_BODIES).map((text) => ({ text, how: 'raw body' })) },
    {
      weight: some,
      arbitrary: fc.constantFrom(...Object.keys(template), '').map((k) => ({
        text: `{${JSON.stringify(k)}:${JSON.stringify(template[k])},${JSON.stringify(k)}:{"$gt":""}}`,
        how: `duplicate key ${k}`,
      })),
    },
  );
}
