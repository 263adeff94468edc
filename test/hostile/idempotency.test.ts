/**
 * A deeply nested body with an `Idempotency-Key` (found by the partner hostile-input property: a
 * curbside arrival whose `vehicle_make` was 3,500 nested arrays answered 500). The middleware hashed the
 * body with a recursive canonical JSON, which overflowed the stack before the route's validation could
 * refuse the body. The canonical form is iterative now, and writes the same text as before for every
 * body, so the request hashes of records already stored still match their retries.
 */
import test from 'ava';
import fc from 'fast-check';
import { canonical } from '../../api/idempotency.ts';
import { startService } from '../support/service.ts';

/** The former, recursive implementation: the reference the iterative one must equal. */
function recursiveCanonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(recursiveCanonical).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${recursiveCanonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

test('the canonical JSON of a body is what it always was', (t) => {
  fc.assert(
    fc.property(fc.jsonValue({ maxDepth: 6 }), (value) => canonical(value) === recursiveCanonical(value)),
    { numRuns: 500 },
  );
  t.is(canonical({ b: 1, a: [1, { d: undefined, c: null }], e: 'x' }), '{"a":[1,{"c":null}],"b":1,"e":"x"}');
  t.is(canonical(undefined), 'null');
  t.is(canonical([undefined]), '[null]');
});

test('a body nested 30,000 deep is hashed, not a stack overflow', (t) => {
  const depth = 30_000;
  const deep = JSON.parse(`{"a":${'['.repeat(depth)}${']'.repeat(depth)}}`) as unknown;
  t.throws(() => recursiveCanonical(deep), { instanceOf: RangeError });
  t.is(canonical(deep), `{"a":${'['.repeat(depth)}${']'.repeat(depth)}}`);
});

test('a deeply nested body with an Idempotency-Key is refused (422) again, never a 500', async (t) => {
  const s = await startService(t);
  const depth = 20_000;
  const body = `{"store_id":${'['.repeat(depth)}${']'.repeat(depth)},"source":{"channel":"headless"}}`;
  t.true(body.length < 64 * 1024, 'under the body cap');
  const send = () => s.call('POST', '/platform/v1/carts', body, { 'idempotency-key': 'deep-nesting-1' });
  const first = await send();
  const problem = (await first.json()) as { code: string; errors: { field: string }[] };
  t.is(first.status, 422, JSON.stringify(problem));
  t.is(problem.code, 'validation_failed');
  t.true(problem.errors.some((e) => e.field === 'store_id'));
  // An invalid request leaves its key free (docs/write-side.md, "Idempotency"): a retry is refused again.
  const again = await send();
  t.is(again.status, 422);
  t.is(again.headers.get('idempotent-replayed'), null);
  t.deepEqual(await again.json(), problem);
  t.false(s.logs().includes('Maximum call stack'), 'no stack overflow was logged');
});
