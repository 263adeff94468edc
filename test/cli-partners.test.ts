/**
 * `pds partners …` against a real service: each command as a table and with `--json` (equal to what the
 * admin API answers), keys that work as soon as they are printed and stop when revoked, and exit codes.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import test from 'ava';
import { EXIT } from '../cli/client.ts';
import { startService, type TestService } from './support/service.ts';

const exec = promisify(execFile);
const API_KEY = /pds_key_[A-Za-z0-9_-]{43}/;
const UNKNOWN = '00000000-0000-4000-8000-000000000000';

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

async function seed(s: TestService): Promise<void> {
  const writes: [string, object][] = [
    ['/platform/v1/brands/10', { name: 'Kiva' }],
    ['/platform/v1/brands/11', { name: 'Wyld' }],
  ];
  for (const id of [1, 2]) {
    const store = {
      name: `Store ${id}`,
      address: `${id} Main St`,
      city: 'Denver',
      state: 'CO',
      zip: '80202',
    };
    writes.push([`/platform/v1/stores/${id}`, { ...store, lat: 39.75, long: -104.99 }]);
  }
  for (const [url, body] of writes) {
    const res = await s.call('PUT', url, body);
    if (res.status !== 201) throw new Error(await res.text());
  }
}

/** A partner API status with a key: 200 when the key works, 401 when it does not. */
const statusWith = async (s: TestService, key: string, url: string) =>
  (await fetch(`${s.base}${url}`, { headers: { authorization: `Bearer ${key}` } })).status;

test('pds partners: create, list, show, set-rate-limit and keys list, issue, rotate, revoke', async (t) => {
  const s = await startService(t);
  await seed(s);

  // create, as JSON: the API's answer with the key, which works at once.
  const created = await pds(s, [
    'partners',
    'create',
    '--name',
    'Kiva',
    '--kind',
    'brand',
    '--brand',
    '10',
    '--json',
  ]);
  t.is(created.code, 0, created.stderr);
  const out = JSON.parse(created.stdout) as Json;
  t.regex(out.api_key, API_KEY);
  t.deepEqual(out.partner.brand_ids, [10]);
  t.is(out.partner.kind, 'brand');
  const brandId = out.partner.partner_id as string;
  t.is(await statusWith(s, out.api_key, '/partner/brand/v1/stores'), 200);

  // create as a table: stores comma-separated, the key shown once under the record.
  const table = await pds(s, [
    'partners',
    'create',
    '--name',
    'Green Leaf',
    '--kind',
    'store_operator',
    '--store',
    '2,1',
  ]);
  t.is(table.code, 0, table.stderr);
  t.regex(table.stdout, /^field\s+value$/m);
  t.regex(table.stdout, /^store_ids\s+1, 2$/m);
  t.regex(table.stdout, /^rate_limit_per_minute\s+600$/m);
  t.regex(table.stdout, /^key_\S+\s+pds_key_\S{4}…\s+active\s+\S+$/m);
  const shown = /^api key \(shown once, store it now\): (pds_key_\S+)$/m.exec(table.stdout)?.[1] as string;
  t.regex(shown, API_KEY);
  t.is(await statusWith(s, shown, '/partner/store/v1/menu_products?store_id=1'), 200);
  const feed = await pds(s, [
    'partners',
    'create',
    '--name',
    'Feed',
    '--kind',
    'brand_feed',
    '--all-brands',
    '--rate-limit',
    '120',
    '--json',
  ]);
  t.is(feed.code, 0, feed.stderr);
  t.is((JSON.parse(feed.stdout) as Json).partner.rate_limit_per_minute, 120);

  // list: a table, and JSON equal to the API's list; --kind filters.
  const list = await pds(s, ['partners', 'list']);
  t.is(list.code, 0, list.stderr);
  const lines = list.stdout.trimEnd().split('\n');
  t.regex(lines[0], /^partner_id\s+name\s+kind\s+scope\s+active_keys\s+rate_limit\s+created_at$/);
  t.is(lines.length, 5);
  t.regex(list.stdout, /Green Leaf\s+store_operator\s+stores 1,2\s+1\s+600\/min/);
  t.false(API_KEY.test(list.stdout));
  const listJson = JSON.parse((await pds(s, ['partners', 'list', '--json'])).stdout) as Json;
  const direct = (await (await s.call('GET', '/admin/v1/partners')).json()) as Json;
  t.deepEqual(listJson, { partners: direct.partners });
  const brands = JSON.parse((await pds(s, ['partners', 'list', '--kind', 'brand', '--json'])).stdout) as Json;
  t.deepEqual(
    brands.partners.map((p: Json) => p.partner_id),
    [brandId],
  );

  // show: the record and its keys, never a key itself.
  const show = await pds(s, ['partners', 'show', brandId]);
  t.is(show.code, 0, show.stderr);
  t.regex(show.stdout, /^kind\s+brand$/m);
  t.regex(show.stdout, /^keys:$/m);
  t.false(API_KEY.test(show.stdout));
  const showJson = JSON.parse((await pds(s, ['partners', 'show', brandId, '--json'])).stdout) as Json;
  t.deepEqual(
    showJson.partner,
    ((await (await s.call('GET', `/admin/v1/partners/${brandId}`)).json()) as Json).partner,
  );

  // set-rate-limit
  const limited = await pds(s, ['partners', 'set-rate-limit', brandId, '1200', '--json']);
  t.is(limited.code, 0, limited.stderr);
  t.is((JSON.parse(limited.stdout) as Json).partner.rate_limit_per_minute, 1200);

  // keys: issue works at once; rotate replaces (old 401, new 200); revoke stops a key at once.
  const issued = JSON.parse((await pds(s, ['partners', 'keys', 'issue', brandId, '--json'])).stdout) as Json;
  t.regex(issued.api_key, API_KEY);
  t.is(issued.key.status, 'active');
  t.is(await statusWith(s, issued.api_key, '/partner/brand/v1/stores'), 200);
  const keys = await pds(s, ['partners', 'keys', 'list', brandId]);
  t.is(keys.code, 0, keys.stderr);
  t.is(keys.stdout.trimEnd().split('\n').length, 4);

  const rotated = await pds(s, ['partners', 'keys', 'rotate', brandId, issued.key.key_id]);
  t.is(rotated.code, 0, rotated.stderr);
  t.regex(rotated.stdout, new RegExp(`^revoked ${issued.key.key_id}$`, 'm'));
  const replacement = /^api key \(shown once, store it now\): (pds_key_\S+)$/m.exec(
    rotated.stdout,
  )?.[1] as string;
  t.is(await statusWith(s, issued.api_key, '/partner/brand/v1/stores'), 401);
  t.is(await statusWith(s, replacement, '/partner/brand/v1/stores'), 200);

  const revoked = await pds(s, ['partners', 'keys', 'revoke', brandId, out.partner.keys[0].key_id, '--json']);
  t.is(revoked.code, 0, revoked.stderr);
  t.is((JSON.parse(revoked.stdout) as Json).key.status, 'revoked');
  t.is(await statusWith(s, out.api_key, '/partner/brand/v1/stores'), 401);
  const after = JSON.parse((await pds(s, ['partners', 'keys', 'list', brandId, '--json'])).stdout) as Json;
  t.deepEqual(
    after.keys.map((k: Json) => k.status),
    ['revoked', 'revoked', 'active'],
  );
});

