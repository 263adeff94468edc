/**
 * Hostile input against every route of the platform write API (issue 8, part 3): hostile path
 * parameters, bodies (mutations of a valid body: wrong types, huge and raw numbers, deep nesting,
 * prototype keys, operator-shaped values, unicode), content types, `If-Match` and `Idempotency-Key`
 * headers and credentials. Every answer must hold the invariants of `harness.ts`: never a 5xx, problems
 * for refusals and nothing appended by a refusal.
 */
import http from 'node:http';
import test from 'ava';
import { startService } from '../support/service.ts';
import { attack, cleanPrototype, summary } from './harness.ts';
import { platformRoutes } from './routes.ts';
import { buildWorld } from './world.ts';

const RUNS = 100;

test('platform API: no hostile request gets a 5xx, a non-problem refusal or an append', async (t) => {
  t.timeout(120_000);
  const s = await startService(t);
  const world = await buildWorld(t, s);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  t.teardown(() => agent.destroy());
  const h = { s, world, inspect: await s.openStore(), agent };

  const results = await attack(h, platformRoutes, RUNS);
  t.log(summary(results));
  t.deepEqual(cleanPrototype(), [], 'Object.prototype is untouched');
  t.deepEqual(
    results.filter((r) => r.failure).map((r) => `${r.route}\n${r.failure}`),
    [],
  );
  // The properties reached the deciders, not only validation: every route took a write.
  for (const r of results) {
    t.true(
      r.successes > 0,
      `${r.route} never succeeded: ${JSON.stringify(r.statuses)} ${JSON.stringify(r.samples)}`,
    );
  }
});
