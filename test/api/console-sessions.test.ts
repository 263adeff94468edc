/**
 * Console sessions on a real service (docs/operations.md, "The console"): signing in exchanges the
 * operator token for an HttpOnly, SameSite=Strict cookie (Secure behind TLS) that authenticates the
 * admin API without a bearer token; writes need the session's CSRF token; sign-out ends the session
 * on the server; a session ends after its lifetime or idle time (injected clock) and outlives a restart.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import test from 'ava';
import { manualClock } from '../../domain/clock.ts';
import { problem } from '../support/admin-answers.ts';
import { signedInAs, signIn, withCookie } from '../support/console-session.ts';
import { startService } from '../support/service.ts';

const MINUTE = 60_000;

test('signing in sets an HttpOnly, SameSite=Strict cookie for /admin that lasts the session, and answers who signed in', async (t) => {
  const clock = manualClock('2026-03-01T09:00:00.000Z');
  const svc = await startService(t, { clock });
  const { setCookie, body, csrf } = await signIn(svc);
  const attributes = setCookie.split(';').map((a) => a.trim());
  t.regex(attributes[0], /^pds_console_session=[A-Za-z0-9_-]{43}$/);
  t.true(attributes.includes('HttpOnly'));
  t.true(attributes.includes('SameSite=Strict'));
  t.true(attributes.includes('Path=/admin'));
  t.true(attributes.includes('Max-Age=28800'), 'eight hours');
  t.true(attributes.includes('Expires=Sun, 01 Mar 2026 17:00:00 GMT'));
  t.false(attributes.includes('Secure'), 'plain HTTP: a Secure cookie would never come back');
  t.like(body.operator, { operator_id: 'bootstrap', name: 'bootstrap token', role: 'admin' });
  t.regex((body.operator as { token_id: string }).token_id, /^bootstrap:[0-9a-f]{16}$/);
  // One person: the session shows who signed in as `GET /me` shows the caller.
  const me = await withCookie(svc, attributes[0], 'GET', '/admin/v1/me');
  t.deepEqual(((await me.json()) as { operator: unknown }).operator, body.operator);
  t.regex(csrf, /^[A-Za-z0-9_-]{43}$/);
  t.is(body.expires_at, '2026-03-01T17:00:00.000Z');
  t.is(body.idle_expires_at, '2026-03-01T09:30:00.000Z');
  t.false(JSON.stringify(body).includes(attributes[0].split('=')[1]), 'the session id is in the cookie only');
});

test('behind a proxy that ended TLS (X-Forwarded-Proto or Forwarded), the cookie is Secure', async (t) => {
  const svc = await startService(t);
  const forwarded: Record<string, string>[] = [
    { 'x-forwarded-proto': 'https' },
    { 'x-forwarded-proto': 'https, http' },
    { forwarded: 'for=192.0.2.60;proto=https;by=203.0.113.43' },
  ];
  for (const headers of forwarded) {
    const { setCookie } = await signIn(svc, svc.token, headers);
    t.true(
      setCookie
        .split(';')
        .map((a) => a.trim())
        .includes('Secure'),
      JSON.stringify(headers),
    );
  }
  const { setCookie } = await signIn(svc, svc.token, { 'x-forwarded-proto': 'http' });
  t.false(setCookie.includes('Secure'));
});

test('a refused sign-in is a 401 problem that says no more than a refused bearer token, and sets no cookie', async (t) => {
  const svc = await startService(t);
  const answers = [];
  for (const token of ['not-the-operator-token', `${svc.token}x`, svc.token.slice(1)]) {
    const res = await fetch(`${svc.base}/admin/v1/session`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ token }),
    });
    t.deepEqual(res.headers.getSetCookie(), []);
    const body = await problem(t, res, 401, 'unauthorized');
    answers.push(body.detail);
  }
  t.deepEqual(answers, ['invalid operator token', 'invalid operator token', 'invalid operator token']);
  await problem(t, await svc.call('POST', '/admin/v1/session', {}, { authorization: '' }), 422);
});

test('a session authenticates reads without a bearer token, and says who is signed in after a reload', async (t) => {
  const svc = await startService(t);
  const { cookie, csrf } = await signIn(svc);
  for (const url of ['/admin/v1/partners', '/admin/v1/projections', '/admin/v1/webhooks']) {
    const res = await withCookie(svc, cookie, 'GET', url);
    t.is(res.status, 200, `${url}: ${await res.text()}`);
  }
  const again = await withCookie(svc, cookie, 'GET', '/admin/v1/session');
  t.is(again.status, 200);
  t.is(again.headers.get('cache-control'), 'no-store');
  const body = (await again.json()) as Record<string, unknown>;
  t.is(body.csrf_token, csrf, 'the same CSRF token, so other tabs keep theirs');
  t.like(body.operator, { operator_id: 'bootstrap', name: 'bootstrap token', role: 'admin' });
  // Without the cookie, and with a cookie naming no session, the admin API refuses; the session route
  // says nobody is signed in (the page asks as it loads) and clears such a cookie.
  await problem(t, await fetch(`${svc.base}/admin/v1/partners`), 401);
  const forged = 'pds_console_session=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA';
  await problem(t, await withCookie(svc, forged, 'GET', '/admin/v1/partners'), 401);
  const nobody = await withCookie(svc, forged, 'GET', '/admin/v1/session');
  t.is(nobody.status, 200);
  t.regex(nobody.headers.getSetCookie()[0] ?? '', /^pds_console_session=; .*Max-Age=0/);
  t.deepEqual(await nobody.json(), {
    operator: null,
    csrf_token: null,
    expires_at: null,
    idle_expires_at: null,
  });
  t.is((await signedInAs(svc, '')).setCookie, undefined, 'no cookie, nothing to clear');
});

test('a write with the session needs its CSRF token: none or a wrong one is a 403, the right one succeeds as the person', async (t) => {
  const svc = await startService(t);
  const { cookie, csrf } = await signIn(svc);
  const other = await signIn(svc);
  const partner = { name: 'Console Partner', kind: 'brand_feed', all_brands: true };
  const refused: Record<string, string>[] = [
    {},
    { 'x-csrf-token': 'x'.repeat(43) },
    { 'x-csrf-token': other.csrf },
    { 'x-csrf-token': csrf.slice(0, -1) },
  ];
  for (const headers of refused) {
    const res = await withCookie(svc, cookie, 'POST', '/admin/v1/partners', partner, headers);
    await problem(t, res, 403, 'csrf_token_invalid');
  }
  await problem(
    t,
    await withCookie(svc, cookie, 'POST', '/admin/v1/projections/catalog/rebuild', undefined, {}),
    403,
    'csrf_token_invalid',
  );
  const created = await withCookie(svc, cookie, 'POST', '/admin/v1/partners', partner, {
    'x-csrf-token': csrf,
  });
  t.is(created.status, 201, await created.clone().text());
  const { partner: record } = (await created.json()) as { partner: { partner_id: string } };
  const store = await svc.openStore();
  const [registered] = await store.readStream(`partner-${record.partner_id}`);
  t.deepEqual(registered.metadata.actor, { type: 'operator', id: 'bootstrap' });
  // A bearer token needs no CSRF token, with or without a cookie beside it.
  const bearer = await svc.call('POST', '/admin/v1/partners', partner, { cookie });
  t.is(bearer.status, 201);
});

test('sign-out ends the session on the server: the old cookie is refused afterwards', async (t) => {
  const svc = await startService(t);
  const { cookie, csrf } = await signIn(svc);
  const kept = await signIn(svc);
  await problem(t, await withCookie(svc, cookie, 'DELETE', '/admin/v1/session'), 403, 'csrf_token_invalid');
  t.is((await withCookie(svc, cookie, 'GET', '/admin/v1/partners')).status, 200, 'still signed in');

  const out = await withCookie(svc, cookie, 'DELETE', '/admin/v1/session', undefined, {
    'x-csrf-token': csrf,
  });
  t.is(out.status, 204);
  const [cleared] = out.headers.getSetCookie();
  t.regex(cleared, /^pds_console_session=; Path=\/admin; Max-Age=0; /);
  const refused = await withCookie(svc, cookie, 'GET', '/admin/v1/partners');
  await problem(t, refused, 401);
  t.regex(
    refused.headers.getSetCookie()[0] ?? '',
    /^pds_console_session=; .*Max-Age=0/,
    'the cookie is cleared',
  );
  t.is((await signedInAs(svc, cookie)).operator, null);
  await problem(
    t,
    await withCookie(svc, cookie, 'POST', '/admin/v1/partners', {}, { 'x-csrf-token': csrf }),
    401,
  );
  t.is(
    (await withCookie(svc, kept.cookie, 'GET', '/admin/v1/partners')).status,
    200,
    'other sessions live on',
  );
});

test('a session ends after its lifetime however busy, and after its idle time when unused', async (t) => {
  const clock = manualClock('2026-03-01T09:00:00.000Z');
  const svc = await startService(t, { clock });
  const busy = await signIn(svc);
  const idle = await signIn(svc);
  // Used every 20 minutes, the busy one outlives the idle timeout...
  for (let i = 0; i < 23; i++) {
    clock.advance(20 * MINUTE);
    const res = await withCookie(svc, busy.cookie, 'GET', '/admin/v1/projections');
    t.is(res.status, 200, `after ${(i + 1) * 20} minutes`);
  }
  // ... until eight hours have passed since the sign-in.
  clock.set('2026-03-01T17:00:00.000Z');
  await problem(t, await withCookie(svc, busy.cookie, 'GET', '/admin/v1/projections'), 401);
  await problem(t, await withCookie(svc, idle.cookie, 'GET', '/admin/v1/projections'), 401);

  const later = await signIn(svc);
  clock.advance(29 * MINUTE);
  t.is((await signedInAs(svc, later.cookie)).operator?.operator_id, 'bootstrap');
  clock.advance(29 * MINUTE);
  t.is(
    (await signedInAs(svc, later.cookie)).operator?.operator_id,
    'bootstrap',
    'each use restarts the idle time',
  );
  clock.advance(31 * MINUTE);
  t.is((await signedInAs(svc, later.cookie)).operator, null);
  await problem(t, await withCookie(svc, later.cookie, 'GET', '/admin/v1/partners'), 401);
});

test('PDS_CONSOLE_SESSION_LIFETIME and PDS_CONSOLE_SESSION_IDLE set the lifetime and the idle time', async (t) => {
  const clock = manualClock('2026-03-01T09:00:00.000Z');
  const svc = await startService(t, {
    clock,
    env: { PDS_CONSOLE_SESSION_LIFETIME: '1h', PDS_CONSOLE_SESSION_IDLE: '5m' },
  });
  const { setCookie, body, cookie } = await signIn(svc);
  t.true(setCookie.includes('Max-Age=3600;'));
  t.is(body.expires_at, '2026-03-01T10:00:00.000Z');
  t.is(body.idle_expires_at, '2026-03-01T09:05:00.000Z');
  clock.advance(5 * MINUTE + 1);
  await problem(t, await withCookie(svc, cookie, 'GET', '/admin/v1/partners'), 401);
});

test('a session outlives a restart of the service on the same data dir', async (t) => {
  const first = await startService(t);
  const { cookie, csrf } = await signIn(first);
  await first.service.stop();
  t.true(existsSync(path.join(first.dataDir, 'sessions.db')), 'in a file of their own beside read.db');
  const second = await startService(t, { dataDir: first.dataDir });
  const res = await withCookie(second, cookie, 'GET', '/admin/v1/session');
  t.is(res.status, 200, await res.clone().text());
  t.is(((await res.json()) as { csrf_token: string }).csrf_token, csrf);
  const created = await withCookie(
    second,
    cookie,
    'POST',
    '/admin/v1/partners',
    { name: 'After Restart', kind: 'brand_feed', all_brands: true },
    { 'x-csrf-token': csrf },
  );
  t.is(created.status, 201);
});

test('a session the bootstrap token opened ends when the service starts with another bootstrap token', async (t) => {
  const first = await startService(t);
  const { cookie } = await signIn(first);
  await first.service.stop();
  const second = await startService(t, {
    dataDir: first.dataDir,
    env: { PDS_OPERATOR_TOKEN: 'a-new-bootstrap-token-after-a-leak' },
  });
  t.is((await signedInAs(second, cookie)).operator, null);
  await problem(t, await withCookie(second, cookie, 'GET', '/admin/v1/partners'), 401);
});

test('neither the session id nor the CSRF token is ever logged', async (t) => {
  const svc = await startService(t);
  const { cookie, csrf } = await signIn(svc);
  await withCookie(svc, cookie, 'GET', '/admin/v1/partners');
  await withCookie(svc, cookie, 'POST', '/admin/v1/partners', {
    name: 'P',
    kind: 'brand_feed',
    all_brands: true,
  });
  await withCookie(svc, cookie, 'DELETE', '/admin/v1/session', undefined, { 'x-csrf-token': csrf });
  const logs = svc.logs();
  t.true(logs.includes('/admin/v1/session'), 'the requests were logged');
  t.false(logs.includes(cookie.split('=')[1]));
  t.false(logs.includes(csrf));
  t.false(logs.includes(svc.token));
});

test("the console's reads are logged at debug; its writes, its failed reads and bearer-token reads at info", async (t) => {
  const svc = await startService(t);
  const { cookie, csrf } = await signIn(svc);
  const requests = () =>
    svc
      .logs()
      .trim()
      .split('\n')
      .map(
        (line) =>
          JSON.parse(line) as { msg: string; level: number; method: string; path: string; status: number },
      )
      .filter((line) => line.msg === 'request');
  const levelOf = (method: string, path: string, status: number) =>
    requests()
      .filter((line) => line.method === method && line.path === path && line.status === status)
      .map((line) => line.level);

  t.is((await withCookie(svc, cookie, 'GET', '/admin/v1/projections')).status, 200);
  t.is((await withCookie(svc, cookie, 'GET', '/admin/v1/webhook-health')).status, 200);
  t.is((await withCookie(svc, cookie, 'GET', '/admin/v1/webhooks/wh_none')).status, 404);
  const partner = { name: 'Console Partner', kind: 'brand_feed', all_brands: true };
  t.is(
    (await withCookie(svc, cookie, 'POST', '/admin/v1/partners', partner, { 'x-csrf-token': csrf })).status,
    201,
  );
  t.is((await svc.call('GET', '/admin/v1/projections')).status, 200);

  t.deepEqual(
    levelOf('GET', '/admin/v1/projections', 200),
    [20, 30],
    'the console at debug, the bearer token at info',
  );
  t.deepEqual(levelOf('GET', '/admin/v1/webhook-health', 200), [20]);
  t.deepEqual(levelOf('GET', '/admin/v1/webhooks/wh_none', 404), [30], 'a failed read stays at info');
  t.deepEqual(levelOf('POST', '/admin/v1/partners', 201), [30], 'a write stays at info');
});
