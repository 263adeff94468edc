import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import test from 'ava';
import { addItem, createCart, identify, seedCatalog } from './support/cart-world.ts';
import { startService, type TestService } from './support/service.ts';

const exec = promisify(execFile);

async function pds(s: TestService, args: string[]) {
  try {
    const { stdout } = await exec(process.execPath, ['cli/pds.ts', ...args], {
      env: { PATH: process.env.PATH ?? '', PDS_URL: s.base, PDS_OPERATOR_TOKEN: s.token },
    });
    return { code: 0, stdout };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

test('pds customers export prints the customer’s carts, or the whole document with --json', async (t) => {
  const s = await startService(t);
  await seedCatalog(s);
  const cart = await createCart(s);
  await addItem(s, cart);
  await identify(s, cart);
  const listed = await pds(s, ['customers', 'export', 'ana@example.com']);
  t.is(listed.code, 0);
  t.true(listed.stdout.includes(cart.uuid) && listed.stdout.includes('ana@example.com'), listed.stdout);
  const json = JSON.parse((await pds(s, ['customers', 'export', '4242', '--json'])).stdout);
  t.deepEqual(json.carts, []);
});

test('pds customers erase names the erasure and the carts, and says when there is nothing to erase', async (t) => {
  const s = await startService(t);
  await seedCatalog(s);
  const cart = await createCart(s);
  await addItem(s, cart);
  await identify(s, cart);
  const erased = await pds(s, ['customers', 'erase', 'ana@example.com']);
  t.is(erased.code, 0);
  t.regex(erased.stdout, /^erasure [0-9a-f-]{36}: 1 key\(s\) destroyed, 1 cart\(s\) recorded it\n/);
  t.true(erased.stdout.includes(`  ${cart.uuid}\n`));
  const again = await pds(s, ['customers', 'erase', cart.uuid, '--json']);
  t.deepEqual(JSON.parse(again.stdout), { erasure_id: null, keys_destroyed: 0, carts: [], finished: true });
  const history = (await (await s.call('GET', `/admin/v1/carts/${cart.uuid}/history`)).json()) as {
    events: Array<{ type: string; data: { email?: unknown } }>;
  };
  t.like(history.events.find((e) => e.type === 'CartCustomerIdentified')?.data, {
    email: null,
    erased: true,
  });
});

test('pds customers erase takes several identifiers of one customer and erases them in one erasure', async (t) => {
  const s = await startService(t);
  await seedCatalog(s);
  const [first, second] = [await createCart(s), await createCart(s)];
  await identify(s, first);
  await identify(s, second);
  const json = JSON.parse((await pds(s, ['customers', 'erase', first.uuid, second.uuid, '--json'])).stdout);
  t.is(json.keys_destroyed, 2);
  t.deepEqual(json.carts.sort(), [first.uuid, second.uuid].sort());
  const exported = JSON.parse(
    (await pds(s, ['customers', 'export', first.uuid, second.uuid, '--json'])).stdout,
  );
  t.deepEqual(
    exported.carts.map((c: { cart: { customer: unknown } }) => c.cart.customer),
    [null, null],
  );
});

test('pds customers erase and export refuse a typo with the usage code, naming it, and erase nothing', async (t) => {
  const s = await startService(t);
  await seedCatalog(s);
  const cart = await createCart(s);
  await addItem(s, cart);
  await identify(s, cart);
  for (const command of ['erase', 'export']) {
    const refused = await pds(s, ['customers', command, 'ana@example.com', 'ana@example', '12a']);
    t.is(refused.code, 2, command);
    t.regex((refused as { stderr: string }).stderr, /"ana@example" is not an email address/);
  }
  const uuid = await pds(s, ['customers', 'erase', `${cart.uuid.slice(0, -1)}x`]);
  t.is(uuid.code, 2);
  const json = JSON.parse((await pds(s, ['customers', 'export', 'ana@example.com', '--json'])).stdout);
  t.is(json.carts.length, 1, 'nothing was erased');
});
