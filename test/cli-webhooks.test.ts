/**
 * `pds webhooks …` against a real service: each command as a table and with `--json` (which parses
 * and equals what the admin API answers), and the exit codes scripts rely on. The delivery commands
 * run against real local receivers, with an injected clock driving the retries.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { CliError, EXIT } from '../cli/client.ts';
import { recoverArguments } from '../cli/commands/webhook-deliveries.ts';
import { manualClock } from '../domain/clock.ts';
import { whileTicking } from './support/admin-answers.ts';
import { addItem, checkOut, createCart, createWebhook, move, seedCatalog } from './support/cart-world.ts';
import { startService, type TestService } from './support/service.ts';
import { startReceiver } from './support/webhook-receiver.ts';

const exec = promisify(execFile);
const URL_ = 'http://127.0.0.1:9/hooks';
const UNKNOWN = '00000000-0000-4000-8000-000000000000';
const SECRET = /^whsec_[A-Za-z0-9+/]{43}=$/;

// biome-ignore lint/suspicious/noExplicitAny: parsed output is checked field by field
type Json = Record<string, any>;

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

async function seedStores(s: TestService, ids: number[]): Promise<void> {
  for (const id of ids) {
    const res = await s.call('PUT', `/platform/v1/stores/${id}`, {
      name: `Store ${id}`,
      address: `${id} Main St`,
      city: 'Denver',
      state: 'CO',
      zip: '80202',
      lat: 39.75,
      long: -104.99,
    });
    if (res.status !== 201) throw new Error(await res.text());
  }
}

test('pds webhooks: create, list, show, update, disable, enable, rotate-secret, delete', async (t) => {
  const s = await startService(t);
  await seedStores(s, [1, 2, 3]);

  // create, as JSON: the API's answer, with the secret shown once.
  const created = await pds(s, [
    'webhooks',
    'create',
    '--url',
    URL_,
    '--auth-token',
    'cli-token-1',
    '--store',
    '2',
    '1',
    '--json',
  ]);
  t.is(created.code, 0, created.stderr);
  const out = JSON.parse(created.stdout) as Json;
  t.regex(out.signing_secret, SECRET);
  t.deepEqual(out.webhook.store_ids, [1, 2]);
  t.deepEqual(out.webhook.events, ['cart_status_updated', 'cart_abandoned']);
  const id = out.webhook.webhook_id as string;

  // create as a table, token from a file, one kind, stores comma-separated.
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-cli-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const tokenFile = path.join(dir, 'token');
  await writeFile(tokenFile, 'cli-token-from-file\n');
  const asTable = await pds(s, [
    'webhooks',
    'create',
    '--url',
    URL_,
    '--auth-token-file',
    tokenFile,
    '--store',
    '3,1',
    '--events',
    'cart_abandoned',
  ]);
  t.is(asTable.code, 0, asTable.stderr);
  t.regex(asTable.stdout, /^field\s+value$/m);
  t.regex(asTable.stdout, /^store_ids\s+1, 3$/m);
  t.regex(asTable.stdout, /^events\s+cart_abandoned$/m);
  t.regex(asTable.stdout, /signing secret \(shown once, store it now\): whsec_/);
  t.false(asTable.stdout.includes('cli-token-from-file'));
  const secondId = /^webhook_id\s+(\S+)$/m.exec(asTable.stdout)?.[1] as string;
  t.truthy(secondId);

  // list: a table and JSON equal to the API's list.
  const list = await pds(s, ['webhooks', 'list']);
  t.is(list.code, 0, list.stderr);
  const lines = list.stdout.trimEnd().split('\n');
  t.regex(lines[0], /^webhook_id\s+url\s+stores\s+events\s+enabled\s+health\s+updated_at$/);
  t.is(lines.length, 4);
  t.false(list.stdout.includes('cli-token'));
  const listJson = await pds(s, ['webhooks', 'list', '--json']);
  t.is(listJson.code, 0);
  const direct = (await (await s.call('GET', '/admin/v1/webhooks')).json()) as Json;
  // With the health the table shows: each ok, with no trouble.
  t.deepEqual(JSON.parse(listJson.stdout), {
    webhooks: direct.webhooks.map((w: Json) => ({ ...w, status: 'ok', trouble: [] })),
    health_truncated: false,
  });
  const ofStore = JSON.parse((await pds(s, ['webhooks', 'list', '--store', '3', '--json'])).stdout) as Json;
  t.deepEqual(
    ofStore.webhooks.map((w: Json) => w.webhook_id),
    [secondId],
  );

  // show
  const shown = await pds(s, ['webhooks', 'show', id, '--json']);
  t.is(shown.code, 0);
  t.deepEqual(JSON.parse(shown.stdout), await (await s.call('GET', `/admin/v1/webhooks/${id}`)).json());
  const shownTable = await pds(s, ['webhooks', 'show', id]);
  t.regex(shownTable.stdout, new RegExp(`^webhook_id\\s+${id}$`, 'm'));
  t.regex(shownTable.stdout, /^url\s+http:\/\/127\.0\.0\.1:9\/hooks$/m);

  // update
  const updated = await pds(s, [
    'webhooks',
    'update',
    id,
    '--url',
    'http://127.0.0.1:9/v2',
    '--store',
    '3',
    '--events',
    'cart_status_updated',
    '--auth-token',
    'cli-token-2',
    '--json',
  ]);
  t.is(updated.code, 0, updated.stderr);
  const u = JSON.parse(updated.stdout) as Json;
  t.is(u.webhook.url, 'http://127.0.0.1:9/v2');
  t.deepEqual(u.webhook.store_ids, [3]);
  t.deepEqual(u.webhook.events, ['cart_status_updated']);
  t.false('signing_secret' in u);

  // disable, enable
  const disabled = await pds(s, ['webhooks', 'disable', id, '--json']);
  t.is(disabled.code, 0);
  t.false((JSON.parse(disabled.stdout) as Json).webhook.enabled);
  const listed = await pds(s, ['webhooks', 'list']);
  t.regex(listed.stdout, new RegExp(`^${id}\\s.*\\sno \\(operator\\)\\s`, 'm'));
  const enabled = await pds(s, ['webhooks', 'enable', id]);
  t.is(enabled.code, 0);
  t.regex(enabled.stdout, /^enabled\s+true$/m);

  // rotate-secret: a new secret, once.
  const rotated = await pds(s, ['webhooks', 'rotate-secret', id, '--json']);
  t.is(rotated.code, 0);
  const r = JSON.parse(rotated.stdout) as Json;
  t.regex(r.signing_secret, SECRET);
  t.not(r.signing_secret, out.signing_secret);
  const rotatedTable = await pds(s, ['webhooks', 'rotate-secret', id]);
  t.regex(rotatedTable.stdout, /signing secret \(shown once, store it now\): whsec_/);

  // delete, then it is gone.
  const deleted = await pds(s, ['webhooks', 'delete', id, '--json']);
  t.is(deleted.code, 0);
  t.like(JSON.parse(deleted.stdout), { webhook_id: id, removed: true });
  const deletedTable = await pds(s, ['webhooks', 'delete', secondId]);
  t.is(deletedTable.code, 0);
  t.regex(deletedTable.stdout, new RegExp(`^removed webhook ${secondId} at `));
  t.deepEqual(JSON.parse((await pds(s, ['webhooks', 'list', '--json'])).stdout), {
    webhooks: [],
    health_truncated: false,
  });
  t.is((await pds(s, ['webhooks', 'show', id])).code, EXIT.notFound);

  // No secret reached the logs on the way.
  for (const secret of [
    'cli-token-1',
    'cli-token-2',
    'cli-token-from-file',
    out.signing_secret,
    r.signing_secret,
  ]) {
    t.false(s.logs().includes(secret));
  }
});

test('pds webhooks: exit codes say what went wrong', async (t) => {
  const s = await startService(t);
  await seedStores(s, [1]);
  const create = (extra: string[]) =>
    pds(s, ['webhooks', 'create', '--url', URL_, '--auth-token', 'tok', ...extra]);

  // Usage: missing options or arguments, bad values caught before any request.
  t.is((await pds(s, ['webhooks', 'create', '--url', URL_, '--store', '1'])).code, EXIT.usage, 'no token');
  t.is((await create([])).code, EXIT.usage, 'no --store');
  t.is((await create(['--store', 'abc'])).code, EXIT.usage);
  t.is((await create(['--store', '1', '--events', 'nope'])).code, EXIT.usage);
  t.is((await pds(s, ['webhooks', 'show'])).code, EXIT.usage);
  t.is((await pds(s, ['webhooks', 'update', UNKNOWN])).code, EXIT.usage, 'nothing to change');
  t.is((await pds(s, ['webhooks', 'frobnicate'])).code, EXIT.usage);
  t.is((await pds(s, ['webhooks', 'list', '--enabled', '--disabled'])).code, EXIT.usage);

  // Refused by the service.
  const unknownStore = await create(['--store', '99']);
  t.is(unknownStore.code, EXIT.refused);
  t.regex(unknownStore.stderr, /422 unknown_store_id/);
  const badUrl = await pds(s, [
    'webhooks',
    'create',
    '--url',
    'ftp://x',
    '--auth-token',
    'tok',
    '--store',
    '1',
  ]);
  t.is(badUrl.code, EXIT.refused);
  t.regex(badUrl.stderr, /422 invalid_url/);

  // Not found.
  for (const args of [
    ['show', UNKNOWN],
    ['update', UNKNOWN, '--url', URL_],
    ['disable', UNKNOWN],
    ['enable', UNKNOWN],
    ['rotate-secret', UNKNOWN],
    ['delete', UNKNOWN],
  ]) {
    const r = await pds(s, ['webhooks', ...args]);
    t.is(r.code, EXIT.notFound, args.join(' '));
    t.regex(r.stderr, /404 webhook_not_found/);
  }

  // Unauthorized, unreachable.
  t.is(
    (await pds(s, ['webhooks', 'list'], { PDS_OPERATOR_TOKEN: 'wrong-token-0123456789' })).code,
    EXIT.unauthorized,
  );
  const down = await pds(undefined, ['webhooks', 'list'], {
    PDS_URL: 'http://127.0.0.1:1',
    PDS_OPERATOR_TOKEN: 'x',
  });
  t.is(down.code, EXIT.unreachable);
  t.regex(down.stderr, /cannot reach/);
});

test('pds webhooks: deliveries, redeliver, recover and test-send', async (t) => {
  const clock = manualClock(new Date());
  const s = await startService(t, { clock, env: { PDS_WEBHOOK_RETRY_SCHEDULE: '0s,1m' } });
  await seedCatalog(s);
  const receiver = await startReceiver(t);
  receiver.script({ status: 500, body: 'boom' }, { status: 500, body: 'boom' });
  const hook = await createWebhook(s, receiver.url, [1]);
  const list = async (query = '') =>
    ((await (await s.call('GET', `/admin/v1/webhooks/${hook.id}/deliveries${query}`)).json()) as Json)
      .deliveries as Json[];
  const early = clock.now().toISOString();
  const cart = await createCart(s);
  await addItem(s, cart);
  await checkOut(s, cart);
  await whileTicking(s, async () => ((await list())[0]?.status === 'failed' ? true : undefined));
  clock.advance(1_000);
  await move(s, cart, 'preparing');
  const [second, first] = await whileTicking(s, async () => {
    const found = await list();
    return found.length === 2 ? found : undefined;
  });

  // deliveries: JSON equal to the API's answer, a table, filters, a limit and a cursor.
  const json = await pds(s, ['webhooks', 'deliveries', hook.id, '--json']);
  t.is(json.code, 0, json.stderr);
  t.deepEqual(JSON.parse(json.stdout), { deliveries: await list('?limit=50'), next_cursor: null });
  const asTable = await pds(s, ['webhooks', 'deliveries', hook.id]);
  t.is(asTable.code, 0, asTable.stderr);
  t.regex(asTable.stdout, /^delivery_id\s+event\s+cart\s+status\s+attempts\s+last\s+next_attempt_at$/m);
  t.regex(
    asTable.stdout,
    new RegExp(
      `^${first.delivery_id}\\s+cart_status_updated\\s+${cart.uuid}\\s+failed\\s+1\\s+500 HTTP 500\\s+\\S+$`,
      'm',
    ),
  );
  t.regex(
    asTable.stdout,
    // Behind the failed one in its queue: it leaves only after that one.
    new RegExp(
      `^${second.delivery_id}\\s+cart_status_updated\\s+\\S+\\s+pending\\s+0\\s+waits behind ${first.delivery_id} \\(failed, next attempt ${first.next_attempt_at}\\)$`,
      'm',
    ),
  );
  const failed = JSON.parse(
    (await pds(s, ['webhooks', 'deliveries', hook.id, '--status', 'failed', '--json'])).stdout,
  );
  t.deepEqual(
    failed.deliveries.map((d: Json) => d.delivery_id),
    [first.delivery_id],
  );
  const page = JSON.parse(
    (await pds(s, ['webhooks', 'deliveries', hook.id, '--limit', '1', '--json'])).stdout,
  );
  t.deepEqual(
    page.deliveries.map((d: Json) => d.delivery_id),
    [second.delivery_id],
  );
  t.is(typeof page.next_cursor, 'string');
  const rest = await pds(s, ['webhooks', 'deliveries', hook.id, '--cursor', page.next_cursor, '--json']);
  t.deepEqual(
    JSON.parse(rest.stdout).deliveries.map((d: Json) => d.delivery_id),
    [first.delivery_id],
  );

  // redeliver: refused while pending (behind the failed one), then the first is parked after its
  // last attempt, the second delivered, and a delivered one may be sent again.
  const busy = await pds(s, ['webhooks', 'redeliver', second.delivery_id]);
  t.is(busy.code, EXIT.refused);
  t.regex(busy.stderr, /409 delivery_in_progress/);
  // Past the 1 min retry and its jitter (±10 %: up to 66 s).
  clock.advance(70_000);
  await whileTicking(s, async () => {
    const found = await list();
    return found.map((d) => d.status).join() === 'delivered,parked' ? true : undefined;
  });
  const again = await pds(s, ['webhooks', 'redeliver', second.delivery_id, '--json']);
  t.is(again.code, 0, again.stderr);
  const redelivered = JSON.parse(again.stdout) as Json;
  t.is(redelivered.delivery.delivery_id, second.delivery_id);
  t.deepEqual(
    redelivered.delivery.redeliveries.map((r: Json) => r.reason),
    ['redeliver'],
  );
  t.true(Number.isInteger(redelivered.position));

  // recover: the parked one, as JSON and (nothing left) as text.
  const recovered = await pds(s, ['webhooks', 'recover', hook.id, '--since', early, '--json']);
  t.is(recovered.code, 0, recovered.stderr);
  t.like(JSON.parse(recovered.stdout), {
    webhook_id: hook.id,
    recovered: 1,
    delivery_ids: [first.delivery_id],
    truncated: false,
  });
  const nothing = await pds(s, ['webhooks', 'recover', hook.id, '--since', early]);
  t.is(nothing.code, 0, nothing.stderr);
  t.regex(nothing.stdout, new RegExp(`^recovered 0 deliveries of webhook ${hook.id} scheduled since `));

  // test-send: delivered (exit 0), as JSON and as a table; not delivered exits 1 with the result shown.
  const sent = await pds(s, ['webhooks', 'test-send', hook.id, '--json']);
  t.is(sent.code, 0, sent.stderr);
  const out = JSON.parse(sent.stdout) as Json;
  t.like(out.result, { outcome: 'delivered', status: 200 });
  t.is(out.sample.event, 'cart_status_updated');
  const abandoned = await pds(s, ['webhooks', 'test-send', hook.id, '--event', 'cart_abandoned']);
  t.is(abandoned.code, 0, abandoned.stderr);
  t.regex(abandoned.stdout, /^event\s+cart_abandoned$/m);
  t.regex(abandoned.stdout, /^outcome\s+delivered$/m);
  const headers = receiver.received.filter((r) => r.headers['x-service-test'] === 'true');
  t.deepEqual(
    headers.map((r) => r.body.webhook_event),
    ['cart_status_updated', 'cart_abandoned'],
  );
  const down = await startReceiver(t);
  down.setDefault({ status: 500, body: 'down' });
  const downHook = await createWebhook(s, down.url, [1]);
  const refused = await pds(s, ['webhooks', 'test-send', downHook.id]);
  t.is(refused.code, EXIT.failed);
  t.regex(refused.stdout, /^outcome\s+failed$/m);
  t.regex(refused.stdout, /^status\s+500$/m);
  t.regex(refused.stderr, /not delivered: failed \(HTTP 500\)/);
});

test('pds webhooks deliveries, redeliver, recover, test-send: exit codes', async (t) => {
  const s = await startService(t);
  await seedStores(s, [1]);

  // Usage: bad options, caught before any request.
  for (const args of [
    ['deliveries'],
    ['deliveries', UNKNOWN, '--status', 'bogus'],
    ['deliveries', UNKNOWN, '--limit', '0'],
    ['deliveries', UNKNOWN, '--limit', 'many'],
    ['redeliver'],
    ['recover'],
    ['recover', UNKNOWN],
    ['recover', '--since', '6h'],
    ['recover', UNKNOWN, '--since', 'yesterday'],
    ['recover', UNKNOWN, '--since', '2026-03-01'],
    ['test-send', UNKNOWN, '--event', 'cart_created'],
  ]) {
    t.is((await pds(s, ['webhooks', ...args])).code, EXIT.usage, args.join(' '));
  }

  // recover says what it needs: each missing part, the forms of the time, the usage, where ids are.
  const said = async (...args: string[]) => (await pds(s, ['webhooks', 'recover', ...args])).stderr;
  const usage =
    'usage: pds webhooks recover <webhook_id> --since <time> (`pds webhooks list` shows the webhook ids)\n';
  const forms = 'an ISO 8601 date-time with offset (2026-03-01T00:00:00Z) or a duration ago (6h, 30m)';
  t.is(
    await said(),
    `pds: webhooks recover needs the webhook id and --since <time>, the time ${forms}; ${usage}`,
  );
  t.is(await said(UNKNOWN), `pds: webhooks recover needs --since <time>, the time ${forms}; ${usage}`);
  t.is(
    await said('--since', '6h'),
    `pds: webhooks recover needs the webhook id, the time ${forms}; ${usage}`,
  );
  t.is(await said(UNKNOWN, '--since', 'yesterday'), `pds: --since: "yesterday" is not ${forms}; ${usage}`);

  // Not found.
  for (const [args, code] of [
    [['deliveries', UNKNOWN], 'webhook_not_found'],
    [['redeliver', UNKNOWN], 'delivery_not_found'],
    [['recover', UNKNOWN, '--since', '2026-03-01T00:00:00Z'], 'webhook_not_found'],
    [['recover', UNKNOWN, '--since', '6h'], 'webhook_not_found'],
    [['test-send', UNKNOWN], 'webhook_not_found'],
  ] as const) {
    const r = await pds(s, ['webhooks', ...args]);
    t.is(r.code, EXIT.notFound, args.join(' '));
    t.regex(r.stderr, new RegExp(`404 ${code}`));
  }

  // Refused by the service (a cursor it never gave out); unauthorized.
  const hook = await createWebhook(s, URL_, [1]);
  const badCursor = await pds(s, ['webhooks', 'deliveries', hook.id, '--cursor', 'nonsense']);
  t.is(badCursor.code, EXIT.refused);
  t.regex(badCursor.stderr, /400 invalid_cursor/);
  t.is(
    (await pds(s, ['webhooks', 'deliveries', hook.id], { PDS_OPERATOR_TOKEN: 'wrong-token-0123456789' }))
      .code,
    EXIT.unauthorized,
  );
});

test('pds webhooks fan-out: the group’s progress as a table and as JSON; exit 1 while no dispatcher has made it', async (t) => {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'pds-cli-fan-out-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const api = await startService(t, { role: 'api', dataDir, env: { PDS_READ_STORE: 'memory' } });
  const absent = await pds(api, ['webhooks', 'fan-out']);
  t.is(absent.code, EXIT.failed);
  t.regex(absent.stdout, /state\s+absent/);
  t.regex(absent.stderr, /the webhook fan-out is absent: no dispatcher has made the group yet/);

  await startService(t, { role: 'dispatcher', dataDir });
  const table = await pds(api, ['webhooks', 'fan-out']);
  t.is(table.code, EXIT.ok, table.stderr);
  t.regex(table.stdout, /group\s+webhook-fan-out/);
  t.regex(table.stdout, /state\s+current/);
  t.regex(table.stdout, /behind after \(s\)\s+300/);
  const json = await pds(api, ['webhooks', 'fan-out', '--json']);
  t.is(json.code, EXIT.ok);
  const answer = (await (await api.call('GET', '/admin/v1/webhook-fan-out')).json()) as Json;
  t.deepEqual(JSON.parse(json.stdout), answer);
});

test('pds webhooks recover --since takes a date-time as given, or a duration ago from now', (t) => {
  const now = new Date('2026-03-01T12:00:00.000Z');
  t.deepEqual(recoverArguments('wh_1', '2026-02-28T00:00:00+01:00', now), {
    id: 'wh_1',
    since: '2026-02-28T00:00:00+01:00',
  });
  t.deepEqual(recoverArguments('wh_1', '6h', now), { id: 'wh_1', since: '2026-03-01T06:00:00.000Z' });
  t.deepEqual(recoverArguments('wh_1', '90m', now), { id: 'wh_1', since: '2026-03-01T10:30:00.000Z' });
  for (const [id, since] of [
    [undefined, '6h'],
    ['wh_1', undefined],
    ['wh_1', '2026-03-01'],
    ['wh_1', '6 days'],
  ] as const) {
    const error = t.throws(() => recoverArguments(id, since, now), { instanceOf: CliError });
    t.is(error.exitCode, EXIT.usage);
    t.regex(error.message, /usage: pds webhooks recover <webhook_id> --since <time>/);
  }
});
