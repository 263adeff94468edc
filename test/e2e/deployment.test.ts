/**
 * The end-to-end suite against a running deployment the environment names (`PDS_E2E_URL`,
 * `PDS_E2E_OPERATOR_TOKEN`, optionally `PDS_E2E_RECEIVER_HOST`): `npm run e2e:compose` runs it against
 * docker compose, and anyone can against any deployment. Without those variables it is skipped.
 */
import test from 'ava';
import { targetFromEnv } from './http.ts';
import { registerSuite } from './suite.ts';

if (process.env.PDS_E2E_URL || process.env.PDS_E2E_OPERATOR_TOKEN) {
  registerSuite(async () => targetFromEnv());
} else {
  test.skip('end-to-end suite against a deployment — skipped: PDS_E2E_URL and PDS_E2E_OPERATOR_TOKEN are not set', () => {});
}
