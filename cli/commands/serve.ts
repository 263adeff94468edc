/**
 * `pds serve --role <role>`: runs the service until SIGTERM or SIGINT.
 *
 * Output contract: bad configuration prints exactly one line on stderr and exits 1; once listening,
 * the URL is logged and a short banner (URL, where the operator token is, and where the APIs are
 * served, the console's and the docs' URLs) goes to stdout. The first
 * signal stops gracefully and exits 0; a second one exits 1 at once.
 *
 * Sandbox (`PDS_SANDBOX`, on by default in embedded mode): the process of role `all` seeds the sandbox
 * data on its first start, once it is serving and its read models have caught up with what was there,
 * then prints the docs URL, one API key per partner kind and a sample curl (on stdout, never through
 * the logger). A restart does not seed again and prints the same keys. A stop during seeding stops it
 * between two commands; the next start finishes it. Split roles do not seed: several `api` replicas
 * would all try; run `pds sandbox seed` once instead.
 */
import { type Command, Option } from 'commander';
import type { Logger } from 'pino';
import type { Readiness, ReadinessReport } from '../../api/readiness.ts';
import type { Component, ServiceContext } from '../compose.ts';
import { ConfigError, checkRole, loadConfig, type ResolvedConfig } from '../config.ts';
import { CATCH_UP_MEMORY_GIVEN_BACK, giveMemoryBack, START_MEMORY_GIVEN_BACK } from '../memory.ts';
import { dispatcherThreads, type RoleThread, roleThread, ThreadUnavailableError } from '../role-thread.ts';
import { ROLES, type Role } from '../roles.ts';
import type { SeedResult } from '../sandbox/seed.ts';
import { eventStoreOptionsOf } from '../store-options.ts';
import { printError } from '../terminal.ts';

/**
 * The seeding code (the generator, the deciders' record sinks, a progress bar) is loaded once the
 * service listens, never before: a start is not held up by it (docs/read-side.md, "Start-up and restart").
 */
const seeding = () => import('../sandbox/seed.ts');

export function registerServe(program: Command): void {
  program
    .command('serve')
    .description('run the service: every role in one process, or one role of a split deployment')
    .addOption(
      new Option('--role <role>', 'the part of the service this process runs').choices(ROLES).default('all'),
    )
    .action(async (options: { role: Role }) => {
      await serve(options.role);
    });
}

/**
 * Where the operator token comes from; the token itself only at the start that generated it: it is the
 * bootstrap admin's (docs/operations.md, "Accounts and roles"), and a log kept for months is no place
 * for it. Later starts name the file that keeps it.
 */
function tokenLine(config: ResolvedConfig): string {
  const source = config.operatorTokenSource;
  if (source.kind === 'env') return `operator token: from ${source.variable}`;
  if (source.kind === 'generated' && config.embedded) {
    return `operator token (generated into ${source.file}): ${config.operatorToken}`;
  }
  return `operator token: ${source.kind === 'generated' ? 'generated into' : 'kept in'} ${source.file}`;
}

