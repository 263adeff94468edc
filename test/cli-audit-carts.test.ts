import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import test from 'ava';
import { EXIT } from '../cli/client.ts';
import { manualClock } from '../domain/clock.ts';
import { addItem, createCart, identify, must, seedCatalog } from './support/cart-world.ts';
import { until } from './support/probes.ts';
import { startService, type TestService } from './support/service.ts';

const exec = promisify(execFile);

async function pds(s: TestService, args: string[], token = s.token) {
  try {
    const { stdout, stderr } = await exec(process.execPath, ['cli/pds.ts', ...args], {
      env: { PATH: process.env.PATH ?? '', PDS_URL: s.base, PDS_OPERATOR_TOKEN: token },
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

test('pds audit carts lists the carts a search finds as a table or JSON, pages with --limit and --cursor, and refuses bad options', async (t) => {
  const clock = manualClock('2026-03-01T10:00:00.000Z');
  const s = await startService(t, { clock });
  await seedCatalog(s, [1, 2]);
  const first = await createCart(s, 1);
  await identify(s, first);
  clock.set('2026-03-02T10:00:00.000Z');
  const second = await createCart(s, 2);
  clock.set('2026-03-03T10:00:00.000Z');
  const third = await createCart(s, 2);
  await addItem(s, third, 3);
  await until('the read model holds the three carts', async () => {
    const page = await must(s, 'GET', '/admin/v1/carts');
    return page.carts.length === 3;
  });

  const all = await pds(s, ['audit', 'carts']);
  t.is(all.code, 0, all.stderr);
  const lines = all.stdout.trimEnd().split('\n');
  t.regex(lines[0], /^cart_uuid\s+store\s+status\s+created_at\s+updated_at\s+partner_id\s+items$/);
  // Newest first.
  t.regex(lines[2], new RegExp(`^${third.uuid}\\s+2 Store 2\\s+pending\\s+2026-03-03T10:00:00.000Z.*\\s3$`));
  t.regex(lines[3], new RegExp(`^${second.uuid}\\s+2 Store 2\\s+pending\\s+2026-03-02T10:00:00.000Z`));
  t.true(lines[4].startsWith(first.uuid));
  t.is(lines[5], '3 carts');
  t.false(all.stdout.includes('ana@example.com'), 'no customer in the list');

  const store = await pds(s, ['audit', 'carts', '--store', '2', '--since', '2026-03-02T12:00:00Z', '--json']);
  t.is(store.code, 0, store.stderr);
  const answer = JSON.parse(store.stdout);
  t.deepEqual(
    answer.carts.map((c: { cart_uuid: string }) => c.cart_uuid),
    [third.uuid],
  );
  t.is(answer.next_cursor, null);

  const paged = await pds(s, ['audit', 'carts', '--limit', '1', '--json']);
  const page = JSON.parse(paged.stdout);
  t.is(page.carts[0].cart_uuid, third.uuid);
  const rest = await pds(s, ['audit', 'carts', '--limit', '2', '--cursor', page.next_cursor]);
  t.regex(rest.stdout, new RegExp(`${second.uuid}[\\s\\S]*${first.uuid}`));
  t.regex(rest.stdout, /^2 carts$/m);

  const one = await pds(s, ['audit', 'carts', '--limit', '2']);
  t.regex(one.stdout, /^2 carts, more after these\n\(more: --cursor \S+\)$/m);

  const byEmail = await pds(s, ['audit', 'carts', '--email', 'Ana@Example.com']);
  t.is(byEmail.code, 0, byEmail.stderr);
  t.regex(byEmail.stdout, new RegExp(`^${first.uuid}`, 'm'));
  t.regex(byEmail.stdout, /^1 cart$/m);
  const none = await pds(s, ['audit', 'carts', '--phone', '+1 999 555 0000']);
  t.is(none.stdout, 'no carts found\n');

  for (const [args, named] of [
    [['--status', 'lost'], '--status'],
    [['--since', 'yesterday'], '--since'],
    [['--until', '2026-03-01'], '--until'],
    [['--store', 'x'], '--store'],
    [['--limit', '0'], '--limit'],
  ] as const) {
    const bad = await pds(s, ['audit', 'carts', ...args]);
    t.is(bad.code, EXIT.usage, args.join(' '));
    t.true(bad.stderr.includes(named), bad.stderr);
  }
  const badEmail = await pds(s, ['audit', 'carts', '--email', 'ana']);
  t.is(badEmail.code, EXIT.refused);
  t.regex(badEmail.stderr, /customer_email/);
});

test('pds audit carts --email is refused to an auditor, who may search by store', async (t) => {
  const s = await startService(t);
  await seedCatalog(s);
  const cart = await createCart(s, 1);
  await identify(s, cart);
  const created = await must(s, 'POST', '/admin/v1/operators', {
    name: 'Aud',
    email: 'aud@example.com',
    role: 'auditor',
  });
  const token = created.operator_token as string;
  await until('the cart is listed', async () =>
    (await pds(s, ['audit', 'carts'], token)).stdout.includes(cart.uuid),
  );
  const refused = await pds(s, ['audit', 'carts', '--email', 'ana@example.com'], token);
  t.is(refused.code, EXIT.unauthorized);
  t.regex(refused.stderr, /operator role/);
});
