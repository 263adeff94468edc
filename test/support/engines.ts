/**
 * Where every real-engine suite gets its engine (docs/development.md, "Engine suites"): the server
 * `PDS_TEST_ESDB_URL` / `PDS_TEST_MONGO_URL` names when set, else a container of docker-compose.yml's
 * image (`containers.ts`) when a container runtime answers, else none. Without an engine a suite is
 * skipped and says why; with `PDS_REQUIRE_ENGINES=1` (CI's engines job) it fails instead, naming what
 * is missing, so a run that should prove the engines cannot pass by skipping them.
 * `PDS_TEST_CONTAINERS=0` keeps the suites from starting containers (a configured URL still counts).
 */
import type { TestFn } from 'ava';
import type { StartedTestContainer } from 'testcontainers';
import { containerRuntimeProblem, startEventStore, startMongoReplicaSet } from './containers.ts';

export const REQUIRE_ENGINES = 'PDS_REQUIRE_ENGINES';
export const TEST_CONTAINERS = 'PDS_TEST_CONTAINERS';

type Env = Readonly<Record<string, string | undefined>>;

/** A switch of the test environment: 1/true or 0/false; a misspelt value is an error, never "off". */
function flag(env: Env, name: string, unset: boolean): boolean {
  const raw = env[name]?.trim().toLowerCase();
  if (!raw) return unset;
  if (raw === '1' || raw === 'true') return true;
  if (raw === '0' || raw === 'false') return false;
  throw new Error(`${name} must be 1 or 0 (or true or false), got ${JSON.stringify(env[name])}`);
}

/** Whether this run must have its engines: every engine skip becomes a failure. */
export function enginesRequired(env: Env = process.env): boolean {
  return flag(env, REQUIRE_ENGINES, false);
}

let runtimeProbe: Promise<string | undefined> | undefined;

/** Why this process cannot start containers, or undefined when it can. */
export async function containersProblem(env: Env = process.env): Promise<string | undefined> {
  if (!flag(env, TEST_CONTAINERS, true)) return `${TEST_CONTAINERS}=0 turns containers off`;
  runtimeProbe ??= containerRuntimeProblem();
  const problem = await runtimeProbe;
  return problem === undefined ? undefined : `no container runtime answers (${problem})`;
}

/** A running engine: its URL, and the container when this process started one. */
export interface Engine {
  url: string;
  container?: StartedTestContainer;
  stop(): Promise<void>;
}

/** How a suite gets an engine, or why it cannot (`missing`). */
export type EngineAccess =
  | { missing: string }
  | { missing?: undefined; source: 'url' | 'container'; start(): Promise<Engine> };

const ENGINES = {
  eventstore: { name: 'EventStoreDB', urlVariable: 'PDS_TEST_ESDB_URL', start: startEventStore },
  mongo: { name: 'MongoDB', urlVariable: 'PDS_TEST_MONGO_URL', start: startMongoReplicaSet },
} as const;

/** The EventStoreDB or MongoDB a suite runs on: the configured server, a container, or what is missing. */
export async function engineAccess(
  kind: keyof typeof ENGINES,
  env: Env = process.env,
): Promise<EngineAccess> {
  const { name, urlVariable, start } = ENGINES[kind];
  const url = env[urlVariable]?.trim();
  if (url) return { source: 'url', start: async () => ({ url, stop: async () => {} }) };
  const problem = await containersProblem(env);
  if (problem !== undefined) return { missing: `no ${name}: ${urlVariable} is not set and ${problem}` };
  return { source: 'container', start };
}

/**
 * Registers, in place of a suite's cases, what its missing engine means for this run: a skipped test
 * saying why, or under `PDS_REQUIRE_ENGINES=1` a failing one naming what is missing. Either way the
 * reason is printed.
 */
export function reportMissingEngine(
  test: TestFn,
  suite: string,
  missing: string,
  env: Env = process.env,
): void {
  if (enginesRequired(env)) {
    console.log(`${suite} fails: ${missing} (${REQUIRE_ENGINES}=1)`);
    test(`${suite}: ${REQUIRE_ENGINES}=1 requires an engine, and ${missing}`, (t) => {
      t.fail(
        `give the engine, or unset ${REQUIRE_ENGINES} to skip instead (docs/development.md, "Engine suites")`,
      );
    });
    return;
  }
  console.log(`${suite} skipped: ${missing}`);
  test.skip(`${suite}: skipped — ${missing}`, () => {});
}
