/**
 * A receiver's echo of a subscription's secrets is struck in every form it may take (issue 37, the
 * security review: a receiver that echoed the auth token JSON-escaped, percent-encoded or
 * base64-encoded got it stored and shown in the delivery log; only the exact string was struck).
 */
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import test from 'ava';
import { createSecretBox, generateSigningSecret, secretContext } from '../../application/credentials.ts';
import { manualClock } from '../../domain/clock.ts';
import { EXCERPT_BYTES } from '../../webhooks/deliver.ts';
import { createRedactor, redactSecret } from '../../webhooks/redact.ts';
import { createWebhookSender } from '../../webhooks/send.ts';

/** Printable ASCII, as an auth token may be: a quote, a backslash, a slash, a plus, a space, an `=`. */
const TOKEN = 'p@ss/word+"quoted" \\back slash=0123456789';
const SECRET = generateSigningSecret();

const b64 = (s: string) => Buffer.from(s).toString('base64');
const b64url = (s: string) => Buffer.from(s).toString('base64url');
const hex = (s: string) => Buffer.from(s).toString('hex');
/** Every character as `\uXXXX`, as some JSON encoders write non-alphanumerics. */
const unicodeEscaped = (s: string) =>
  [...s].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).join('');
/** Every byte as `%xx`. */
const percentEveryByte = (s: string, upper: boolean) =>
  [...Buffer.from(s)]
    .map((b) => `%${b.toString(16).padStart(2, '0')}`[upper ? 'toUpperCase' : 'toLowerCase']())
    .join('');

