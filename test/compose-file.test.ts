/**
 * `docker-compose.yml` and the `Dockerfile`, read as files (no Docker engine needed): both engines, the
 * three roles with healthchecks, and only configuration variables the service knows.
 */
import { execFile, execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import test from 'ava';
import { parse } from 'yaml';
import { ROLES } from '../cli/compose.ts';
import { CONFIG_VARIABLES, parseConfig } from '../cli/config.ts';
import { npmStartArgs, npmStartEnv } from './support/npm-start.ts';
import { startService } from './support/service.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

interface Service {
  image?: string;
  build?: unknown;
  command?: string[];
  environment?: Record<string, string>;
  healthcheck?: { test?: string[] | string; disable?: boolean };
  depends_on?: Record<string, { condition: string }>;
  deploy?: { replicas?: number };
  profiles?: string[];
}

async function compose(): Promise<{ services: Record<string, Service> }> {
  // `<<: *pds` merge keys are YAML 1.1; docker compose reads them, so the test does too.
  return parse(await readFile(`${ROOT}docker-compose.yml`, 'utf8'), { merge: true });
}

const text = (value: string[] | string | undefined) =>
  Array.isArray(value) ? value.join(' ') : (value ?? '');

test('EventStoreDB from the vendor-documented image, insecure dev mode, no projections, a healthcheck', async (t) => {
  const { services } = await compose();
  const es = services.eventstore;
  // The registry and repository the vendor's 24.10 installation docs name, at a pinned 24.10 release.
  t.regex(es.image ?? '', /^docker\.eventstore\.com\/eventstore\/eventstoredb-ee:24\.10\.\d+(-|$)/);
  t.is(es.environment?.EVENTSTORE_INSECURE, 'true');
  // The service reads no stream the system projections write.
  t.false('EVENTSTORE_RUN_PROJECTIONS' in (es.environment ?? {}));
  t.false('EVENTSTORE_START_STANDARD_PROJECTIONS' in (es.environment ?? {}));
  t.regex(text(es.healthcheck?.test), /health\/live/);
});

test('the engine suites run the images of the compose file, named nowhere else', async (t) => {
  const containers = await readFile(`${ROOT}test/support/containers.ts`, 'utf8');
  t.regex(containers, /composeService\('eventstore'\)/);
  t.regex(containers, /composeService\('mongo'\)/);
  for (const file of [
    'test/support/containers.ts',
    'test/contract/eventstore-esdb.test.ts',
    'test/contract/read-store-mongo.test.ts',
    'test/engine-restart.test.ts',
    'test/engine-dispatchers.test.ts',
  ]) {
    const source = await readFile(`${ROOT}${file}`, 'utf8');
    t.notRegex(source, /eventstore(db-ee)?:\d|mongo:\d/, file);
  }
});

test('MongoDB runs as a replica set that its healthcheck initiates', async (t) => {
  const { services } = await compose();
  const mongo = services.mongo;
  t.regex(mongo.image ?? '', /^mongo:/);
  t.deepEqual(mongo.command?.slice(0, 2), ['--replSet', 'rs0']);
  const check = text(mongo.healthcheck?.test);
  t.regex(check, /rs\.initiate\(/);
  t.regex(check, /isWritablePrimary/);
});

test('api (2 replicas), projector and dispatcher: each its role, the shared environment, a healthcheck', async (t) => {
  const { services } = await compose();
  const roles = ROLES.filter((r) => r !== 'all');
  t.deepEqual(roles, ['api', 'projector', 'dispatcher']);
  for (const role of roles) {
    const s = services[role];
    t.truthy(s, role);
    t.deepEqual(
      s.command?.filter((a) => !a.startsWith('--') || a === '--role'),
      ['node', 'cli/pds.ts', 'serve', '--role', role],
      role,
    );
    t.regex(text(s.healthcheck?.test), /\/(healthz|readyz)/, role);
    t.false(s.healthcheck?.disable === true, role);
    t.is(s.depends_on?.eventstore?.condition, 'service_healthy', role);
    t.is(s.depends_on?.mongo?.condition, 'service_healthy', role);
    const env = s.environment ?? {};
    t.regex(env.PDS_EVENT_STORE ?? '', /^esdb:\/\/eventstore:2113/, role);
    t.regex(env.PDS_READ_STORE ?? '', /^mongodb:\/\/mongo:27017\/\w+\?replicaSet=rs0$/, role);
    t.regex(env.PDS_OPERATOR_TOKEN ?? '', /^\$\{PDS_OPERATOR_TOKEN:\?/, role);
    t.regex(env.PDS_SECRET_KEY ?? '', /^\$\{PDS_SECRET_KEY:\?/, role);
  }
  t.is(services.api.deploy?.replicas, 2);
});

test('every variable the compose file sets is one the service reads, with a value it accepts', async (t) => {
  const { services } = await compose();
  const env = services.api.environment ?? {};
  // README, "Configuration"'s environment, all of it.
  for (const name of CONFIG_VARIABLES) t.true(name in env, `${name} is set`);
  for (const name of Object.keys(env)) t.true((CONFIG_VARIABLES as readonly string[]).includes(name), name);
  // `${VAR:-default}` as compose resolves it when VAR is unset; the required secrets get sample values.
  const resolved = Object.fromEntries(
    Object.entries(env).map(([k, v]) => [
      k,
      v
        .replace(/^\$\{PDS_OPERATOR_TOKEN:\?[^}]*\}$/, 'operator-token-for-the-test')
        .replace(/^\$\{PDS_SECRET_KEY:\?[^}]*\}$/, Buffer.alloc(32, 1).toString('base64'))
        .replace(/^\$\{\w+:-([^}]*)\}$/, '$1'),
    ]),
  );
  const config = parseConfig(resolved);
  t.false(config.embedded);
  t.false(config.sandbox);
  t.is(config.readStoreUrl, 'mongodb://mongo:27017/pds?replicaSet=rs0');
});

test('the Dockerfile builds on Node 24 and runs pds serve', async (t) => {
  const dockerfile = await readFile(`${ROOT}Dockerfile`, 'utf8');
  t.regex(dockerfile, /^FROM node:24(-slim)?$/m);
  t.regex(dockerfile, /^RUN npm ci\b/m);
  t.regex(dockerfile, /^CMD \["node", ("--[^"]+", )*"cli\/pds\.ts", "serve"/m);
  const ignored = (await readFile(`${ROOT}.dockerignore`, 'utf8')).split('\n');
  // The embedded store and its generated secrets never go into an image.
  t.true(ignored.includes('data'));
  t.true(ignored.includes('node_modules'));
});

test('the image holds every folder the program imports', async (t) => {
  const dockerfile = await readFile(`${ROOT}Dockerfile`, 'utf8');
  const copied = new Set([...dockerfile.matchAll(/^COPY (\S+) \.\/\1$/gm)].map((m) => m[1]));
  // Follows the imports of the program from its entry point, as Node would load them.
  const folders = new Set<string>();
  const seen = new Set<string>();
  const pending = ['cli/pds.ts'];
  for (let file = pending.pop(); file !== undefined; file = pending.pop()) {
    if (seen.has(file)) continue;
    seen.add(file);
    folders.add(file.split('/')[0]);
    const source = await readFile(`${ROOT}${file}`, 'utf8');
    for (const [, spec] of source.matchAll(/(?:from|import\()\s*'(\.{1,2}\/[^']+\.ts)'/g)) {
      pending.push(path.posix.normalize(path.posix.join(path.posix.dirname(file), spec)));
    }
  }
  t.true(seen.size > 50, `followed ${seen.size} modules`);
  for (const folder of folders) t.true(copied.has(folder), `the Dockerfile copies ${folder}/`);
});

test("npm start, the pds bin, the image's command and each compose role run Node with the same V8 flags and malloc arenas", async (t) => {
  const pkg = JSON.parse(await readFile(`${ROOT}package.json`, 'utf8')) as { scripts: { start: string } };
  const startFlags = /exec node ((?:--\S+ )*)cli\/pds\.ts /.exec(pkg.scripts.start)?.[1].trim().split(' ');
  const shebang = (await readFile(`${ROOT}cli/pds.ts`, 'utf8')).split('\n')[0];
  const dockerfile = await readFile(`${ROOT}Dockerfile`, 'utf8');
  const image = JSON.parse(/^CMD (\[.+\])$/m.exec(dockerfile)?.[1] ?? '[]') as string[];
  // The young generation's bound is most of a serving process's memory: a default the role threads
  // lower (docs/read-side.md, "Memory"). NODE_OPTIONS cannot carry it, nor may it override theirs.
  // V8's helper threads (concurrent GC, compilation): Node's default is four whatever the machine; `0`
  // sizes them to the cores beyond the first, so a busy thread's GC does not take the API's core
  // (docs/operations.md, "Threads"). Each isolate's old generation grows by half of what
  // survived its last full collection, not up to four times it (docs/read-side.md, "Memory").
  t.deepEqual(startFlags, [
    '--scavenger-max-new-space-capacity-mb=8',
    '--v8-pool-size=0',
    '--heap-growing-percent=50',
  ]);
  // glibc gives each thread that allocates an arena of its own, up to eight per core, which a process
  // of four threads under load holds resident; two suffice on the cores the service uses (docs/read-side.md).
  t.deepEqual(npmStartEnv(), { MALLOC_ARENA_MAX: '2' }, 'npm start, unless the environment sets it');
  t.is(shebang, `#!/usr/bin/env -S MALLOC_ARENA_MAX=2 node ${startFlags?.join(' ')}`);
  t.regex(dockerfile, /^ENV MALLOC_ARENA_MAX=2$/m, 'the image, and so every compose role');
  const flagsOf = (command: string[] | undefined) => command?.slice(1, command.indexOf('cli/pds.ts'));
  t.deepEqual(flagsOf(image), startFlags, 'the image');
  const { services } = await compose();
  for (const role of ['api', 'projector', 'dispatcher'])
    t.deepEqual(flagsOf(services[role].command), startFlags, role);
  t.notRegex(dockerfile, /NODE_OPTIONS|max-semi-space-size/, "nothing overrides the threads' own limits");
});

/** `npm start`'s flags to `node`, before the program. */
function startNodeFlags(): string[] {
  const args = npmStartArgs();
  return args.slice(0, args.indexOf('cli/pds.ts'));
}

test("npm start's V8 flags give one V8 helper thread per core beyond the first, at least one", (t) => {
  // Linux names V8's helper threads `V8Worker` in /proc; elsewhere there is nothing to count.
  if (!existsSync('/proc/self/task')) {
    t.log('no /proc/self/task on this system: V8Worker threads cannot be counted');
    t.pass();
    return;
  }
  const count = `const fs = require('node:fs');
    console.log(fs.readdirSync('/proc/self/task').filter((t) => fs.readFileSync('/proc/self/task/' + t + '/comm', 'utf8').trim() === 'V8Worker').length)`;
  const helpers = Number(
    execFileSync(process.execPath, [...startNodeFlags(), '-e', count], { encoding: 'utf8' }),
  );
  // Node's default is four whatever the machine, which only a machine of five cores would not tell apart.
  t.is(helpers, Math.max(1, availableParallelism() - 1));
});

test('npm run bench has the V8 flags of npm start, since the api bench serves in the bench process', async (t) => {
  const pkg = JSON.parse(await readFile(`${ROOT}package.json`, 'utf8')) as { scripts: { bench: string } };
  const benchFlags = /^node ((?:--\S+ )*)bench\/run\.ts$/.exec(pkg.scripts.bench)?.[1].trim().split(' ');
  t.deepEqual(benchFlags, ['--expose-gc', ...startNodeFlags()]);
});

/** Runs a healthcheck's `node -e` program with this environment: its exit code. */
function healthcheck(program: string, env: Record<string, string>): Promise<number> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['-e', program], { env: { PATH: process.env.PATH ?? '', ...env } }, (error) =>
      resolve(error ? Number(error.code ?? 1) : 0),
    );
  });
}

