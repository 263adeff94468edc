/**
 * `.github/workflows/ci.yml`, read as a file: it runs only on GitHub (docs/development.md, "Engine suites"). The
 * `test` job runs what `.ci/run` runs; the `engines` job runs the same suite where Docker is, with
 * `PDS_REQUIRE_ENGINES=1` so that no engine suite can pass by skipping, and `npm run e2e:compose`; both
 * on the Node that package.json pins.
 */
import { readFile } from 'node:fs/promises';
import test from 'ava';
import { parse } from 'yaml';
import { ROOT } from './support/source-files.ts';

interface Step {
  name?: string;
  uses?: string;
  run?: string;
  with?: Record<string, unknown>;
  env?: Record<string, string>;
}

interface Job {
  'runs-on'?: string;
  container?: unknown;
  services?: unknown;
  env?: Record<string, string>;
  steps?: Step[];
}

interface Workflow {
  on?: Record<string, unknown>;
  jobs?: Record<string, Job>;
}

async function workflow(): Promise<Workflow> {
  return parse(await readFile(`${ROOT}.github/workflows/ci.yml`, 'utf8')) as Workflow;
}

async function packageJson(): Promise<{
  engines: { node: string };
  devDependencies: Record<string, string>;
  scripts: Record<string, string>;
}> {
  return JSON.parse(await readFile(`${ROOT}package.json`, 'utf8'));
}

/** The commands a job runs, in order, as written. */
const commands = (job: Job) => (job.steps ?? []).flatMap((s) => (s.run === undefined ? [] : [s.run.trim()]));

/** The step of a job that runs exactly `command`. */
const stepRunning = (job: Job, command: string) => (job.steps ?? []).find((s) => s.run?.trim() === command);

/** Whether a job's step runs with `PDS_REQUIRE_ENGINES=1` (the job's or the step's environment, or inline). */
function requiresEngines(job: Job, step: Step | undefined): boolean {
  if (!step) return false;
  const value = step.env?.PDS_REQUIRE_ENGINES ?? job.env?.PDS_REQUIRE_ENGINES;
  return value === '1' || /(^|\s)PDS_REQUIRE_ENGINES=1\s/.test(step.run ?? '');
}

const version = (v: string) => v.split('.').map(Number);
function atLeast(v: string, min: string): boolean {
  const [a, b] = [version(v), version(min)];
  for (let i = 0; i < 3; i++) if ((a[i] ?? 0) !== (b[i] ?? 0)) return (a[i] ?? 0) > (b[i] ?? 0);
  return true;
}

test('ci.yml has two jobs, test and engines, run on every push and pull request', async (t) => {
  const { on, jobs } = await workflow();
  t.deepEqual(Object.keys(jobs ?? {}).sort(), ['engines', 'test']);
  t.true(on !== undefined && 'push' in on && 'pull_request' in on, JSON.stringify(on));
});

test("each job checks out and sets up package.json's Node (the pinned node devDependency, within engines) before npm ci", async (t) => {
  const { jobs = {} } = await workflow();
  const pkg = await packageJson();
  const pinned = pkg.devDependencies.node;
  const minimum = /^>=\s*(\d+(?:\.\d+){0,2})$/.exec(pkg.engines.node)?.[1];
  t.truthy(minimum, `engines.node is ${pkg.engines.node}`);
  t.true(atLeast(pinned, minimum ?? ''), `the node devDependency ${pinned} satisfies ${pkg.engines.node}`);
  for (const [name, job] of Object.entries(jobs)) {
    const steps = job.steps ?? [];
    const checkout = steps.findIndex((s) => /^actions\/checkout@v\d+$/.test(s.uses ?? ''));
    const setup = steps.findIndex((s) => /^actions\/setup-node@v\d+$/.test(s.uses ?? ''));
    const install = steps.findIndex((s) => s.run?.trim() === 'npm ci');
    t.true(checkout >= 0 && checkout < setup && setup < install, `${name}: checkout, setup-node, npm ci`);
    t.is(String(steps[setup]?.with?.['node-version']), pinned, `${name}: Node ${pinned}`);
  }
});

test('the test job runs what .ci/run runs: Chromium installed when absent, npm ci, npm test, no engines required', async (t) => {
  const job = (await workflow()).jobs?.test ?? {};
  const ciRun = (await readFile(`${ROOT}.ci/run`, 'utf8')).split('\n').map((l) => l.trim());
  const runCommands = ciRun.filter((l) => /^npm /.test(l));
  t.deepEqual(runCommands, ['npm ci', 'npm test'], '.ci/run');
  const jobCommands = commands(job);
  t.deepEqual(
    jobCommands.filter((c) => /^npm /.test(c)),
    runCommands,
  );
  // The same package, installed the same way when /usr/bin/chromium is absent, and the same fallback.
  const install = /apt-get install -y --no-install-recommends chromium/;
  t.true(
    ciRun.some((l) => install.test(l)),
    '.ci/run installs Debian’s chromium',
  );
  const chromium = jobCommands.find((c) => install.test(c)) ?? '';
  t.regex(chromium, /\[ ! -x \/usr\/bin\/chromium \]/);
  t.regex(chromium, /browser tests will be skipped/);
  t.true(jobCommands.indexOf(chromium) < jobCommands.indexOf('npm test'), 'before npm test');
  t.false(requiresEngines(job, stepRunning(job, 'npm test')), 'the plain job skips the engine suites');
  t.is(job.env?.PDS_TEST_CONTAINERS, '0', 'and starts no containers, though the runner has Docker');
});

test('the engines job: a Docker host (ubuntu-latest, no job container), npm test and npm run e2e:compose under PDS_REQUIRE_ENGINES=1', async (t) => {
  const job = (await workflow()).jobs?.engines ?? {};
  const pkg = await packageJson();
  t.is(job['runs-on'], 'ubuntu-latest');
  t.is(job.container, undefined, 'a job container has no Docker daemon of its own');
  const jobCommands = commands(job).filter((c) => /^npm /.test(c));
  t.deepEqual(jobCommands, ['npm ci', 'npm test', 'npm run e2e:compose']);
  t.truthy(pkg.scripts['e2e:compose'], 'package.json has the script');
  t.true(requiresEngines(job, stepRunning(job, 'npm test')), 'npm test');
  t.true(requiresEngines(job, stepRunning(job, 'npm run e2e:compose')), 'npm run e2e:compose');
});