async function serve(role: Role): Promise<void> {
  let config: ResolvedConfig;
  try {
    config = await loadConfig(process.env, process.stdout);
    checkRole(config, role);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    printError(`configuration error: ${error.message}`);
    process.exit(1);
  }

  const sandbox = config.sandbox && role === 'all' ? sandboxSeeder() : undefined;
  // The threads start before the main thread loads its components' modules, so that each loads on a
  // core of its own (docs/operations.md, "Threads").
  const spawning = { spawnNow: config, projectorThread: config.projectorThread };
  const dispatching =
    role === 'all' && config.dispatcherThread
      ? dispatcherThreads(config.webhookDeliveryThreads, spawning)
      : undefined;
  const threads = {
    ...dispatching,
    projector: role === 'all' && config.projectorThread ? roleThread('projector', spawning) : undefined,
  };
  const { defaultComponents, threadedComponents } = await import('../components.ts');
  const { createService } = await import('../compose.ts');
  const components = [
    ...(threads.dispatcher || threads.projector ? threadedComponents(threads) : defaultComponents()),
    ...(sandbox ? [sandbox] : []),
  ];
  const service = createService(config, {
    role,
    components,
    eventStoreOptions: eventStoreOptionsOf({ role }, threads.projector !== undefined),
  });
  const log = service.logger;

  process.on('uncaughtException', (error) => {
    log.fatal({ err: error }, 'uncaught exception');
    process.exit(1);
  });
  process.on('unhandledRejection', (reason) => {
    log.fatal({ err: reason }, 'unhandled promise rejection');
    process.exit(1);
  });

  let signalled = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (signalled) {
      log.warn({ signal }, 'second signal: exiting without waiting');
      process.exit(1);
    }
    signalled = true;
    log.info({ signal }, 'stopping');
    service.stop().then(
      () => process.exit(0),
      (error: unknown) => {
        log.error({ err: error }, 'graceful stop failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);

  let port: number;
  try {
    port = await service.start();
  } catch (error) {
    if (signalled) return; // the signal handler owns the exit
    log.fatal({ err: error }, 'start failed');
    printError(`cannot start: ${error instanceof Error ? error.message : String(error)}`);
    process.exit(1);
  }
  if (signalled) return;

  const url = `http://localhost:${port}`;
  log.info({ url, components: service.components }, `listening on ${url}`);
  process.stdout.write(`pds: listening on ${url} (role ${role})\npds: ${tokenLine(config)}\n`);
  // The console and the docs are served where the APIs are: roles `all` and `api`.
  if (role === 'all' || role === 'api')
    process.stdout.write(`pds: console: ${url}/console, docs: ${url}/docs\n`);
  if (service.opsPort() !== 0) {
    const opsUrl = `http://localhost:${service.opsPort()}`;
    log.info({ url: opsUrl }, `operational endpoints (/healthz, /readyz, /metrics) on ${opsUrl}`);
    process.stdout.write(`pds: operational endpoints (/healthz, /readyz, /metrics) on ${opsUrl}\n`);
  }
  if (config.sandbox && role !== 'all') {
    log.info('PDS_SANDBOX is on, but only `pds serve --role all` seeds it: run `pds sandbox seed` once');
  }
  const ready = untilReady(service.readiness, () => signalled);
  // Only where the read models are built on the projector's thread: this one then has nothing to
  // do but wait.
  if (threads.projector) {
    givesStartMemoryBackIfSlow(log, ready, () => !signalled && service.readiness.check());
  }
  const firstStart = sandbox
    ? sandbox.run(port).then(
        async (result) => {
          if (!result || signalled) return;
          const { describeSandbox } = await seeding();
          const banner = [`sandbox ready at ${url}`, tokenLine(config), describeSandbox(result, url)].join(
            '\n',
          );
          process.stdout.write(`${banner.replace(/^/gm, 'pds: ')}\n`);
        },
        async (error: unknown) => {
          if (signalled) return;
          if (error instanceof (await seeding()).SandboxRefusedError) {
            log.warn({ reason: error.message }, 'sandbox not seeded');
            process.stdout.write(`pds: sandbox not seeded: ${error.message} (PDS_SANDBOX=0 stops trying)\n`);
            return;
          }
          log.error({ err: error }, 'sandbox seeding failed');
          printError(`sandbox seeding failed: ${(error as Error).message}`);
        },
      )
    : ready;
  firstStart
    .then(() =>
      signalled
        ? undefined
        : giveCatchUpMemoryBack(log, [threads.projector, threads.dispatcher, ...(threads.deliveries ?? [])]),
    )
    .catch((error: unknown) => log.warn({ err: error }, 'the memory of the catch-up was not given back'));
}

/**
 * How long a start may go without being ready before the main thread gives back the memory of its
 * own start: by then the projector's thread is catching up a long log (a first start building the
 * read models), and the threads' heaps set the process's peak beside it. A restart is ready sooner.
 */
const START_MEMORY_AFTER_MS = 1_000;

/**
 * Once the start has gone `START_MEMORY_AFTER_MS` without being ready, this thread gives back what
 * loading the program left (modules, schemas: about 57 MB of heap before, 25 after, for a pause of
 * about 0.1 s while partners are still told to wait), instead of holding it through the catch-up
 * until the start settles (docs/read-side.md, "Memory after the first start"). `check` looks again
 * when the time comes (false once the process is stopping), since `ready` may be a poll behind.
 */
function givesStartMemoryBackIfSlow(
  log: Logger,
  ready: Promise<void>,
  check: () => false | Promise<ReadinessReport>,
): void {
  const timer = setTimeout(() => {
    Promise.resolve(check())
      .then((report) => {
        if (report && !report.ready && !report.stopping) log.info(giveMemoryBack(), START_MEMORY_GIVEN_BACK);
      })
      // The memory then waits until the start settles, as it would have.
      .catch((error: unknown) => log.warn({ err: error }, 'the memory of the start was not given back'));
  }, START_MEMORY_AFTER_MS);
  timer.unref();
  ready.finally(() => clearTimeout(timer)).catch(() => undefined);
}

/** How often `untilReady` looks at first (ms), and at most once a start has taken long. */
const READY_POLL_FIRST_MS = 100;
const READY_POLL_MOST_MS = 2_000;

/**
 * Resolves once every readiness check passes, or once the process stops (a signal: `stopped`; the
 * service stopping: its report says so), so that nothing polls for the process's life. The wait
 * between two looks doubles up to 2 s: a start that is not ready for long (a read store down) is
 * looked at every 2 s, not ten times a second.
 */
export async function untilReady(readiness: Readiness, stopped: () => boolean): Promise<void> {
  for (let wait = READY_POLL_FIRST_MS; !stopped(); wait = Math.min(wait * 2, READY_POLL_MOST_MS)) {
    const report = await readiness.check();
    if (report.ready || report.stopping) return;
    await new Promise((r) => setTimeout(r, wait));
  }
}

/**
 * Once the first start has settled (the read models built from the log, and the sandbox seeded and
 * projected where this process seeds it), this thread and each role thread collect their garbage and
 * give the freed pages back to the system: what the catch-up took, hundreds of MB that V8 would keep
 * for a minute or more (docs/read-side.md, "Memory after the first start"). Each thread logs its heap
 * before and after.
 */
async function giveCatchUpMemoryBack(log: Logger, threads: (RoleThread | undefined)[]): Promise<void> {
  log.info(giveMemoryBack(), CATCH_UP_MEMORY_GIVEN_BACK);
  for (const thread of threads) {
    // A thread that is not running (started again after it died) has a new heap anyway.
    await thread?.call('giveMemoryBack').catch((error: unknown) => {
      if (!(error instanceof ThreadUnavailableError)) throw error;
    });
  }
}

/**
 * The sandbox seeder: a component only so that it shares the process's event store and stops (between
 * two commands) before the store closes. `run` is called once the service listens.
 */
function sandboxSeeder(): Component & { run(port: number): Promise<SeedResult | undefined> } {
  let ctx: ServiceContext | undefined;
  const abort = new AbortController();
  let running: Promise<unknown> | undefined;
  return {
    name: 'sandbox-seeder',
    roles: ['api'],
    start(c) {
      ctx = c;
    },
    async stop() {
      abort.abort();
      await running?.catch(() => undefined);
    },
    run(port) {
      const c = ctx;
      if (!c) return Promise.reject(new Error('the sandbox seeder was not started'));
      const work = seedWhenReady(c, port, abort.signal);
      running = work;
      return work.catch((error: unknown) => {
        if (abort.signal.aborted) return undefined;
        throw error;
      });
    },
  };
}

const pause = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        reject(signal.reason);
      },
      { once: true },
    );
  });

