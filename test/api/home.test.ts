/**
 * `GET /` (`api/home.ts`): a small public page that links the API docs and the operator console,
 * with the security headers of the service's other pages, and nothing else at `/`.
 */
import test from 'ava';
import { startService } from '../support/service.ts';

test('GET / answers a page linking /docs and /console, without a token, with the pages’ security headers', async (t) => {
  const s = await startService(t);
  const res = await fetch(`${s.base}/`);
  t.is(res.status, 200);
  t.is(res.headers.get('content-type'), 'text/html; charset=utf-8');
  t.regex(res.headers.get('content-security-policy') ?? '', /default-src 'none'/);
  t.regex(res.headers.get('content-security-policy') ?? '', /frame-ancestors 'none'/);
  t.is(res.headers.get('x-content-type-options'), 'nosniff');
  t.is(res.headers.get('x-frame-options'), 'DENY');
  t.is(res.headers.get('referrer-policy'), 'no-referrer');
  const html = await res.text();
  const links = [...html.matchAll(/href="([^"]+)"/g)].map((m) => m[1]).filter((h) => h.startsWith('/'));
  t.deepEqual(links, ['/docs', '/console']);
  // Each link leads to a page the service serves.
  for (const link of links) {
    const page = await fetch(`${s.base}${link}`);
    t.is(page.status, 200, link);
    t.regex(page.headers.get('content-type') ?? '', /^text\/html/, link);
    await page.body?.cancel();
  }
});

test('/ serves GET and HEAD only, and claims no other path', async (t) => {
  const s = await startService(t);
  const head = await fetch(`${s.base}/`, { method: 'HEAD' });
  t.is(head.status, 200);
  const post = await fetch(`${s.base}/`, { method: 'POST' });
  t.is(post.status, 405);
  t.regex(post.headers.get('allow') ?? '', /GET/);
  await post.body?.cancel();
  const other = await fetch(`${s.base}/index.html`);
  t.is(other.status, 404);
  t.is(other.headers.get('content-type'), 'application/problem+json');
  await other.body?.cancel();
});
