import { randomBytes } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import test from 'ava';
import { createSecretBox, generateSigningSecret, secretContext } from '../../application/credentials.ts';
import { manualClock } from '../../domain/clock.ts';
import {
  deliverOnce,
  EXCERPT_BYTES,
  isLastAttempt,
  loadHttpClient,
  nextAttemptDelay,
  parseRetryAfter,
  USER_AGENT,
  utf8Excerpt,
} from '../../webhooks/deliver.ts';
import { createWebhookSender } from '../../webhooks/send.ts';
import { unixSeconds, webhookHeaders } from '../../webhooks/signing.ts';
import { verifyWebhook } from './verify-signature.ts';

interface Received {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

type Handler = (req: IncomingMessage, res: ServerResponse, body: Buffer) => void;

/** A real HTTP receiver on 127.0.0.1 that records every request, raw body included. */
async function receiver(handler: Handler) {
  const received: Received[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      received.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
      handler(req, res, body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    received,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * How many ms after now a timer of `ms` set now actually fires: what "about `ms`" means for this
 * event loop, which a loaded machine runs late. An attempt's timeout is checked against it, set just
 * before the attempt (the HTTP client loaded first, so that both wait through the same turns).
 */
async function timerBeside(ms: number): Promise<() => Promise<number>> {
  await loadHttpClient();
  const started = performance.now();
  const fired = new Promise<number>((resolve) =>
    setTimeout(() => resolve(Math.round(performance.now() - started)), ms),
  );
  return () => fired;
}

const clock = manualClock('2026-03-01T12:00:00.000Z');
const SECRET = generateSigningSecret();
const BODY = JSON.stringify({
  webhook_event: 'cart_status_updated',
  cart: { id: 'cart_1', status: 'preparing', note: 'Café 🌿 — ñandú 大麻' },
});

function headersFor(attempt = 1, body = BODY) {
  return webhookHeaders({
    authToken: 'partner-token-0123456789',
    secret: SECRET,
    webhookId: 'wh_evt_42',
    attempt,
    body,
    now: clock.now(),
  });
}

const deliver = (url: string, extra: Partial<Parameters<typeof deliverOnce>[0]> = {}) =>
  deliverOnce({
    url,
    body: BODY,
    headers: headersFor(),
    timeoutMs: 2_000,
    allowPrivate: true,
    clock,
    ...extra,
  });

test('200: delivered, with the exact bytes and every header, and the signature verifies independently', async (t) => {
  const r = await receiver((_req, res) => res.end('{"ok":true}'));
  t.teardown(r.close);
  const result = await deliver(`${r.url}/hooks/pds?tenant=7`);
  t.like(result, {
    outcome: 'delivered',
    status: 200,
    responseExcerpt: '{"ok":true}',
    errorCode: null,
    error: null,
    retryAfterMs: null,
  });
  t.true(result.durationMs >= 0 && result.durationMs < 2_000);
  t.is(r.received.length, 1);
  const [req] = r.received;
  t.is(req.method, 'POST');
  t.is(req.url, '/hooks/pds?tenant=7');
  t.true(req.body.equals(Buffer.from(BODY, 'utf8')), 'the receiver gets the signed bytes unchanged');
  t.is(req.headers['content-length'], String(Buffer.byteLength(BODY)));
  t.is(req.headers['content-type'], 'application/json');
  t.is(req.headers.authorization, 'Bearer partner-token-0123456789');
  t.is(req.headers['x-service-request-timestamp'], String(unixSeconds(clock.now())));
  t.is(req.headers['x-service-webhook-id'], 'wh_evt_42');
  t.is(req.headers['x-service-delivery-attempt'], '1');
  t.is(req.headers['user-agent'], USER_AGENT);
  t.deepEqual(verifyWebhook(req.headers, req.body, SECRET, unixSeconds(clock.now())), { valid: true });
});

test('204: delivered with an empty excerpt', async (t) => {
  const r = await receiver((_req, res) => {
    res.statusCode = 204;
    res.end();
  });
  t.teardown(r.close);
  t.like(await deliver(r.url), { outcome: 'delivered', status: 204, responseExcerpt: '', error: null });
});

test('a host name is connected to through the checked address, with its own Host header', async (t) => {
  const r = await receiver((_req, res) => res.end('ok'));
  t.teardown(r.close);
  const resolve = async () => [{ address: '127.0.0.1', family: 4 }];
  const result = await deliver(`http://receiver.partner.test:${r.port}/hook`, { resolve });
  t.is(result.outcome, 'delivered');
  t.is(r.received[0].headers.host, `receiver.partner.test:${r.port}`);
});

test('410: gone', async (t) => {
  const r = await receiver((_req, res) => {
    res.statusCode = 410;
    res.end('subscription removed');
  });
  t.teardown(r.close);
  t.like(await deliver(r.url), {
    outcome: 'gone',
    status: 410,
    responseExcerpt: 'subscription removed',
    retryAfterMs: null,
  });
});

test('429 with Retry-After: 7 → retry_after 7000 ms', async (t) => {
  const r = await receiver((_req, res) => {
    res.writeHead(429, { 'Retry-After': '7' }).end('slow down');
  });
  t.teardown(r.close);
  t.like(await deliver(r.url), {
    outcome: 'retry_after',
    status: 429,
    retryAfterMs: 7_000,
    errorCode: 'http_status',
  });
});

test('503 with an HTTP-date Retry-After → retry_after until that date (injected clock)', async (t) => {
  const at = new Date(clock.now().getTime() + 120_000).toUTCString();
  const r = await receiver((_req, res) => {
    res.writeHead(503, { 'Retry-After': at }).end();
  });
  t.teardown(r.close);
  t.like(await deliver(r.url), { outcome: 'retry_after', status: 503, retryAfterMs: 120_000 });
});

test('429/503 without a usable Retry-After → failed (the schedule applies)', async (t) => {
  const r = await receiver((req, res) => {
    if (req.url === '/none') res.writeHead(503).end();
    else res.writeHead(429, { 'Retry-After': 'soon' }).end();
  });
  t.teardown(r.close);
  t.like(await deliver(`${r.url}/none`), { outcome: 'failed', status: 503, retryAfterMs: null });
  t.like(await deliver(`${r.url}/garbage`), { outcome: 'failed', status: 429, retryAfterMs: null });
});

test('500: failed, the excerpt cut to 1 KB without splitting a character', async (t) => {
  // 'x' then 2-byte characters: byte 1024 falls in the middle of one.
  const big = 'x' + 'é'.repeat(5_000);
  const r = await receiver((_req, res) => {
    res.writeHead(500, { 'Content-Type': 'text/plain; charset=utf-8' }).end(big);
  });
  t.teardown(r.close);
  const result = await deliver(r.url);
  t.like(result, { outcome: 'failed', status: 500, errorCode: 'http_status', error: 'HTTP 500' });
  t.true(Buffer.byteLength(result.responseExcerpt) <= EXCERPT_BYTES);
  t.is(result.responseExcerpt, 'x' + 'é'.repeat(511));
  t.false(result.responseExcerpt.includes('\uFFFD'));
});

test('an endless response body is not read past the excerpt', async (t) => {
  const r = await receiver((_req, res) => {
    res.writeHead(200);
    const chunk = Buffer.alloc(64 * 1024, 'a');
    const pump = () => {
      while (!res.destroyed && res.write(chunk)) {}
      if (!res.destroyed) res.once('drain', pump);
    };
    pump();
  });
  t.teardown(r.close);
  const result = await deliver(r.url, { timeoutMs: 5_000 });
  t.is(result.outcome, 'delivered');
  t.is(result.responseExcerpt, 'a'.repeat(EXCERPT_BYTES));
  t.true(result.durationMs < 2_000, `took ${result.durationMs} ms`);
});

test('302: failed, not followed; the redirect target receives nothing', async (t) => {
  const target = await receiver((_req, res) => res.end('should not be reached'));
  t.teardown(target.close);
  const r = await receiver((_req, res) => {
    res.writeHead(302, { Location: `${target.url}/steal` }).end();
  });
  t.teardown(r.close);
  const result = await deliver(r.url);
  t.like(result, { outcome: 'failed', status: 302, errorCode: 'redirect' });
  t.regex(result.error ?? '', /redirect not followed \(Location: http:\/\/127\.0\.0\.1:\d+\/steal\)/);
  await new Promise((resolve) => setTimeout(resolve, 100));
  t.is(target.received.length, 0);
});

test('a receiver slower than the timeout: failed (timeout) after about the timeout', async (t) => {
  // It never answers: only the timeout ends the attempt.
  const r = await receiver(() => {});
  t.teardown(r.close);
  const beside = await timerBeside(300);
  const started = performance.now();
  const result = await deliver(r.url, { timeoutMs: 300 });
  const took = performance.now() - started;
  const late = await beside();
  t.like(result, { outcome: 'failed', status: null, errorCode: 'timeout' });
  t.true(took >= 250 && took < late + 1_000, `took ${took} ms; a 300 ms timer beside it ${late} ms`);
  t.true(result.durationMs >= 250 && result.durationMs < late + 1_000, `${result.durationMs} ms`);
  // The receiver shares this event loop: under load it may read the request only once the attempt
  // has given up, so it is waited for.
  for (const until = Date.now() + 5_000; r.received.length === 0 && Date.now() < until; ) {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  t.is(r.received.length, 1, 'the request did arrive; the answer was late');
});

test('a receiver that resets the connection: failed (connection_reset)', async (t) => {
  const r = await receiver((req) => req.socket.resetAndDestroy());
  t.teardown(r.close);
  t.like(await deliver(r.url), { outcome: 'failed', status: null, errorCode: 'connection_reset' });
});

test('a receiver that closes without answering: failed', async (t) => {
  const r = await receiver((req) => req.socket.destroy());
  t.teardown(r.close);
  t.like(await deliver(r.url), { outcome: 'failed', status: null, errorCode: 'connection_reset' });
});

test('a refused port: failed (connection_refused)', async (t) => {
  const r = await receiver(() => {});
  await r.close();
  const result = await deliver(r.url);
  t.like(result, { outcome: 'failed', status: null, errorCode: 'connection_refused' });
  t.regex(result.error ?? '', /ECONNREFUSED/);
});

test('a URL the guard refuses is never connected to', async (t) => {
  const r = await receiver((_req, res) => res.end('reached'));
  t.teardown(r.close);
  const loopback = await deliver(`https://127.0.0.1:${r.port}/`, { allowPrivate: false });
  t.like(loopback, { outcome: 'failed', status: null, errorCode: 'url_refused' });
  t.regex(loopback.error ?? '', /^loopback: /);
  const resolve = async () => [{ address: '127.0.0.1', family: 4 }];
  const named = await deliver(`https://sneaky.partner.test:${r.port}/`, { allowPrivate: false, resolve });
  t.like(named, { outcome: 'failed', errorCode: 'url_refused' });
  const plain = await deliver(`http://hooks.partner.test:${r.port}/`, { allowPrivate: false, resolve });
  t.regex(plain.error ?? '', /^https_required: /);
  t.is(r.received.length, 0);
});

test('a name that resolves later to a link-local or metadata address is refused at that attempt, even with private URLs allowed, and its error names no address', async (t) => {
  const r = await receiver((_req, res) => res.end('ok'));
  t.teardown(r.close);
  // Checked when subscribed (loopback: allowed here), then DNS answers otherwise at a later attempt.
  const answers = [
    ['127.0.0.1'],
    ['169.254.169.254'],
    ['127.0.0.1', 'fe80::1'],
    ['::ffff:100.100.100.200'],
    ['0.0.0.0'],
  ];
  let call = 0;
  const resolve = async () =>
    answers[Math.min(call++, answers.length - 1)].map((address) => ({
      address,
      family: address.includes(':') ? 6 : 4,
    }));
  const url = `http://later.partner.test:${r.port}/hook`;
  t.like(await deliver(url, { resolve }), { outcome: 'delivered' });
  const refused = [];
  for (let i = 1; i < answers.length; i++) refused.push(await deliver(url, { resolve }));
  t.deepEqual(
    refused.map((x) => [x.outcome, x.errorCode, x.error?.split(':')[0]]),
    [
      ['failed', 'url_refused', 'metadata'],
      ['failed', 'url_refused', 'link_local'],
      ['failed', 'url_refused', 'metadata'],
      ['failed', 'url_refused', 'unspecified'],
    ],
  );
  t.is(r.received.length, 1, 'never connected after the first attempt');
  // The error is what the delivery log records: the host and the kind of address, not the address.
  for (const x of refused) {
    t.regex(
      x.error ?? '',
      /^\w+: the host later\.partner\.test resolves to .+; no webhook is ever sent there$/,
    );
    t.false(/169\.254|100\.100|fe80|0\.0\.0\.0|127\.0\.0\.1/.test(x.error ?? ''), x.error ?? '');
  }
});

test('a connection refused at the address a name resolved to: the error names the host, not the address', async (t) => {
  const r = await receiver(() => {});
  await r.close();
  const resolve = async () => [{ address: '127.0.0.1', family: 4 }];
  const result = await deliver(`http://down.partner.test:${r.port}/hook`, { resolve });
  t.like(result, { outcome: 'failed', errorCode: 'connection_refused' });
  t.regex(result.error ?? '', /ECONNREFUSED/);
  t.false((result.error ?? '').includes('127.0.0.1'), result.error ?? '');
});

test('a host that does not resolve in time: failed (timeout) within the timeout', async (t) => {
  const resolve = () => new Promise<never>(() => {});
  const beside = await timerBeside(200);
  const result = await deliver('https://hanging-dns.partner.test/', { resolve, timeoutMs: 200 });
  const late = await beside();
  t.like(result, { outcome: 'failed', errorCode: 'timeout' });
  t.true(
    result.durationMs >= 150 && result.durationMs < late + 1_000,
    `took ${result.durationMs} ms; a 200 ms timer beside it ${late} ms`,
  );
});

test('every attempt is signed afresh: a retry carries its attempt number and a new timestamp', async (t) => {
  const r = await receiver((_req, res) => res.end());
  t.teardown(r.close);
  const local = manualClock('2026-03-01T12:00:00.000Z');
  const attempt = (n: number) =>
    deliverOnce({
      url: r.url,
      body: BODY,
      headers: webhookHeaders({
        authToken: 'tok-0123456789abcdef',
        secret: SECRET,
        webhookId: 'wh_same',
        attempt: n,
        body: BODY,
        now: local.now(),
      }),
      timeoutMs: 2_000,
      allowPrivate: true,
    });
  await attempt(1);
  local.advance(5 * 60_000 + 1_000);
  await attempt(2);
  const [first, second] = r.received;
  t.is(first.headers['x-service-webhook-id'], second.headers['x-service-webhook-id']);
  t.is(second.headers['x-service-delivery-attempt'], '2');
  t.not(first.headers['x-service-signature'], second.headers['x-service-signature']);
  const now = unixSeconds(local.now());
  t.true(verifyWebhook(second.headers, second.body, SECRET, now).valid);
  t.deepEqual(verifyWebhook(first.headers, first.body, SECRET, now), { valid: false, reason: 'stale' });
});

test('parseRetryAfter: seconds, HTTP dates (all three forms), past dates, garbage', (t) => {
  const now = Date.parse('2026-03-01T12:00:00Z');
  t.is(parseRetryAfter('0', now), 0);
  t.is(parseRetryAfter(' 120 ', now), 120_000);
  t.is(parseRetryAfter('Sun, 01 Mar 2026 12:01:00 GMT', now), 60_000);
  t.is(parseRetryAfter('Sunday, 01-Mar-26 12:01:00 GMT', now), 60_000);
  t.is(parseRetryAfter('Sun Mar  1 12:01:00 2026', now), 60_000);
  t.is(parseRetryAfter('Sun, 01 Mar 2026 11:00:00 GMT', now), 0);
  for (const bad of [undefined, '', '-5', '1.5', 'soon', '2026-03-01T12:01:00Z', '99999999999999999999']) {
    t.is(parseRetryAfter(bad, now), null, String(bad));
  }
});

test('utf8Excerpt: never more than the budget, never a split character', (t) => {
  t.is(utf8Excerpt(Buffer.from('short')), 'short');
  t.is(utf8Excerpt(Buffer.from('🌿🌿'), 7), '🌿'); // 8 bytes; the second emoji does not fit
  t.is(utf8Excerpt(Buffer.from('a🌿'), 4), 'a'); // cut inside the emoji
  // Invalid bytes decode as U+FFFD (3 bytes each): still within the budget.
  const junk = utf8Excerpt(Buffer.alloc(2_000, 0xff));
  t.true(Buffer.byteLength(junk) <= EXCERPT_BYTES);
  t.is(junk, '\uFFFD'.repeat(341));
});

const SCHEDULE = [0, 5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000];

test('nextAttemptDelay: the schedule with ±10 % jitter, deterministic with an injected random', (t) => {
  const mid = () => 0.5;
  t.deepEqual(
    SCHEDULE.map((_, i) => nextAttemptDelay(i, SCHEDULE, mid)),
    SCHEDULE,
  );
  t.is(
    nextAttemptDelay(0, SCHEDULE, () => 0.99),
    0,
    'an immediate first attempt stays immediate',
  );
  t.is(
    nextAttemptDelay(1, SCHEDULE, () => 0),
    4_500,
  );
  t.is(
    nextAttemptDelay(1, SCHEDULE, () => 0.75),
    5_250,
  );
  t.is(
    nextAttemptDelay(6, SCHEDULE, () => 0.25),
    34_200_000,
  );
  // The same random sequence gives the same delays.
  const seq = (seed: number) => {
    let s = seed;
    return () => {
      s = (s * 1_103_515_245 + 12_345) % 2 ** 31;
      return s / 2 ** 31;
    };
  };
  const a = SCHEDULE.map((_, i, all) => nextAttemptDelay(i, all, seq(42)));
  const b = SCHEDULE.map((_, i, all) => nextAttemptDelay(i, all, seq(42)));
  t.deepEqual(a, b);
  for (let i = 0; i < SCHEDULE.length; i++) {
    for (const r of [0, 0.1, 0.5, 0.9, 0.999999]) {
      const d = nextAttemptDelay(i, SCHEDULE, () => r);
      t.true(d >= SCHEDULE[i] * 0.9 && d <= SCHEDULE[i] * 1.1, `${i} ${r} ${d}`);
    }
  }
});

test('isLastAttempt and the end of the schedule', (t) => {
  t.false(isLastAttempt(1, SCHEDULE));
  t.false(isLastAttempt(7, SCHEDULE));
  t.true(isLastAttempt(8, SCHEDULE));
  t.true(isLastAttempt(1, [0]));
  t.throws(() => nextAttemptDelay(8, SCHEDULE, Math.random), { instanceOf: RangeError });
  t.throws(() => nextAttemptDelay(-1, SCHEDULE, Math.random), { instanceOf: RangeError });
  // The loop a dispatcher runs: attempts 1..8 at the scheduled delays, then park.
  const delays: number[] = [];
  let attempt = 0;
  while (!isLastAttempt(attempt, SCHEDULE)) {
    delays.push(nextAttemptDelay(attempt, SCHEDULE, () => 0.5));
    attempt++;
  }
  t.is(attempt, 8);
  t.deepEqual(delays, SCHEDULE);
});

test('a sender keeps one channel per subscription, and opens it again on a new URL or rotated secrets', async (t) => {
  const key = randomBytes(32);
  const box = createSecretBox(key);
  const sender = createWebhookSender({ secretKey: key, timeoutMs: 2_000, allowPrivate: true, clock });
  const first = await receiver((_req, res) => res.writeHead(200).end());
  const second = await receiver((_req, res) => res.writeHead(200).end());
  t.teardown(first.close);
  t.teardown(second.close);
  const webhookId = 'wh_1';
  const sealed = (secret: string, id = webhookId) => ({
    auth_token_encrypted: box.encrypt('token-1', secretContext(id, 'auth_token')),
    signing_secret_encrypted: box.encrypt(secret, secretContext(id, 'signing_secret')),
  });
  const target = { webhook_id: webhookId, url: first.url, ...sealed(SECRET) };
  const request = { webhookId: 'evt_1', attempt: 1, body: BODY };
  const verify = (r: Received, secret: string) =>
    verifyWebhook(r.headers, r.body, secret, unixSeconds(clock.now())).valid;

  const channel = sender.open(target);
  t.is(sender.open({ ...target }), channel, 'the same target: the same channel');
  t.like(await channel.send(request), { outcome: 'delivered' });
  t.true(verify(first.received[0], SECRET));

  const rotated = generateSigningSecret();
  const afterRotation = sender.open({ ...target, ...sealed(rotated) });
  t.not(afterRotation, channel);
  await afterRotation.send(request);
  t.true(verify(first.received[1], rotated), 'signed with the rotated secret');
  t.false(verify(first.received[1], SECRET));

  const moved = sender.open({ ...target, ...sealed(rotated), url: second.url });
  t.not(moved, afterRotation);
  await moved.send(request);
  t.is(second.received.length, 1, 'sent to the new URL');

  // Bounded: past 1,024 other subscriptions, the first one's channel is opened again.
  const kept = sender.open({ ...target, ...sealed(rotated), url: second.url });
  for (let i = 0; i < 1_024; i++) {
    sender.open({ webhook_id: `wh_other_${i}`, url: first.url, ...sealed(SECRET, `wh_other_${i}`) });
  }
  t.not(sender.open({ ...target, ...sealed(rotated), url: second.url }), kept);
});
