/**
 * The engine suites' setup (docs/development.md, "Engine suites"), checked where no engine is: each suite is run
 * as `npm test` runs it, in a child process with containers turned off and no engine URL, and must
 * skip saying why, or under `PDS_REQUIRE_ENGINES=1` fail naming what is missing; `npm run e2e:compose`
 * likewise without docker. The containers they start are docker-compose.yml's engines: EventStoreDB
 * of its image and settings with its data on disk, MongoDB as its replica set behind a replica-set URL.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test from 'ava';
import {
  composeEnvironment,
  composeService,
  EVENTSTORE_IMAGE_DATA,
  eventStoreDefinition,
  mongoReplicaSetDefinition,
} from './support/containers.ts';
import { containersProblem, enginesRequired } from './support/engines.ts';
import { ROOT } from './support/source-files.ts';

const AVA = path.join(ROOT, 'node_modules/ava/entrypoints/cli.js');
const ENGINE_SUITES = [
  'test/contract/eventstore-esdb.test.ts',
  'test/contract/read-store-mongo.test.ts',
  'test/contract/key-store-mongo.test.ts',
  'test/engine-restart.test.ts',
  'test/engine-dispatchers.test.ts',
];
const DEPLOYMENT_SUITE = 'test/e2e/deployment.test.ts';
/** Each engine suite, and what it reports missing when it has no engine here. */
const MISSING = [
  [
    'EventStoreDB contract',
    'no EventStoreDB: PDS_TEST_ESDB_URL is not set and PDS_TEST_CONTAINERS=0 turns containers off',
  ],
  [
    'MongoDB contract',
    'no MongoDB: PDS_TEST_MONGO_URL is not set and PDS_TEST_CONTAINERS=0 turns containers off',
  ],
  [
    'MongoDB key store contract',
    'no MongoDB: PDS_TEST_MONGO_URL is not set and PDS_TEST_CONTAINERS=0 turns containers off',
  ],
  ['engines restarted under traffic', 'no containers to restart: PDS_TEST_CONTAINERS=0 turns containers off'],
  [
    'dispatchers sharing the delivery shards',
    'no containers to run the split deployment: PDS_TEST_CONTAINERS=0 turns containers off',
  ],
];

/** Runs node with `args` in the repository, with only `env`; answers its exit code and output. */
function node(
  args: string[],
  env: Record<string, string>,
): Promise<{ status: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, args, { cwd: ROOT, env, timeout: 90_000 }, (err, stdout, stderr) => {
      const status = err === null ? 0 : typeof err.code === 'number' ? err.code : -1;
      resolve({ status, stdout, stderr });
    });
  });
}

/** Runs ava on `files` as a child with no engine: no URLs, containers off; answers its exit code and output. */
async function runSuites(
  files: string[],
  env: Record<string, string>,
): Promise<{ status: number; output: string }> {
  // Not the parent's environment: it may name engines, or be CI's engines job.
  const { status, stdout, stderr } = await node([AVA, ...files], {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '',
    PDS_TEST_CONTAINERS: '0',
    ...env,
  });
  return { status, output: `${stdout}\n${stderr}` };
}

/** The reporter's line of the test whose title holds `suite` and `missing`. */
const lineOf = (output: string, ...parts: string[]) =>
  output.split('\n').find((l) => /[✔✘-] /.test(l) && parts.every((p) => l.includes(p))) ?? '';

test('PDS_REQUIRE_ENGINES and PDS_TEST_CONTAINERS are 1 or 0 (true or false); a misspelt value is refused', async (t) => {
  t.false(enginesRequired({}));
  t.false(enginesRequired({ PDS_REQUIRE_ENGINES: '' }));
  t.false(enginesRequired({ PDS_REQUIRE_ENGINES: '0' }));
  t.false(enginesRequired({ PDS_REQUIRE_ENGINES: 'false' }));
  t.true(enginesRequired({ PDS_REQUIRE_ENGINES: '1' }));
  t.true(enginesRequired({ PDS_REQUIRE_ENGINES: 'TRUE' }));
  t.throws(() => enginesRequired({ PDS_REQUIRE_ENGINES: 'yes' }), {
    message: /^PDS_REQUIRE_ENGINES must be 1 or 0/,
  });
  t.is(await containersProblem({ PDS_TEST_CONTAINERS: '0' }), 'PDS_TEST_CONTAINERS=0 turns containers off');
  await t.throwsAsync(containersProblem({ PDS_TEST_CONTAINERS: 'off' }), {
    message: /^PDS_TEST_CONTAINERS must be 1 or 0/,
  });
});

test('without an engine, each engine suite is skipped and says why', async (t) => {
  const { status, output } = await runSuites([...ENGINE_SUITES, DEPLOYMENT_SUITE], {});
  t.is(status, 0, output);
  for (const [suite, missing] of MISSING) {
    t.regex(lineOf(output, suite, missing), /\[skip\]/, `${suite}\n${output}`);
    t.true(
      output.includes(`${suite} skipped: ${missing}\n`),
      `${suite}: the reason printed, not only in a title`,
    );
  }
  t.regex(lineOf(output, 'end-to-end suite against a deployment'), /\[skip\].*npm run e2e:compose sets them/);
  t.notRegex(output, /✘/);
});

