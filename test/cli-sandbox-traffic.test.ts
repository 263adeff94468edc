/**
 * `pds sandbox traffic`'s summary accounts for every request it sent: ok, refused as a storefront
 * expects (a checkout in a mode the store does not offer, learnt from), or failed, and nothing else;
 * the lines a person reads say so with nouns in the right number.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import test from 'ava';
import { type AdminClient, CliError, EXIT } from '../cli/client.ts';
import { describeTraffic } from '../cli/sandbox/traffic.ts';
import { emptySummary, TrafficCarts } from '../cli/sandbox/traffic-carts.ts';

/** The store menu feed the traffic reads each store's menu from: two products in stock, by the unit. */
async function menuFeed(t: { teardown(fn: () => void): void }): Promise<string> {
  const server = createServer((_req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end(
      JSON.stringify({
        menu_products: [1, 2, 3, 4, 5].map((id) => ({ id, in_stock: true, available_weights: ['each'] })),
      }),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => server.close());
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/**
 * The platform API as the traffic meets it: store 1 offers pickup only (a checkout in another mode is
 * refused with the modes it offers), every fifth status move is refused as a conflict, every seventh
 * item addition is refused as out of stock; the rest succeeds.
 */
function platform(baseUrl: string): AdminClient & { sent: number } {
  let carts = 0;
  let moves = 0;
  let items = 0;
  const refuse = (status: number, code: string, extra: object = {}) => {
    throw new CliError(`${status} ${code}`, EXIT.refused, { status, code, ...extra });
  };
  const client = {
    baseUrl,
    sent: 0,
    async request<T>(method: string, url: string, body?: unknown): Promise<T> {
      client.sent += 1;
      if (method === 'POST' && url === '/platform/v1/carts')
        return { cart: { uuid: `cart-${++carts}` } } as T;
      if (url.endsWith('/items') && ++items % 7 === 0) refuse(409, 'out_of_stock');
      if (url.endsWith('/checkout') && (body as { reservation_mode: string }).reservation_mode !== 'pickup')
        refuse(422, 'reservation_mode_unavailable', { available: ['pickup'] });
      if (url.endsWith('/status') && ++moves % 5 === 0) refuse(409, 'conflict');
      return {} as T;
    },
  };
  return client;
}

test('every request the traffic sent is ok, refused as expected or failed: requests = ok + refused + failed', async (t) => {
  const client = platform(await menuFeed(t));
  const summary = emptySummary(100);
  const carts = new TrafficCarts({ client, stores: [1], operator: undefined, menuKey: 'k', summary });
  for (let i = 0; i < 2_000; i++) await carts.nextAction()?.run();

  t.is(summary.requests, client.sent, 'each request the client sent is counted');
  t.is(summary.requests, summary.ok + summary.refused + summary.failed);
  t.true(summary.refused > 0, 'checkouts in a mode store 1 does not offer');
  t.true(summary.failed > 0, 'conflicts and items out of stock');
  t.is(
    Object.values(summary.failures).reduce((a, b) => a + b, 0),
    summary.failed,
    'each failure under its status and code',
  );
  t.deepEqual(Object.keys(summary.failures).sort(), ['409 conflict', '409 out_of_stock']);
  t.true(summary.carts.checked_out > 0, 'a refused mode is learnt: the cart is checked out in pickup');

  const text = describeTraffic({ ...summary, seconds: 20, rate_per_second: 100 });
  t.true(
    text.startsWith(
      `traffic for 20 s at 100/s: ${summary.requests} requests (100/s): ${summary.ok} ok, ${summary.refused} refused as expected (a checkout mode the store does not offer), ${summary.failed} failed\n`,
    ),
    text,
  );
  t.regex(text, new RegExp(`^  ${summary.failures['409 conflict']} × 409 conflict$`, 'm'));
});

test('the summary says 1 request and 1 review, not 1 requests', (t) => {
  const summary = emptySummary(1);
  Object.assign(summary, { seconds: 1, requests: 1, rate_per_second: 1, ok: 1 });
  summary.carts.reviewed = 1;
  const text = describeTraffic(summary);
  t.regex(text, /: 1 request \(1\/s\): 1 ok, 0 refused as expected/);
  t.regex(text, /\(1 review\)/);
  summary.carts.reviewed = 2;
  t.regex(describeTraffic(summary), /\(2 reviews\)/);
});