test("the image's and the compose roles' healthchecks ask the port that serves /readyz, PDS_OPS_PORT or PORT", async (t) => {
  const dockerfile = await readFile(`${ROOT}Dockerfile`, 'utf8');
  const image = JSON.parse(/^\s+CMD (\[.+\])$/m.exec(dockerfile)?.[1] ?? '[]') as string[];
  const { services } = await compose();
  const role = services.api.healthcheck?.test as string[];
  const programs = { image: image.slice(image.indexOf('-e') + 1)[0], compose: role[role.indexOf('-e') + 1] };
  t.truthy(programs.image && programs.compose, JSON.stringify(programs));

  const together = await startService(t);
  const apart = await startService(t, { env: { PDS_OPS_PORT: '0' } });
  const port = (base: string) => new URL(base).port;
  const opsPort = String(apart.service.opsPort());
  for (const [name, program] of Object.entries(programs)) {
    t.is(await healthcheck(program, { PORT: port(together.base) }), 0, `${name}: on PORT`);
    t.is(
      await healthcheck(program, { PORT: port(apart.base), PDS_OPS_PORT: opsPort }),
      0,
      `${name}: ops port`,
    );
    // The service's port answers 404 for /readyz once the ops port has it: asking it would fail.
    t.is(await healthcheck(program, { PORT: port(apart.base) }), 1, `${name}: the wrong port fails`);
  }
});