const HTML: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&apos;' };
const htmlEscaped = (s: string) => s.replace(/[&<>"']/g, (c) => HTML[c]);
const htmlDecoded = (s: string) =>
  s
    .replace(/&#[xX]([0-9a-fA-F]+);/g, (_, h: string) => String.fromCodePoint(Number.parseInt(h, 16)))
    .replace(/&#(\d+);/g, (_, d: string) => String.fromCodePoint(Number(d)))
    .replace(/&(amp|lt|gt|quot|apos);/g, (m) => Object.keys(HTML).find((c) => HTML[c] === m) ?? m);

/** Each way a receiver might echo `value` back, by name. */
function echoes(value: string): Record<string, string> {
  return {
    exact: value,
    'JSON-escaped': JSON.stringify(value).slice(1, -1),
    'JSON-escaped with \\/': JSON.stringify(value).slice(1, -1).replaceAll('/', '\\/'),
    'JSON \\u escapes': unicodeEscaped(value),
    'percent-encoded': encodeURIComponent(value),
    'percent-encoded, lower case': encodeURIComponent(value).replace(/%[0-9A-F]{2}/g, (m) => m.toLowerCase()),
    'percent-encoded, every byte': percentEveryByte(value, true),
    'form-encoded': new URLSearchParams({ v: value }).toString().slice(2),
    'percent-encoded twice': encodeURIComponent(encodeURIComponent(value)),
    'JSON-escaped twice': JSON.stringify(JSON.stringify(value).slice(1, -1)).slice(1, -1),
    'HTML-escaped': htmlEscaped(value),
    'HTML numeric references': [...value].map((c) => `&#${c.charCodeAt(0)};`).join(''),
    'HTML hex references': [...value].map((c) => `&#x${c.charCodeAt(0).toString(16)};`).join(''),
    base64: b64(value),
    'base64 of "Bearer <token>"': b64(`Bearer ${value}`),
    'base64 of "x:<token>" (Basic)': b64(`x:${value}`),
    'base64 of "ab<token>cd"': b64(`ab${value}cd`),
    base64url: b64url(value),
    'base64url of "Bearer <token>"': b64url(`Bearer ${value}`),
    hex: hex(value),
    'hex, upper case': hex(value).toUpperCase(),
  };
}

/** Whether `text` still shows `secret`, read in any of the ways a person could decode it. */
function reveals(text: string, secret: string): boolean {
  const decoded = [
    text,
    text.replace(/\\u([0-9a-fA-F]{4})/g, (_, h: string) => String.fromCharCode(Number.parseInt(h, 16))),
    safe(() => decodeURIComponent(text.replaceAll('+', ' '))),
    safe(() => JSON.parse(`"${text}"`) as string),
    safe(() => decodeURIComponent(decodeURIComponent(text))),
    safe(() => JSON.parse(`"${JSON.parse(`"${text}"`) as string}"`) as string),
    htmlDecoded(text),
    Buffer.from(text, 'hex').toString('latin1'),
  ];
  for (let start = 0; start < 4; start++) {
    decoded.push(Buffer.from(text.slice(start), 'base64').toString('latin1'));
    decoded.push(Buffer.from(text.slice(start), 'base64url').toString('latin1'));
  }
  // A secret's middle third is enough to tell it was shown.
  const middle = secret.slice(Math.floor(secret.length / 3), Math.floor((2 * secret.length) / 3));
  return decoded.some((d) => d.includes(middle));
}

function safe(fn: () => string): string {
  try {
    return fn();
  } catch {
    return '';
  }
}

test('every echo of a secret is struck: exact, JSON-escaped, percent-encoded, base64, base64url, hex', (t) => {
  const redact = createRedactor([TOKEN, SECRET]);
  for (const secret of [TOKEN, SECRET]) {
    for (const [how, echo] of Object.entries(echoes(secret))) {
      t.true(reveals(echo, secret), `${how}: the echo shows the secret (a sound check)`);
      const text = `401 Unauthorized: you sent ${echo}, which we do not know.`;
      const out = redact(text);
      t.false(reveals(out, secret), `${how} of ${secret.slice(0, 8)}…: ${out}`);
      t.true(out.startsWith('401 Unauthorized: you sent '), `${how}: the text around it is kept`);
      t.true(out.endsWith(', which we do not know.'), `${how}: ${out}`);
      t.true(out.includes('[redacted]'), how);
    }
  }
});

test('an excerpt cut inside an encoded echo loses the tail too', (t) => {
  const redact = createRedactor([TOKEN]);
  for (const [how, echo] of Object.entries(echoes(TOKEN))) {
    if (how.includes('"')) continue; // a longer encoded text: its start is not the token's
    const cut = `echo: ${echo.slice(0, Math.ceil((echo.length * 2) / 3))}`;
    const out = redact(cut);
    t.true(out.startsWith('echo: '), how);
    t.true(out.endsWith('[redacted]'), `${how}: ${out}`);
  }
});

test('ordinary text is left alone', (t) => {
  const redact = createRedactor([TOKEN, SECRET]);
  const text = '{"ok":true,"id":"evt_1","note":"p@ss word, whsec, base64 and hex are just words"}';
  t.is(redact(text), text);
  t.is(redactSecret('short whsec', SECRET), 'short whsec', 'fewer than 8 characters: ordinary text');
  t.is(redactSecret('anything', ''), 'anything');
  t.is(redactSecret(`x ${SECRET} y ${SECRET}`, SECRET), 'x [redacted] y [redacted]');
  t.is(redactSecret(`401 Bearer ${SECRET.slice(0, 12)}`, SECRET), '401 Bearer [redacted]');
});

test('a receiver echoing the auth token in each encoding: the sender keeps none of it', async (t) => {
  // The n-th request is answered with the n-th echo of the bearer token it carried.
  let answered = 0;
  const server = createServer((req, res) => {
    const token = String(req.headers.authorization).slice('Bearer '.length);
    const echo = Object.values(echoes(token))[answered++];
    res.writeHead(401, { 'content-type': 'text/plain' }).end(`unknown token: ${echo} (go away)`);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    server.closeAllConnections();
    server.close();
  });
  const key = randomBytes(32);
  const box = createSecretBox(key);
  const clock = manualClock('2026-03-01T12:00:00.000Z');
  const sender = createWebhookSender({ secretKey: key, timeoutMs: 2_000, allowPrivate: true, clock });
  const channel = sender.open({
    webhook_id: 'wh_echo',
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`,
    auth_token_encrypted: box.encrypt(TOKEN, secretContext('wh_echo', 'auth_token')),
    signing_secret_encrypted: box.encrypt(SECRET, secretContext('wh_echo', 'signing_secret')),
  });
  for (const how of Object.keys(echoes(TOKEN))) {
    const result = await channel.send({ webhookId: 'evt_1', attempt: 1, body: '{"webhook_event":"test"}' });
    t.is(result.status, 401);
    t.true(result.responseExcerpt.length < EXCERPT_BYTES, 'the whole answer is in the excerpt');
    // What is left of an encoded echo is its text around the token (`QmVhcmVyIH`, "Bearer "): not the token.
    t.regex(
      result.responseExcerpt,
      /^unknown token: [\w+/=-]{0,12}\[redacted\][\w+/=-]{0,3} \(go away\)$/,
      how,
    );
    t.false(reveals(result.responseExcerpt, TOKEN), how);
  }
});