test('pds partners: exit codes for a missing partner, refusals, bad arguments, no token, no service', async (t) => {
  const s = await startService(t);
  await seed(s);

  const missing = await pds(s, ['partners', 'show', UNKNOWN]);
  t.is(missing.code, EXIT.notFound);
  t.regex(missing.stderr, /^pds: 404 partner_not_found: /);
  t.is((await pds(s, ['partners', 'keys', 'issue', UNKNOWN])).code, EXIT.notFound);

  // The domain's scope rules and reference checks are refusals.
  const scope = await pds(s, ['partners', 'create', '--name', 'X', '--kind', 'brand', '--store', '1']);
  t.is(scope.code, EXIT.refused);
  t.regex(scope.stderr, /invalid_scope/);
  const unknownBrand = await pds(s, [
    'partners',
    'create',
    '--name',
    'X',
    '--kind',
    'brand',
    '--brand',
    '99',
  ]);
  t.is(unknownBrand.code, EXIT.refused);
  t.regex(unknownBrand.stderr, /unknown_brand_id/);
  const created = JSON.parse(
    (
      await pds(s, [
        'partners',
        'create',
        '--name',
        'Y',
        '--kind',
        'store_menu_feed',
        '--store',
        '1',
        '--json',
      ])
    ).stdout,
  ) as Json;
  const id = created.partner.partner_id as string;
  const keyId = created.partner.keys[0].key_id as string;
  t.is((await pds(s, ['partners', 'keys', 'revoke', id, keyId])).code, EXIT.ok);
  const twice = await pds(s, ['partners', 'keys', 'revoke', id, keyId]);
  t.is(twice.code, EXIT.refused);
  t.regex(twice.stderr, /key_revoked/);
  t.is((await pds(s, ['partners', 'set-rate-limit', id, '0'])).code, EXIT.refused);

  // Bad arguments never reach the service.
  const kind = await pds(s, ['partners', 'create', '--name', 'X', '--kind', 'shop']);
  t.is(kind.code, EXIT.usage);
  t.regex(kind.stderr, /--kind: expected one of brand, brand_feed, store_operator, store_menu_feed/);
  t.is(
    (await pds(s, ['partners', 'create', '--name', 'X', '--kind', 'brand', '--brand', 'ten'])).code,
    EXIT.usage,
  );
  t.is((await pds(s, ['partners', 'set-rate-limit', id, 'lots'])).code, EXIT.usage);
  t.is((await pds(s, ['partners', 'create', '--kind', 'brand'])).code, EXIT.usage);

  const noToken = await pds(undefined, ['partners', 'list'], {
    PDS_URL: s.base,
    PDS_DATA_DIR: '/nonexistent',
  });
  t.is(noToken.code, EXIT.usage);
  t.is(
    (await pds(s, ['partners', 'list'], { PDS_OPERATOR_TOKEN: 'wrong-token-0123456789' })).code,
    EXIT.unauthorized,
  );
  const down = await pds(undefined, ['partners', 'list'], {
    PDS_URL: 'http://127.0.0.1:9',
    PDS_OPERATOR_TOKEN: s.token,
  });
  t.is(down.code, EXIT.unreachable);
  t.regex(down.stderr, /^pds: cannot reach http:\/\/127\.0\.0\.1:9: /);
});
