/**
 * The end-to-end suite against a running deployment the environment names (`PDS_E2E_URL`,
 * `PDS_E2E_OPERATOR_TOKEN`, optionally `PDS_E2E_RECEIVER_HOST`): `npm run e2e:compose` runs it against
 * docker compose, and anyone can against any deployment. Without those variables it is skipped, and
 * says so. `PDS_REQUIRE_ENGINES=1` does not make that skip a failure: `npm test` never starts a
 * deployment, and `npm run e2e:compose`, which does and always names it here, fails under that switch
 * when it cannot run (docs/development.md, "Engine suites").
 */
import test from 'ava';
import { targetFromEnv } from './http.ts';
import { registerSuite } from './suite.ts';

if (process.env.PDS_E2E_URL || process.env.PDS_E2E_OPERATOR_TOKEN) {
  registerSuite(async () => targetFromEnv());
} else {
  const reason = 'PDS_E2E_URL and PDS_E2E_OPERATOR_TOKEN are not set (npm run e2e:compose sets them)';
  console.log(`end-to-end suite against a deployment skipped: ${reason}`);
  test.skip(`end-to-end suite against a deployment — skipped: ${reason}`, () => {});
}