test('under PDS_REQUIRE_ENGINES=1, each engine suite without its engine fails, naming what is missing', async (t) => {
  const { status, output } = await runSuites([...ENGINE_SUITES, DEPLOYMENT_SUITE], {
    PDS_REQUIRE_ENGINES: '1',
  });
  t.not(status, 0, output);
  for (const [suite, missing] of MISSING) {
    const line = lineOf(output, suite, missing);
    t.regex(line, /✘/, `${suite}\n${output}`);
    t.regex(line, /PDS_REQUIRE_ENGINES=1/);
  }
  t.regex(output, new RegExp(`${ENGINE_SUITES.length} tests? failed`));
  // npm test never starts a deployment: npm run e2e:compose does, and names it to this suite.
  t.regex(lineOf(output, 'end-to-end suite against a deployment'), /\[skip\]/);
});

test('with PDS_TEST_MONGO_URL set but no containers, the MongoDB cases that start servers of their own are skipped saying why, or fail under PDS_REQUIRE_ENGINES=1', async (t) => {
  // Only those cases run (`--match`): the others would dial the URL, which nothing answers.
  const suite = ['test/contract/read-store-mongo.test.ts', '--match', '*outage and standalone cases*'];
  const env = { PDS_TEST_MONGO_URL: 'mongodb://127.0.0.1:1/?replicaSet=rs0' };
  const why = 'they start MongoDB containers of their own, and PDS_TEST_CONTAINERS=0 turns containers off';
  const skipped = await runSuites(suite, env);
  t.is(skipped.status, 0, skipped.output);
  t.regex(lineOf(skipped.output, 'MongoDB outage and standalone cases', why), /\[skip\]/, skipped.output);
  t.true(skipped.output.includes(`MongoDB outage and standalone cases skipped: ${why}\n`), skipped.output);
  const required = await runSuites(suite, { ...env, PDS_REQUIRE_ENGINES: '1' });
  t.not(required.status, 0, required.output);
  const line = lineOf(required.output, 'MongoDB outage and standalone cases', why);
  t.regex(line, /✘/, required.output);
  t.regex(line, /PDS_REQUIRE_ENGINES=1/);
});

test('npm run e2e:compose without docker: skipped with the reason, or under PDS_REQUIRE_ENGINES=1 a failure', async (t) => {
  // A PATH without docker, here as on a machine that has it.
  const empty = await mkdtemp(path.join(tmpdir(), 'pds-no-docker-'));
  t.teardown(() => rm(empty, { recursive: true, force: true }));
  const compose = (env: Record<string, string>) => node(['test/e2e/compose.ts'], { PATH: empty, ...env });
  const skipped = await compose({});
  t.is(skipped.status, 0, skipped.stderr);
  t.regex(skipped.stdout, /^e2e:compose: skipped: docker is not on PATH/m);
  const required = await compose({ PDS_REQUIRE_ENGINES: '1' });
  t.is(required.status, 1, required.stdout);
  t.regex(
    required.stderr,
    /^e2e:compose: cannot run, and PDS_REQUIRE_ENGINES=1 requires it: docker is not on PATH/m,
  );
});

test('the containers are the engines of docker-compose.yml: EventStoreDB on disk, MongoDB through its replica-set URL', async (t) => {
  const eventstore = await composeService('eventstore');
  const esdb = eventStoreDefinition(eventstore);
  // What the suite's container runs with: the data on disk, where the image keeps it, which the
  // compose file keeps in a volume: so a restart of either finds the data it had.
  const memDb = esdb.environment.EVENTSTORE_MEM_DB?.trim().toLowerCase();
  t.true(
    memDb === undefined || memDb === 'false',
    `the data on disk, not in memory: EVENTSTORE_MEM_DB=${memDb}`,
  );
  const dataPath = esdb.environment.EVENTSTORE_DB;
  t.true(
    dataPath === undefined || dataPath === EVENTSTORE_IMAGE_DATA,
    `the data where the image keeps it (${EVENTSTORE_IMAGE_DATA}), not ${dataPath}`,
  );
  t.true(eventstore.volumeTargets.includes(EVENTSTORE_IMAGE_DATA), "in a volume of the compose file's");
  t.deepEqual(
    composeEnvironment(['EVENTSTORE_MEM_DB=true', 'EVENTSTORE_DB=/data=1', 'BARE']),
    { EVENTSTORE_MEM_DB: 'true', EVENTSTORE_DB: '/data=1', BARE: '' },
    'an environment written as a list is read too',
  );

  const mongo = await composeService('mongo');
  const set = mongoReplicaSetDefinition(mongo, 41_234);
  t.is(set.image, mongo.image);
  t.deepEqual(set.command, [...mongo.command, '--port', '41234'], "the compose file's command, on the port");
  t.is(set.replicaSet, mongo.command[mongo.command.indexOf('--replSet') + 1]);
  t.is(set.url('127.0.0.1'), `mongodb://127.0.0.1:41234/?replicaSet=${set.replicaSet}`);
  t.is(
    set.initiate('127.0.0.1'),
    `rs.initiate({ _id: '${set.replicaSet}', members: [{ _id: 0, host: '127.0.0.1:41234' }] })`,
    'the member named as this machine reaches it',
  );
  t.throws(() => mongoReplicaSetDefinition({ ...mongo, command: ['--bind_ip_all'] }, 1), {
    message: /without --replSet/,
  });

  // Nothing in the suites or their setup runs an engine otherwise.
  for (const file of [...ENGINE_SUITES, 'test/support/containers.ts', 'test/support/engines.ts']) {
    const source = await readFile(path.join(ROOT, file), 'utf8');
    t.notRegex(source, /EVENTSTORE_MEM_DB['"]?\s*:|directConnection=true/, file);
  }
});
