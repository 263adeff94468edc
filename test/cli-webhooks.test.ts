/**
 * `pds webhooks …` against a real service: each command as a table and with `--json` (which parses
 * and equals what the admin API answers), and the exit codes scripts rely on.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { EXIT } from '../cli/client.ts';
import { startService, type TestService } from './support/service.ts';

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
  t.regex(lines[0], /^webhook_id\s+url\s+stores\s+events\s+enabled\s+updated_at$/);
  t.is(lines.length, 4);
  t.false(list.stdout.includes('cli-token'));
  const listJson = await pds(s, ['webhooks', 'list', '--json']);
  t.is(listJson.code, 0);
  const direct = (await (await s.call('GET', '/admin/v1/webhooks')).json()) as Json;
  t.deepEqual(JSON.parse(listJson.stdout), { webhooks: direct.webhooks });
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
  t.deepEqual(JSON.parse((await pds(s, ['webhooks', 'list', '--json'])).stdout), { webhooks: [] });
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
