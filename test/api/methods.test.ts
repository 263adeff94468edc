/**
 * A method a resource does not serve answers 405 with its `Allow` and a problem document, whatever the
 * method: `TRACE` and the other methods Node knows but no route serves, a method Node's parser does
 * not know (`TRACK`), and `CONNECT` (this service is no proxy). None is a 501, and a path that exists
 * nowhere stays a 404. Sent on raw sockets: fetch refuses to send TRACE, TRACK and CONNECT.
 */
import net from 'node:net';
import test from 'ava';
import { startService } from '../support/service.ts';

interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Sends a request line (and a Host header) as written; reads the whole answer. */
function raw(port: number, requestLine: string, headers: Record<string, string> = {}): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => {
      const lines = Object.entries({ Host: 'localhost', Connection: 'close', ...headers })
        .map(([k, v]) => `${k}: ${v}\r\n`)
        .join('');
      socket.write(`${requestLine}\r\n${lines}\r\n`);
    });
    let text = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      text += chunk;
    });
    socket.setTimeout(5_000, () => socket.destroy(new Error(`no answer to ${requestLine}`)));
    socket.on('error', reject);
    socket.on('close', () => {
      const [head, ...rest] = text.split('\r\n\r\n');
      const [statusLine, ...headerLines] = head.split('\r\n');
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(statusLine)?.[1] ?? 0);
      const parsed: Record<string, string> = {};
      for (const line of headerLines) {
        const at = line.indexOf(':');
        if (at > 0) parsed[line.slice(0, at).toLowerCase()] = line.slice(at + 1).trim();
      }
      resolve({ status, headers: parsed, body: rest.join('\r\n\r\n') });
    });
  });
}

/** The body of a chunked answer, de-chunked (Koa streams none here, but Node may chunk). */
function json(answer: RawAnswer): Record<string, unknown> {
  const body =
    answer.headers['transfer-encoding'] === 'chunked'
      ? answer.body.replace(/^[0-9a-f]+\r\n/gm, '').replace(/\r\n0\r\n*$/, '')
      : answer.body;
  return JSON.parse(body) as Record<string, unknown>;
}

/** A path of each API family, and what it serves. */
const PATHS: [string, string][] = [
  ['/partner/brand/v1/stores', 'HEAD, GET'],
  ['/partner/store/v1/reservations/00000000-0000-4000-8000-000000000000/curbside_arrival', 'POST'],
  ['/admin/v1/partners', 'POST, HEAD, GET'],
  ['/admin/v1/webhooks/00000000-0000-4000-8000-000000000000', 'HEAD, GET, PATCH, DELETE'],
  ['/admin/v1/projections', 'HEAD, GET'],
  ['/platform/v1/brands/1', 'PUT'],
  ['/platform/v1/carts', 'POST'],
  ['/healthz', 'HEAD, GET'],
  ['/', 'HEAD, GET'],
];

test('TRACE, PROPFIND and other methods Node knows: 405 with the path’s Allow and a problem, with or without a token', async (t) => {
  const s = await startService(t);
  const port = Number(new URL(s.base).port);
  for (const method of ['TRACE', 'PROPFIND', 'MKCOL', 'PURGE']) {
    for (const [path, allow] of PATHS) {
      for (const headers of [{}, { Authorization: `Bearer ${s.token}` }] as Record<string, string>[]) {
        const a = await raw(port, `${method} ${path} HTTP/1.1`, headers);
        const what = `${method} ${path}`;
        t.is(a.status, 405, `${what}: ${a.body}`);
        t.is(a.headers.allow, allow, what);
        t.regex(a.headers['content-type'] ?? '', /^application\/problem\+json/, what);
        t.like(json(a), { status: 405, code: 'method_not_allowed' }, what);
        t.is(a.headers['cache-control'], 'no-store', what);
      }
    }
  }
  // Nothing is served at a path no router knows, whatever the method.
  const nowhere = await raw(port, 'TRACE /admin/v1/nothing-here HTTP/1.1');
  t.is(nowhere.status, 404);
  t.like(json(nowhere), { status: 404, code: 'not_found' });
  // The methods a path serves are unchanged: GET on a partner path still asks for a key.
  t.is((await raw(port, 'GET /partner/brand/v1/stores HTTP/1.1')).status, 401);
});

test('a method Node’s parser does not know (TRACK) and CONNECT: 405 problems naming what the service serves', async (t) => {
  const s = await startService(t);
  const port = Number(new URL(s.base).port);
  for (const line of [
    'TRACK /admin/v1/partners HTTP/1.1',
    'TRACK /partner/brand/v1/stores HTTP/1.1',
    'CONNECT example.com:443 HTTP/1.1',
    'CONNECT 169.254.169.254:80 HTTP/1.1',
  ]) {
    const a = await raw(port, line);
    t.is(a.status, 405, `${line}: ${a.body}`);
    t.is(a.headers.allow, 'GET, HEAD, OPTIONS, POST, PUT, PATCH, DELETE', line);
    t.regex(a.headers['content-type'] ?? '', /^application\/problem\+json/, line);
    t.like(json(a), { status: 405, code: 'method_not_allowed' }, line);
    t.is(a.headers['x-content-type-options'], 'nosniff', line);
  }
  // The server still answers afterwards.
  t.is((await raw(port, 'GET /healthz HTTP/1.1')).status, 200);
});
