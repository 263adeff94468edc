/**
 * `pds import` against a real service: bad lines reported with their line numbers while the rest is
 * applied, `--json` that parses, POST lines applied once however often they are sent, and `--resume`
 * after a connection lost in the middle of a line.
 */
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import test, { type ExecutionContext } from 'ava';
import { EXIT } from '../cli/client.ts';
import { startService, type TestService } from './support/service.ts';

const exec = promisify(execFile);
const CART = '3f1c2d4e-5a6b-4c7d-8e9f-0a1b2c3d4e5f';

// biome-ignore lint/suspicious/noExplicitAny: parsed output is checked field by field
type Json = Record<string, any>;

async function pds(s: TestService, args: string[], url = s.base) {
  try {
    const { stdout, stderr } = await exec(process.execPath, ['cli/pds.ts', ...args], {
      env: { PATH: process.env.PATH ?? '', PDS_URL: url, PDS_OPERATOR_TOKEN: s.token },
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

async function file(t: ExecutionContext, lines: (object | string)[]): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-import-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const name = path.join(dir, 'commands.ndjson');
  await writeFile(name, `${lines.map((l) => (typeof l === 'string' ? l : JSON.stringify(l))).join('\n')}\n`);
  return name;
}

const store = {
  name: 'Green Leaf',
  address: '1 Main St',
  city: 'Denver',
  state: 'CO',
  zip: '80202',
  lat: 39.75,
  long: -104.99,
  curbside: false,
};
const catalog = [
  { method: 'PUT', path: '/brands/10', body: { name: 'Kiva' } },
  { method: 'PUT', path: '/platform/v1/stores/1', body: store },
  { method: 'PUT', path: '/products/101', body: { name: 'Gummies', brand_id: 10, kind: 'edible' } },
  {
    method: 'PUT',
    path: '/stores/1/menu_products/1000',
    body: { product_id: 101, prices: { each: '20.00' } },
  },
  { method: 'POST', path: '/carts', body: { uuid: CART, store_id: 1, source: { channel: 'headless' } } },
];
const addOne = {
  method: 'POST',
  path: `/carts/${CART}/items`,
  body: { menu_product_id: 1000, price_id: 'each', count: 1 },
};

async function history(s: TestService): Promise<string[]> {
  const body = (await (await s.call('GET', `/admin/v1/carts/${CART}/history`)).json()) as Json;
  return body.events.map((e: Json) => e.type);
}

test('bad lines are reported with their line numbers, the others applied; a second import applies nothing twice', async (t) => {
  const s = await startService(t);
  const name = await file(t, [
    '# catalog first',
    catalog[0],
    '',
    catalog[1],
    '{not json',
    { method: 'GET', path: '/stores/1' },
    { method: 'PUT', path: '/products/100', body: { name: 'Orphan', brand_id: 99, kind: 'edible' } },
    catalog[2],
    catalog[3],
    catalog[4],
    addOne,
    { method: 'PUT', path: '/stores/2', body: { ...store, name: '' } },
    { method: 'DELETE', path: '/stores/1/menu_products/1000', body: {} },
    { method: 'POST', path: `/carts/${CART}/checkout`, body: { reservation_mode: 'pickup' } },
  ]);

  const json = await pds(s, ['import', name, '--json']);
  t.is(json.code, EXIT.failed);
  t.is(json.stderr, '');
  const summary = JSON.parse(json.stdout) as Json;
  t.like(summary, { sent: 12, ok: 7, failed: 5, lines: 14, resumed_from_line: 0 });
  t.deepEqual(
    summary.failures.map((f: Json) => [f.line, f.status, f.code]),
    [
      [5, null, 'malformed_json'],
      [6, null, 'invalid_line'],
      [7, 422, 'unknown_brand_id'],
      [12, 422, 'validation_failed'],
      [13, null, 'invalid_line'],
    ],
  );
  t.regex(summary.failures[1].detail, /^method: /);
  t.deepEqual(
    summary.failures[3].errors.map((e: Json) => e.field),
    ['name'],
  );
  t.deepEqual(await history(s), ['CartCreated', 'CartItemAdded', 'CartCheckedOut', 'CartStatusChanged']);

  // As text: one line per failure on stderr, a summary on stdout. Sent again, the POSTs replay.
  const again = await pds(s, ['import', name]);
  t.is(again.code, EXIT.failed);
  const errors = again.stderr.trimEnd().split('\n');
  t.is(errors.length, 5);
  t.is(errors[0], 'pds: line 5: malformed_json: the line is not valid JSON');
  t.regex(errors[2], /^pds: line 7: 422 unknown_brand_id: /);
  t.regex(errors[3], /^pds: line 12: 422 validation_failed: .* \(name: /);
  t.regex(again.stdout, /^imported 7 of 12 commands from .*commands\.ndjson in [\d.]+ s; 5 failed\n$/);
  t.deepEqual(await history(s), ['CartCreated', 'CartItemAdded', 'CartCheckedOut', 'CartStatusChanged']);
});

test('--resume continues after the last line done; a line cut off mid-request is applied once', async (t) => {
  const s = await startService(t);
  const name = await file(t, [...catalog, addOne, addOne, addOne, addOne]);

  // A proxy that passes the first 7 requests, forwards the 8th (the third item) and then drops the
  // connection before its answer, as a network failure would.
  let requests = 0;
  const proxy = createServer(async (req, res) => {
    requests += 1;
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const headers = Object.fromEntries(
      ['authorization', 'content-type', 'idempotency-key'].flatMap((h) =>
        req.headers[h] ? [[h, String(req.headers[h])]] : [],
      ),
    );
    const body = chunks.length > 0 ? Buffer.concat(chunks) : undefined;
    const answer = await fetch(`${s.base}${req.url}`, { method: req.method, headers, body });
    const text = await answer.text();
    if (requests >= 8) {
      req.socket.destroy();
      return;
    }
    res.writeHead(answer.status, { 'content-type': answer.headers.get('content-type') ?? 'text/plain' });
    res.end(text);
  });
  proxy.listen(0, '127.0.0.1');
  await once(proxy, 'listening');
  t.teardown(() => proxy.close());
  const via = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;

  const cut = await pds(s, ['import', name, '--json'], via);
  t.is(cut.code, EXIT.unreachable);
  t.regex(cut.stderr, /^pds: cannot reach http:\/\/127\.0\.0\.1:\d+: /);
  const progress = JSON.parse(await readFile(`${name}.progress`, 'utf8')) as Json;
  t.like(progress, { line: 7, ok: 7, failed: 0 });
  t.deepEqual((await history(s)).filter((type) => type === 'CartItemAdded').length, 3);

  const resumed = await pds(s, ['import', name, '--resume', '--json']);
  t.is(resumed.code, EXIT.ok, resumed.stderr);
  t.like(JSON.parse(resumed.stdout), {
    resumed_from_line: 7,
    sent: 2,
    ok: 2,
    failed: 0,
    total_ok: 9,
    lines: 9,
  });
  // Line 8 reached the service twice and was applied once: four items, as the file says.
  t.is((await history(s)).filter((type) => type === 'CartItemAdded').length, 4);

  const done = await pds(s, ['import', name, '--resume']);
  t.is(done.code, EXIT.ok);
  t.regex(
    done.stdout,
    /^imported 0 of 0 commands .* resumed after line 9; 0 failed \(all runs: 9 ok, 0 failed\)\n$/,
  );

  // A file changed before the point reached is not resumed.
  const text = await readFile(name, 'utf8');
  await writeFile(name, text.replace('Kiva', 'KIVA'));
  const changed = await pds(s, ['import', name, '--resume']);
  t.is(changed.code, EXIT.usage);
  t.regex(changed.stderr, /is not the file .*\.progress was recorded for/);
  const missing = await pds(s, ['import', `${name}.missing`]);
  t.is(missing.code, EXIT.usage);
});
