import { execFile, spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import test from 'ava';
import { EXIT } from '../cli/client.ts';
import { createWebhook, ticking } from './support/cart-world.ts';
import { until } from './support/probes.ts';
import { startService, type TestService } from './support/service.ts';
import { startReceiver } from './support/webhook-receiver.ts';

const exec = promisify(execFile);

async function pds(s: TestService | undefined, args: string[], env: Record<string, string> = {}) {
  try {
    const { stdout, stderr } = await exec(process.execPath, ['cli/pds.ts', ...args], {
      env: {
        PATH: process.env.PATH ?? '',
        ...(s ? { PDS_URL: s.base, PDS_OPERATOR_TOKEN: s.token } : {}),
        ...env,
      },
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

/** A catalog, then (`withCatalog`, e.g. a webhook subscription of its store) a cart through checkout. */
async function cartWithHistory(s: TestService, withCatalog?: () => Promise<unknown>): Promise<string> {
  const json = { 'content-type': 'application/json' };
  await s.call('PUT', '/platform/v1/stores/1', {
    name: 'Green Leaf',
    address: '1 Main St',
    city: 'Denver',
    state: 'CO',
    zip: '80202',
    lat: 39.75,
    long: -104.99,
  });
  await s.call('PUT', '/platform/v1/brands/2', { name: 'Kiva' });
  await s.call('PUT', '/platform/v1/products/3', { name: 'Camino', brand_id: 2, kind: 'edible' });
  await s.call('PUT', '/platform/v1/stores/1/menu_products/4', { product_id: 3, prices: { each: '10.00' } });
  await withCatalog?.();
  const created = await s.call(
    'POST',
    '/platform/v1/carts',
    { store_id: 1, source: { channel: 'headless', partner_id: null } },
    json,
  );
  const { cart } = (await created.json()) as { cart: { uuid: string } };
  await s.call('POST', `/platform/v1/carts/${cart.uuid}/items`, {
    menu_product_id: 4,
    price_id: 'each',
    count: 2,
  });
  await s.call('POST', `/platform/v1/carts/${cart.uuid}/checkout`, { reservation_mode: 'pickup' });
  return cart.uuid;
}

test('pds audit cart prints every event with what it changed, then the webhooks it produced; --json both', async (t) => {
  const s = await startService(t);
  const receiver = await startReceiver(t);
  let hook = { id: '' };
  const uuid = await cartWithHistory(s, async () => {
    hook = await createWebhook(s, receiver.url, [1]);
  });
  // The checkout's status move (revision 3) is delivered to the subscription.
  const webhooksOf = async () =>
    (await (await s.call('GET', `/admin/v1/carts/${uuid}/webhooks`)).json()) as {
      deliveries: Array<{ status: string }>;
    };
  await ticking(s, () =>
    until('delivered', async () => (await webhooksOf()).deliveries[0]?.status === 'delivered'),
  );

  const asTable = await pds(s, ['audit', 'cart', uuid]);
  t.is(asTable.code, 0, asTable.stderr);
  const [events, webhooks] = asTable.stdout.trimEnd().split('\n\n');
  const lines = events.split('\n');
  t.regex(
    lines[0],
    /^rev\s+position\s+occurred_at\s+type\s+actor\s+correlation_id\s+causation_id\s+data\s+changes$/,
  );
  t.deepEqual(
    lines.slice(2).map((l) => l.split(/\s+/)[3]),
    ['CartCreated', 'CartItemAdded', 'CartCheckedOut', 'CartStatusChanged'],
  );
  t.true(lines.slice(2).every((l) => l.includes('platform:bootstrap')));
  t.true(lines[5].endsWith('status: "pending" → "verification"'), lines[5]);
  t.true(lines[3].includes('amount: 0 → 20'), lines[3]);
  const [header, , delivery] = webhooks.split('\n');
  t.regex(header, /^rev\s+event\s+webhook_id\s+delivery_id\s+status\s+attempts\s+delivered_at\s+next$/);
  t.deepEqual(delivery.split(/\s+/).slice(0, 3), ['3', 'cart_status_updated', hook.id]);
  t.true(delivery.includes(' delivered '));

  const asJson = await pds(s, ['audit', 'cart', uuid, '--json']);
  t.is(asJson.code, 0);
  const parsed = JSON.parse(asJson.stdout) as {
    cart_uuid: string;
    events: Array<{ revision: number; type: string }>;
    deliveries: unknown[];
    pruned_before: string;
  };
  const direct = (await (await s.call('GET', `/admin/v1/carts/${uuid}/history`)).json()) as object;
  const { pruned_before, ...rest } = parsed;
  t.deepEqual(rest, { ...direct, deliveries: (await webhooksOf()).deliveries });
  // Deliveries finished 30 days (PDS_DELIVERY_LOG_RETENTION) before now are pruned.
  t.true(Math.abs(Date.now() - 30 * 86_400_000 - Date.parse(pruned_before)) < 60_000, pruned_before);
  t.false(asTable.stdout.includes('pruned'), 'a cart of today has lost nothing');
  t.deepEqual(
    parsed.events.map((e) => e.revision),
    [0, 1, 2, 3],
  );
});

test('pds audit cart fits a terminal of 80 columns, an event a block; piped, an event a line', async (t) => {
  if (spawnSync('script', ['--version']).status !== 0)
    return t.pass('no `script` command here to make a pseudo-terminal');
  const s = await startService(t);
  const uuid = await cartWithHistory(s);
  const piped = await pds(s, ['audit', 'cart', uuid]);
  t.true(
    piped.stdout.split('\n').some((line) => line.length > 80),
    'piped: full width',
  );
  t.is(piped.stdout.trimEnd().split('\n\n')[0].split('\n').length, 6, 'a header, a rule, four events');
  // On a pseudo-terminal (util-linux `script`) of 80 columns.
  const onTerminal = await exec(
    'script',
    ['-qec', `stty cols 80 rows 50; ${process.execPath} cli/pds.ts audit cart ${uuid}`, '/dev/null'],
    { env: { PATH: process.env.PATH ?? '', PDS_URL: s.base, PDS_OPERATOR_TOKEN: s.token } },
  );
  const lines = onTerminal.stdout.replace(/\r/g, '').trimEnd().split('\n');
  t.true(
    lines.every((line) => line.length <= 80),
    lines.filter((line) => line.length > 80).join('\n'),
  );
  // Nine columns do not fit 80: each event is a block of `column  value` lines.
  t.deepEqual(
    lines.filter((line) => line.startsWith('type ')).map((line) => line.split(/\s+/)[1]),
    ['CartCreated', 'CartItemAdded', 'CartCheckedOut', 'CartStatusChanged'],
  );
  t.deepEqual(
    lines.filter((line) => line.startsWith('rev ')).map((line) => line.split(/\s+/)[1]),
    ['0', '1', '2', '3'],
  );
  t.true(lines.some((line) => /^changes\s+status: "pending" → "verification"$/.test(line)));
});

test('pds audit cart: exit codes say what went wrong', async (t) => {
  const s = await startService(t);
  const missing = await pds(s, ['audit', 'cart', randomUUID()]);
  t.is(missing.code, EXIT.notFound);
  t.regex(missing.stderr, /404 cart_not_found/);
  t.is((await pds(s, ['audit', 'cart'])).code, EXIT.usage);
  t.is(
    (await pds(s, ['audit', 'cart', randomUUID()], { PDS_OPERATOR_TOKEN: 'wrong-token-0123456789' })).code,
    EXIT.unauthorized,
  );
  const down = await pds(undefined, ['audit', 'cart', randomUUID()], {
    PDS_URL: 'http://127.0.0.1:1',
    PDS_OPERATOR_TOKEN: 'x',
  });
  t.is(down.code, EXIT.unreachable);
  t.regex(down.stderr, /cannot reach/);
});
