/**
 * Hostile input against every route of the four partner APIs (issue 8, part 3): hostile path
 * parameters, query parameters, bodies, keys and headers, with keys of every partner kind. Every answer
 * must hold the invariants of `harness.ts` (never a 5xx, problems for refusals, nothing appended by a
 * refusal, answers as the OpenAPI document says).
 */
import http from 'node:http';
import test from 'ava';
import { startService } from '../support/service.ts';
import { attack, cleanPrototype, summary } from './harness.ts';
import { partnerRoutes } from './routes.ts';
import { buildWorld } from './world.ts';

const RUNS = 100;

test('partner APIs: no hostile request gets a 5xx, a non-problem refusal or an append', async (t) => {
  t.timeout(120_000);
  const s = await startService(t);
  const world = await buildWorld(t, s);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  t.teardown(() => agent.destroy());
  const h = { s, world, inspect: await s.openStore(), agent };

  const results = await attack(h, partnerRoutes, RUNS);
  t.log(summary(results));
  t.deepEqual(cleanPrototype(), [], 'Object.prototype is untouched');
  t.deepEqual(
    results.filter((r) => r.failure).map((r) => `${r.route}\n${r.failure}`),
    [],
  );
  // The properties reached the handlers, not only the authentication: every route answered a 200 (201).
  for (const r of results) {
    t.true(
      r.successes > 0,
      `${r.route} never succeeded: ${JSON.stringify(r.statuses)} ${JSON.stringify(r.samples)}`,
    );
  }
});
