import test from 'ava';
import { generateSigningSecret } from '../../application/credentials.ts';
import { signingKey, signPayload, unixSeconds, webhookHeaders } from '../../webhooks/signing.ts';
import { REPLAY_WINDOW_SECONDS, verifyWebhook } from './verify-signature.ts';

const SECRET = 'whsec_dGVzdC1zZWNyZXQtZm9yLXZlY3RvcnMtMDEyMzQ1Njc4OWFi';
const BODY = '{"webhook_event":"cart_status_updated","cart":{"id":"c1","note":"Café 🌿"}}';
const TS = 1767225600; // 2026-01-01T00:00:00Z

/** Lower-cases header names, as a receiver's node:http would show them. */
const received = (headers: Record<string, string>) =>
  Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));

test('signPayload matches a vector computed outside Node (openssl dgst -sha256 -hmac)', (t) => {
  // printf '%s' "1767225600:$BODY" | openssl dgst -sha256 -hmac "$SECRET"  (UTF-8 shell)
  const expected = '5692c5fa71456de2392fa680451869c52893120f2881a177d8cd940357656090';
  t.is(signPayload(SECRET, TS, BODY), expected);
  t.is(signPayload(SECRET, TS, Buffer.from(BODY, 'utf8')), expected);
  t.is(signPayload(signingKey(SECRET), TS, BODY), expected, 'the key made once signs the same');
});

test('the independent verifier accepts what signPayload signs, over the exact UTF-8 bytes', (t) => {
  const secret = generateSigningSecret();
  const bodies = [
    BODY,
    '{}',
    '{"emoji":"👩🏽‍🌾🍃","cjk":"大麻","combining":"e\u0301","rtl":"שלום","nul":"\\u0000"}',
    JSON.stringify({ webhook_event: 'cart_abandoned', note: '\u2028line\u2029sep', n: 1.5e-7 }),
  ];
  for (const body of bodies) {
    const raw = Buffer.from(body, 'utf8');
    const headers = received({
      'X-Service-Request-Timestamp': String(TS),
      'X-Service-Signature': signPayload(secret, TS, raw),
    });
    t.deepEqual(verifyWebhook(headers, raw, secret, TS), { valid: true }, body);
  }
});

test('any change to the bytes, the timestamp or the secret invalidates the signature', (t) => {
  const raw = Buffer.from(BODY, 'utf8');
  const signature = signPayload(SECRET, TS, raw);
  const check = (body: Buffer, ts: number, secret = SECRET) =>
    verifyWebhook(
      { 'x-service-request-timestamp': String(ts), 'x-service-signature': signature },
      body,
      secret,
      ts,
    );
  t.true(check(raw, TS).valid);
  // A parser re-serialising the body (docs/webhooks.md item 5), another encoding, one flipped bit.
  t.false(check(Buffer.from(JSON.stringify(JSON.parse(BODY), null, 1)), TS).valid);
  t.false(check(Buffer.from(BODY, 'latin1'), TS).valid);
  t.false(check(Buffer.from(BODY.normalize('NFD'), 'utf8'), TS).valid);
  const flipped = Buffer.from(raw);
  flipped[10] ^= 1;
  t.false(check(flipped, TS).valid);
  t.false(check(raw, TS + 1).valid);
  t.false(check(raw, TS, `${SECRET}x`).valid);
});

test('the HMAC key is the whole whsec_ string as UTF-8, not its decoded bytes', (t) => {
  const decodedKey = Buffer.from(SECRET.slice('whsec_'.length), 'base64').toString('latin1');
  const raw = Buffer.from(BODY);
  const headers = {
    'x-service-request-timestamp': String(TS),
    'x-service-signature': signPayload(SECRET, TS, raw),
  };
  t.true(verifyWebhook(headers, raw, SECRET, TS).valid);
  t.false(verifyWebhook(headers, raw, decodedKey, TS).valid);
});

