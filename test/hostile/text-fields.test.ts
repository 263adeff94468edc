/**
 * Every text a write route accepts refuses control characters and lone surrogates (issue 37): a walk
 * over every string of every write route's valid body in the hostile catalogue (`routes.ts`: names,
 * titles, descriptions, comments, instructions, labels, the customer's fields, a curbside arrival's
 * answers, URLs, codes), each given a NUL, a lone surrogate, an ESC and a C1 control, in the middle of
 * its valid value and as the whole value. Each answer is a 422 problem naming that field, and nothing is
 * appended. Text of several lines (descriptions, comments, instructions, messages, a customer's notes)
 * keeps tab and line breaks: those are accepted there, and refused in names.
 */
import http from 'node:http';
import test from 'ava';
import { startService } from '../support/service.ts';
import { exchange, type Harness, validRequest } from './harness.ts';
import { adminRoutes, partnerRoutes, platformRoutes, type RouteSpec } from './routes.ts';
import type { Json } from './values.ts';
import { buildWorld } from './world.ts';

/** What no text may hold. */
const REFUSED = ['\u0000', '\ud800', '\udfff', '\u001b[2J', '\u0085', '\u007f'];

/** A body's string values, as `[path, value]`, the path in the problem's field notation (`a.b[0].c`). */
function strings(value: unknown, path = ''): [string, string][] {
  if (typeof value === 'string') return [[path, value]];
  if (Array.isArray(value)) return value.flatMap((v, i) => strings(v, `${path}[${i}]`));
  if (value !== null && typeof value === 'object') {
    return Object.entries(value).flatMap(([k, v]) => strings(v, path ? `${path}.${k}` : k));
  }
  return [];
}

/** A copy of `body` with the string at `path` replaced. */
function withValue(body: Json, path: string, next: string): Json {
  const copy = structuredClone(body);
  const steps = path.match(/[^.[\]]+/g) ?? [];
  let node: Json = copy;
  for (const step of steps.slice(0, -1)) node = node[step];
  node[steps[steps.length - 1]] = next;
  return copy;
}

const writes = [...platformRoutes, ...adminRoutes, ...partnerRoutes].filter((r) => r.body !== undefined);

test('NUL, lone surrogates and other controls in any text of any write route: 422 naming the field, nothing appended', async (t) => {
  t.timeout(120_000);
  const s = await startService(t);
  const world = await buildWorld(t, s);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  t.teardown(() => agent.destroy());
  const h: Harness = { s, world, inspect: await s.openStore(), agent };

  const wrong: string[] = [];
  const walked = new Set<string>();
  for (const spec of writes) {
    const valid = validRequest(spec, h);
    const body = JSON.parse(valid.body ?? '{}') as Json;
    for (const [field, value] of strings(body)) {
      walked.add(`${spec.method} ${spec.path} ${field}`);
      for (const bad of REFUSED) {
        const middle = `${value.slice(0, 1)}${bad}${value.slice(1)}`;
        for (const sent of [middle, bad]) {
          const a = await exchange(h, {
            ...valid,
            body: JSON.stringify(withValue(body, field, sent)),
            how: field,
          });
          const what = `${spec.method} ${spec.path} ${field} = ${JSON.stringify(sent)}`;
          const own = a.appended.filter((e) => e.metadata.actor?.type !== 'system');
          let named = false;
          try {
            const problem = JSON.parse(a.text) as { errors?: { field: string }[] };
            named = problem.errors?.some((e) => e.field === field) ?? false;
          } catch {}
          if (a.status !== 422 || !named || own.length > 0) {
            wrong.push(`${what}: ${a.status} ${a.text.slice(0, 200)}${own.length ? ' (appended)' : ''}`);
          }
        }
      }
    }
  }
  t.deepEqual(wrong, []);
  // The walk reached the text fields the issue names, on every family of write routes.
  for (const expected of [
    'POST /admin/v1/partners name',
    'PUT /platform/v1/stores/:id name',
    'PUT /platform/v1/stores/:id display_name',
    'PUT /platform/v1/brands/:id name',
    'PUT /platform/v1/products/:id description',
    'PUT /platform/v1/reviews/:id comment',
    'PUT /platform/v1/specials/:id title',
    'PUT /platform/v1/stores/:id/curbside_pickup_setting arrival_instructions',
    'PUT /platform/v1/stores/:id/curbside_pickup_setting arrival_form_fields[0].label',
    'PUT /platform/v1/carts/:uuid/customer first_name',
    'POST /platform/v1/carts/:uuid/status checkout_message',
    'POST /admin/v1/webhooks url',
    'POST /partner/store/v1/reservations/:uuid/curbside_arrival notes',
  ]) {
    t.true(walked.has(expected), expected);
  }
  t.log(`${walked.size} text fields of ${writes.length} write routes`);
});

/** Fields of several lines: tab and line breaks are kept there. */
const MULTI_LINE: Record<string, string[]> = {
  // First: the curbside setting below changes the arrival form this body answers.
  'POST /partner/store/v1/reservations/:uuid/curbside_arrival': ['notes'],
  'PUT /platform/v1/products/:id': ['description'],
  'PUT /platform/v1/reviews/:id': ['comment'],
  'PUT /platform/v1/specials/:id': ['description'],
  'PUT /platform/v1/stores/:id/curbside_pickup_setting': ['arrival_instructions'],
  'POST /platform/v1/carts/:uuid/status': ['checkout_message'],
};

test('tab and line breaks: kept in text of several lines, refused in names', async (t) => {
  t.timeout(120_000);
  const s = await startService(t);
  const world = await buildWorld(t, s);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  t.teardown(() => agent.destroy());
  const h: Harness = { s, world, inspect: await s.openStore(), agent };
  const byName = new Map<string, RouteSpec>(writes.map((r) => [`${r.method} ${r.path}`, r]));
  const text = 'first line\n\tsecond line\r\nthird line';
  for (const [route, fields] of Object.entries(MULTI_LINE)) {
    const spec = byName.get(route);
    if (!spec) throw new Error(`${route} is not in the catalogue`);
    const valid = validRequest(spec, h);
    const body = JSON.parse(valid.body ?? '{}') as Json;
    for (const field of fields) {
      const a = await exchange(h, {
        ...valid,
        body: JSON.stringify(withValue(body, field, text)),
        how: field,
      });
      t.true(a.status < 300, `${route} ${field}: ${a.status} ${a.text.slice(0, 200)}`);
    }
  }
  for (const [route, field] of [
    ['PUT /platform/v1/brands/:id', 'name'],
    ['POST /admin/v1/partners', 'name'],
    ['PUT /platform/v1/carts/:uuid/customer', 'last_name'],
  ]) {
    const spec = byName.get(route) as RouteSpec;
    const valid = validRequest(spec, h);
    const body = JSON.parse(valid.body ?? '{}') as Json;
    for (const bad of ['a\nb', 'a\tb', 'a\rb']) {
      const a = await exchange(h, {
        ...valid,
        body: JSON.stringify(withValue(body, field, bad)),
        how: field,
      });
      t.is(a.status, 422, `${route} ${field} = ${JSON.stringify(bad)}`);
      t.regex(a.text, new RegExp(`"field":"${field}"`));
    }
  }
});
