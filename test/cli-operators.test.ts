/**
 * `pds operators …`, `pds whoami` and `pds audit views` against a real service: accounts and tokens as
 * tables and with `--json` (equal to what the admin API answers), a token that works as soon as it is
 * printed and stops when revoked or its account is disabled, and exit codes (an auditor's token is
 * refused account management with 6).
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import test from 'ava';
import { OPERATOR_TOKEN_PATTERN } from '../application/credentials.ts';
import { EXIT } from '../cli/client.ts';
import { startService, type TestService } from './support/service.ts';

const exec = promisify(execFile);
const TOKEN = /pds_op_[A-Za-z0-9_-]{43}/;
const UNKNOWN = '00000000-0000-4000-8000-000000000000';

// biome-ignore lint/suspicious/noExplicitAny: parsed output is checked field by field
type Json = Record<string, any>;

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

const whoami = async (s: TestService, token: string) => {
  const out = await pds(s, ['whoami', '--json'], token);
  return out.code === 0 ? (JSON.parse(out.stdout) as Json).operator : out.code;
};

test('pds operators: create, list, show, set-role, disable, enable and tokens list, issue, rotate, revoke', async (t) => {
  const s = await startService(t);

  // create as a table: the record, then the token shown once, which works at once.
  const table = await pds(s, [
    'operators',
    'create',
    '--name',
    'Ana Lee',
    '--email',
    'ana@example.com',
    '--role',
    'auditor',
  ]);
  t.is(table.code, 0, table.stderr);
  t.regex(table.stdout, /^role\s+auditor$/m);
  t.regex(table.stdout, /^email\s+ana@example\.com$/m);
  t.regex(table.stdout, /^tok_\S+\s+pds_op_\S{4}…\s+active\s+\S+\s+\S+$/m);
  const token = /^token \(shown once, hand it to its person now\): (pds_op_\S+)$/m.exec(
    table.stdout,
  )?.[1] as string;
  t.regex(token, OPERATOR_TOKEN_PATTERN);
  const ana = await whoami(s, token);
  t.like(ana, { name: 'Ana Lee', role: 'auditor' });
  const id = ana.operator_id as string;
  const plain = await pds(s, ['whoami'], token);
  t.regex(plain.stdout, new RegExp(`^${id}\\s+Ana Lee\\s+auditor\\s+tok_\\S+$`, 'm'));

  // as JSON, with an expiry.
  const created = await pds(s, [
    'operators',
    'create',
    '--name',
    'Sam',
    '--email',
    'sam@example.com',
    '--role',
    'operator',
    '--expires-in-days',
    '7',
    '--json',
  ]);
  t.is(created.code, 0, created.stderr);
  const sam = JSON.parse(created.stdout) as Json;
  t.regex(sam.operator_token, TOKEN);
  t.is(
    Date.parse(sam.operator.tokens[0].expires_at) - Date.parse(sam.operator.tokens[0].issued_at),
    7 * 86_400_000,
  );

  // list: a table, and JSON equal to the API's list; --role filters.
  const list = await pds(s, ['operators', 'list']);
  t.is(list.code, 0, list.stderr);
  t.regex(
    list.stdout.split('\n')[0],
    /^operator_id\s+name\s+email\s+role\s+enabled\s+active_tokens\s+created_at$/,
  );
  t.false(TOKEN.test(list.stdout));
  const direct = (await (await s.call('GET', '/admin/v1/operators')).json()) as Json;
  t.deepEqual(JSON.parse((await pds(s, ['operators', 'list', '--json'])).stdout), {
    operators: direct.operators,
  });
  const auditors = JSON.parse(
    (await pds(s, ['operators', 'list', '--role', 'auditor', '--json'])).stdout,
  ) as Json;
  t.deepEqual(
    auditors.operators.map((o: Json) => o.operator_id),
    [id],
  );

  // show, set-role, disable, enable.
  const show = await pds(s, ['operators', 'show', id]);
  t.regex(show.stdout, /^tokens:$/m);
  t.false(TOKEN.test(show.stdout));
  t.is(
    JSON.parse((await pds(s, ['operators', 'set-role', id, 'operator', '--json'])).stdout).operator.role,
    'operator',
  );
  t.is((await whoami(s, token)).role, 'operator');
  t.regex((await pds(s, ['operators', 'disable', id])).stdout, /^enabled\s+false$/m);
  t.is(await whoami(s, token), EXIT.unauthorized);
  t.regex((await pds(s, ['operators', 'enable', id])).stdout, /^enabled\s+true$/m);
  t.is((await whoami(s, token)).operator_id, id);

  // tokens: issue works at once; rotate replaces it; revoke stops a token at once.
  const tooLong = await pds(s, ['operators', 'tokens', 'issue', id, '--expires-at', '2099-01-01T00:00:00Z']);
  t.is(tooLong.code, EXIT.refused, 'more than 365 days ahead is refused');
  t.regex(tooLong.stderr, /invalid_expiry/);
  const second = JSON.parse((await pds(s, ['operators', 'tokens', 'issue', id, '--json'])).stdout) as Json;
  t.regex(second.operator_token, TOKEN);
  t.is((await whoami(s, second.operator_token)).token_id, second.token.token_id);
  const rotated = await pds(s, ['operators', 'tokens', 'rotate', id, second.token.token_id]);
  t.is(rotated.code, 0, rotated.stderr);
  t.regex(rotated.stdout, new RegExp(`^revoked ${second.token.token_id}$`, 'm'));
  const replacement = /^token \(shown once, hand it to its person now\): (pds_op_\S+)$/m.exec(
    rotated.stdout,
  )?.[1] as string;
  t.is(await whoami(s, second.operator_token), EXIT.unauthorized);
  t.is((await whoami(s, replacement)).operator_id, id);
  const revoked = await pds(s, ['operators', 'tokens', 'revoke', id, ana.token_id, '--json']);
  t.is(JSON.parse(revoked.stdout).token.status, 'revoked');
  t.is(await whoami(s, token), EXIT.unauthorized);
  const tokens = JSON.parse((await pds(s, ['operators', 'tokens', 'list', id, '--json'])).stdout) as Json;
  t.deepEqual(
    tokens.tokens.map((k: Json) => k.status),
    ['revoked', 'revoked', 'active'],
  );
  const tokensTable = await pds(s, ['operators', 'tokens', 'list', id]);
  t.regex(
    tokensTable.stdout.split('\n')[0],
    /^token_id\s+prefix\s+status\s+issued_at\s+expires_at\s+revoked_at$/,
  );
});

test('pds operators: exit codes; an auditor is refused account management; pds audit views names readers', async (t) => {
  const s = await startService(t);
  const auditor = JSON.parse(
    (
      await pds(s, [
        'operators',
        'create',
        '--name',
        'Aud',
        '--email',
        'aud@example.com',
        '--role',
        'auditor',
        '--json',
      ])
    ).stdout,
  ) as Json;

  const refused = await pds(s, ['operators', 'list'], auditor.operator_token);
  t.is(refused.code, EXIT.unauthorized);
  t.regex(refused.stderr, /^pds: 403 insufficient_role: .*needs the admin role; this token is an auditor's/);
  t.is((await pds(s, ['operators', 'show', UNKNOWN])).code, EXIT.notFound);
  const taken = await pds(s, [
    'operators',
    'create',
    '--name',
    'Again',
    '--email',
    'AUD@example.com',
    '--role',
    'auditor',
  ]);
  t.is(taken.code, EXIT.refused);
  t.regex(taken.stderr, /email_taken/);
  for (const args of [
    ['operators', 'create', '--name', 'X', '--email', 'x@example.com', '--role', 'root'],
    [
      'operators',
      'create',
      '--name',
      'X',
      '--email',
      'x@example.com',
      '--role',
      'auditor',
      '--expires-in-days',
      '400',
    ],
    [
      'operators',
      'tokens',
      'issue',
      UNKNOWN,
      '--expires-in-days',
      '3',
      '--expires-at',
      '2027-01-01T00:00:00Z',
    ],
    ['operators', 'tokens', 'issue', UNKNOWN, '--expires-at', 'tomorrow'],
    ['operators', 'set-role', UNKNOWN, 'boss'],
    ['operators', 'create', '--name', 'X'],
  ]) {
    t.is((await pds(s, args)).code, EXIT.usage, args.join(' '));
  }

  // Who read a cart's history: the auditor, by name.
  const uuid = randomUUID();
  await s.call('PUT', '/platform/v1/stores/1', {
    name: 'S',
    address: 'a',
    city: 'c',
    state: 'CO',
    zip: '80202',
    lat: 39.7,
    long: -104.9,
  });
  t.is(
    (
      await s.call('POST', '/platform/v1/carts', {
        uuid,
        store_id: 1,
        source: { channel: 'headless', partner_id: null },
      })
    ).status,
    201,
  );
  t.is((await pds(s, ['audit', 'views', uuid])).stdout, 'nobody has read this cart’s history\n');
  const audit = await pds(s, ['audit', 'cart', uuid], auditor.operator_token);
  t.is(audit.code, 0, audit.stderr);
  t.regex(audit.stdout, /platform:bootstrap \(bootstrap token\)/);
  const views = await pds(s, ['audit', 'views', uuid]);
  t.is(views.code, 0, views.stderr);
  t.regex(views.stdout, new RegExp(`^\\S+\\s+operator:${auditor.operator.operator_id} \\(Aud\\)$`, 'm'));
  const json = JSON.parse((await pds(s, ['audit', 'views', uuid, '--json'])).stdout) as Json;
  t.deepEqual(
    json.views.map((v: Json) => v.by),
    [{ type: 'operator', id: auditor.operator.operator_id, name: 'Aud' }],
  );
});