test('the receiver refuses a timestamp outside the 5-minute replay window', (t) => {
  const raw = Buffer.from(BODY);
  const headers = {
    'x-service-request-timestamp': String(TS),
    'x-service-signature': signPayload(SECRET, TS, raw),
  };
  t.true(verifyWebhook(headers, raw, SECRET, TS + REPLAY_WINDOW_SECONDS).valid);
  t.deepEqual(verifyWebhook(headers, raw, SECRET, TS + REPLAY_WINDOW_SECONDS + 1), {
    valid: false,
    reason: 'stale',
  });
  t.deepEqual(verifyWebhook(headers, raw, SECRET, TS - REPLAY_WINDOW_SECONDS - 1), {
    valid: false,
    reason: 'stale',
  });
});

test('webhookHeaders: every header of docs/webhooks.md, verifiable by the receiver', (t) => {
  const now = new Date('2026-01-01T00:00:00.999Z');
  const headers = webhookHeaders({
    authToken: 'partner-auth-token-123',
    secret: SECRET,
    webhookId: 'wh_6f1c',
    attempt: 1,
    body: BODY,
    now,
  });
  t.deepEqual(Object.keys(headers).sort(), [
    'Authorization',
    'Content-Type',
    'X-Service-Delivery-Attempt',
    'X-Service-Request-Timestamp',
    'X-Service-Signature',
    'X-Service-Webhook-Id',
  ]);
  t.is(headers['Content-Type'], 'application/json');
  t.is(headers.Authorization, 'Bearer partner-auth-token-123');
  t.is(headers['X-Service-Request-Timestamp'], String(TS)); // whole seconds, rounded down
  t.regex(headers['X-Service-Signature'], /^[0-9a-f]{64}$/);
  t.is(headers['X-Service-Webhook-Id'], 'wh_6f1c');
  t.is(headers['X-Service-Delivery-Attempt'], '1');
  t.deepEqual(verifyWebhook(received(headers), Buffer.from(BODY, 'utf8'), SECRET, unixSeconds(now)), {
    valid: true,
  });
});

test('webhookHeaders: each attempt is signed afresh with its own timestamp; the webhook id stays', (t) => {
  const input = { authToken: 'tok', secret: SECRET, webhookId: 'wh_1', body: BODY };
  const first = webhookHeaders({ ...input, attempt: 1, now: new Date(TS * 1000) });
  const retry = webhookHeaders({ ...input, attempt: 4, now: new Date((TS + 3 * 3600) * 1000) });
  t.is(retry['X-Service-Webhook-Id'], first['X-Service-Webhook-Id']);
  t.is(retry['X-Service-Delivery-Attempt'], '4');
  t.is(retry['X-Service-Request-Timestamp'], String(TS + 3 * 3600));
  t.not(retry['X-Service-Signature'], first['X-Service-Signature']);
  // The retry verifies when it arrives, although the first attempt would now be a replay.
  const raw = Buffer.from(BODY);
  t.true(verifyWebhook(received(retry), raw, SECRET, TS + 3 * 3600).valid);
  t.false(verifyWebhook(received(first), raw, SECRET, TS + 3 * 3600).valid);
});

test('bad inputs are refused rather than signed', (t) => {
  t.throws(() => signPayload(SECRET, 1.5, BODY), { instanceOf: RangeError });
  t.throws(() => signPayload(SECRET, -1, BODY), { instanceOf: RangeError });
  t.throws(() => signPayload('', TS, BODY), { instanceOf: TypeError });
  t.throws(() => signingKey(''), { instanceOf: TypeError });
  const input = { authToken: 't', secret: SECRET, webhookId: 'w', body: BODY, now: new Date() };
  t.throws(() => webhookHeaders({ ...input, attempt: 0 }), { instanceOf: RangeError });
  t.throws(() => webhookHeaders({ ...input, attempt: 1.5 }), { instanceOf: RangeError });
});
