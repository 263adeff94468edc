/**
 * The admin and platform APIs answer with the security headers the partner APIs send: their answers
 * carry one-time secrets (an API key, a webhook's signing secret) and customers' personal data, so
 * none of them may be cached (`Cache-Control: no-store`), sniffed, framed or sent on as a referrer.
 * Every route family is asked for a success and a refusal: the 201s that show a secret, the idempotent
 * replay of one, the 401 without a token, a 404 and a 422.
 */
import { randomUUID } from 'node:crypto';
import test, { type ExecutionContext } from 'ava';
import { checkedOut, createWebhook, seedCatalog } from '../support/cart-world.ts';
import { startService, type TestService } from '../support/service.ts';
import { startReceiver } from '../support/webhook-receiver.ts';

const A = '/admin/v1';
const P = '/platform/v1';

/** What the partner APIs send on every answer (docs/partner-api.md), literally. */
const EXPECTED = {
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
  'content-security-policy': "default-src 'none'; frame-ancestors 'none'",
  'strict-transport-security': 'max-age=31536000',
};

interface Asked {
  what: string;
  method: string;
  url: string;
  body?: unknown;
  headers?: Record<string, string>;
  status: number;
}

/** Sends each request and asserts its status and every security header. */
async function check(t: ExecutionContext, s: TestService, asked: readonly Asked[]): Promise<string[]> {
  const missing: string[] = [];
  for (const a of asked) {
    const res = await s.call(a.method, a.url, a.body, a.headers);
    const text = await res.text();
    t.is(res.status, a.status, `${a.what}: ${text.slice(0, 300)}`);
    for (const [name, value] of Object.entries(EXPECTED)) {
      const got = res.headers.get(name);
      if (got !== value) missing.push(`${a.what} (${a.method} ${a.url} → ${res.status}): ${name} is ${got}`);
    }
  }
  return missing;
}

test('every admin, projections and platform answer carries the security headers, secrets and problems included', async (t) => {
  const s = await startService(t);
  const receiver = await startReceiver(t);
  await seedCatalog(s, [1]);
  const cart = await checkedOut(s, 1);
  const hook = await createWebhook(s, receiver.url, [1]);
  const partner = (await (
    await s.call('POST', `${A}/partners`, { name: 'Acme', kind: 'brand', brand_ids: [1] })
  ).json()) as { partner: { partner_id: string; keys: Array<{ key_id: string }> } };
  const partnerId = partner.partner.partner_id;
  const keyId = partner.partner.keys[0].key_id;
  const noToken = { authorization: '' };
  const key = { 'idempotency-key': randomUUID() };

  const missing = await check(t, s, [
    // Partners and keys: the answers that show an API key once.
    {
      what: 'register a partner (api_key)',
      method: 'POST',
      url: `${A}/partners`,
      body: { name: 'Beta', kind: 'brand', brand_ids: [1] },
      headers: key,
      status: 201,
    },
    {
      what: 'the same registration replayed',
      method: 'POST',
      url: `${A}/partners`,
      body: { name: 'Beta', kind: 'brand', brand_ids: [1] },
      headers: key,
      status: 201,
    },
    {
      what: 'issue a key (api_key)',
      method: 'POST',
      url: `${A}/partners/${partnerId}/keys`,
      body: {},
      status: 201,
    },
    {
      what: 'rotate a key (api_key)',
      method: 'POST',
      url: `${A}/partners/${partnerId}/keys/${keyId}/rotate`,
      body: {},
      status: 201,
    },
    { what: 'list partners', method: 'GET', url: `${A}/partners`, status: 200 },
    { what: 'show a partner', method: 'GET', url: `${A}/partners/${partnerId}`, status: 200 },
    { what: 'no token', method: 'GET', url: `${A}/partners`, headers: noToken, status: 401 },
    { what: 'unknown partner', method: 'GET', url: `${A}/partners/${randomUUID()}`, status: 404 },
    { what: 'invalid partner', method: 'POST', url: `${A}/partners`, body: { name: '' }, status: 422 },
    // Webhook subscriptions: the answers that show a signing secret once.
    {
      what: 'subscribe (signing_secret)',
      method: 'POST',
      url: `${A}/webhooks`,
      body: { url: receiver.url, auth_token: 'receiver-token-2', store_ids: [1] },
      status: 201,
    },
    {
      what: 'rotate the signing secret',
      method: 'POST',
      url: `${A}/webhooks/${hook.id}/rotate-secret`,
      body: {},
      status: 200,
    },
    { what: 'list subscriptions', method: 'GET', url: `${A}/webhooks`, status: 200 },
    { what: 'show a subscription', method: 'GET', url: `${A}/webhooks/${hook.id}`, status: 200 },
    { what: 'unknown subscription', method: 'GET', url: `${A}/webhooks/${randomUUID()}`, status: 404 },
    {
      what: 'invalid subscription',
      method: 'POST',
      url: `${A}/webhooks`,
      body: { url: 'ftp://x', auth_token: 't', store_ids: [1] },
      status: 422,
    },
    // Deliveries, health, fan-out.
    { what: 'deliveries', method: 'GET', url: `${A}/webhooks/${hook.id}/deliveries`, status: 200 },
    { what: 'health', method: 'GET', url: `${A}/webhooks/${hook.id}/health`, status: 200 },
    { what: 'unknown delivery', method: 'GET', url: `${A}/webhooks/deliveries/${randomUUID()}`, status: 404 },
    { what: 'fan-out', method: 'GET', url: `${A}/webhook-fan-out`, status: 200 },
    // A cart's history: a customer's personal data.
    { what: 'cart history', method: 'GET', url: `${A}/carts/${cart.uuid}/history`, status: 200 },
    { what: 'cart webhooks', method: 'GET', url: `${A}/carts/${cart.uuid}/webhooks`, status: 200 },
    {
      what: 'no token (history)',
      method: 'GET',
      url: `${A}/carts/${cart.uuid}/history`,
      headers: noToken,
      status: 401,
    },
    // Projections, a router of its own.
    { what: 'projections', method: 'GET', url: `${A}/projections`, status: 200 },
    { what: 'unknown projection', method: 'POST', url: `${A}/projections/nope/rebuild`, status: 404 },
    { what: 'no token (projections)', method: 'GET', url: `${A}/projections`, headers: noToken, status: 401 },
    // The platform write API.
    { what: 'platform write', method: 'PUT', url: `${P}/brands/2`, body: { name: 'Brand Two' }, status: 201 },
    { what: 'platform refusal', method: 'PUT', url: `${P}/brands/2`, body: { name: '' }, status: 422 },
    {
      what: 'no token (platform)',
      method: 'PUT',
      url: `${P}/brands/2`,
      body: { name: 'X' },
      headers: noToken,
      status: 401,
    },
    {
      what: 'unknown cart',
      method: 'POST',
      url: `${P}/carts/${randomUUID()}/checkout`,
      body: { reservation_mode: 'pickup' },
      status: 404,
    },
  ]);
  t.deepEqual(missing, []);
});

test('a partner API refusal carries the security headers as its answers do', async (t) => {
  const s = await startService(t);
  const res = await fetch(`${s.base}/partner/brand/v1/stores`);
  await res.text();
  t.is(res.status, 401);
  for (const [name, value] of Object.entries(EXPECTED)) t.is(res.headers.get(name), value, name);
});