async function seedWhenReady(ctx: ServiceContext, port: number, signal: AbortSignal): Promise<SeedResult> {
  const log = ctx.logger.child({ component: 'sandbox' });
  // Seeding starts once the read models have caught up with the store as it was, so /readyz keeps
  // meaning "the read models were built at start" and is never held back by the seeding.
  while (!(await ctx.readiness.check()).ready) await pause(100, signal);
  const { seedProgress, seedSandbox } = await seeding();
  const progress = seedProgress({
    bar: true,
    onStart: () => log.info({ size: ctx.config.sandboxSize }, 'seeding the sandbox'),
  });
  const result = await seedSandbox({
    store: ctx.eventStore,
    secretKey: ctx.config.secretKey,
    abandonAfterMs: ctx.config.abandonAfterMs,
    size: ctx.config.sandboxSize,
    signal,
    onProgress: progress.onProgress,
  }).finally(progress.stop);
  if (result.outcome === 'seeded') {
    log.info(
      { size: result.size, counts: result.counts, events: result.events_written, seconds: result.seconds },
      'sandbox seeded',
    );
  }
  await readModelsCaughtUp(`http://127.0.0.1:${port}`, ctx.config.operatorToken, signal, log);
  return result;
}

/**
 * Waits until every projection has applied every event (the admin API's lag), so the sample request
 * printed next answers with the sandbox data. Through HTTP: the projector belongs to the read-side
 * component, and its admin route is the one place that reports its lag.
 */
async function readModelsCaughtUp(base: string, token: string, signal: AbortSignal, log: Logger) {
  const deadline = Date.now() + 5 * 60_000;
  for (;;) {
    const response = await fetch(`${base}/admin/v1/projections`, {
      headers: { authorization: `Bearer ${token}` },
      signal,
    });
    if (response.ok) {
      const { projections } = (await response.json()) as {
        projections: { state: string; lag_events: number }[];
      };
      if (projections.every((p) => p.state === 'live' && p.lag_events === 0)) return;
    }
    if (Date.now() > deadline) {
      log.warn('the read models have not caught up with the sandbox after 5 minutes');
      return;
    }
    await pause(200, signal);
  }
}
