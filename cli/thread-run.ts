/**
 * A role thread's program (see `role-thread.ts`; `thread-main.ts` loads it): the role's components on
 * the parent's configuration, without an HTTP listener. It reports when it started, its readiness
 * checks whenever they change and its `pds_*` metrics every second (so that a scrape of the parent
 * never waits for a busy thread); it answers the calls its role offers (the projector's status and
 * rebuilds); on `stop` it stops its components, closes its connections and ends.
 */
import { readlinkSync } from 'node:fs';
import { getPriority, setPriority } from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import { systemClock } from '../domain/clock.ts';
import { type Component, createService } from './compose.ts';
import { configuredLogger } from './logger.ts';
import { CATCH_UP_MEMORY_GIVEN_BACK, giveMemoryBack } from './memory.ts';
import {
  type FromThread,
  type ThreadData,
  type ThreadRole,
  type ToThread,
  threadLabel,
} from './role-thread.ts';

/** How often the readiness checks are run to see whether they changed. */
const READINESS_EVERY_MS = 250;
/** How often the thread sends its metrics (as stale as a scrape of the parent may find them). */
const METRICS_EVERY_MS = 1_000;

/**
 * How much lower than the process the projector thread runs once ready: when both cores are busy, the
 * APIs and the dispatcher go first, and the read models catch up in larger batches. Not before: the
 * catch-up at start is what `/readyz` waits for (docs/operations.md, "Threads").
 */
const PROJECTOR_NICE_INCREMENT = 10;

/** A role's components on this thread, the calls the parent may make of them once started, and how much lower its CPU priority is once ready. */
interface ThreadProgram {
  components: Component[];
  methods: Record<string, (...args: never[]) => Promise<unknown>>;
  niceIncrement?: number;
}

/** Each role's modules are loaded only on its own thread. */
const programs: Record<ThreadRole, () => Promise<ThreadProgram>> = {
  async dispatcher() {
    const { dispatcherComponents, createTimers } = await import('./dispatcher-components.ts');
    const { shard } = workerData as ThreadData;
    return { components: dispatcherComponents({}, systemClock, createTimers(), shard), methods: {} };
  },
  async delivery() {
    const { deliveryComponents } = await import('./delivery-components.ts');
    return { components: deliveryComponents((workerData as ThreadData).shard), methods: {} };
  },
  async projector() {
    const { projectorThreadSide } = await import('./read-side.ts');
    const shared: Parameters<typeof projectorThreadSide>[0] = {};
    const { leaseOwner } = workerData as ThreadData;
    const projector = () => {
      if (!shared.projector) throw new Error('the projector has not started');
      return shared.projector;
    };
    return {
      components: [projectorThreadSide(shared, leaseOwner)],
      niceIncrement: PROJECTOR_NICE_INCREMENT,
      methods: {
        status: () => projector().status(),
        rebuild: (name: string) => projector().rebuild(name),
      },
    };
  },
};

const port = parentPort;
if (!port) throw new Error('thread-run.ts runs as a worker thread of `pds serve --role all`');
const send = (message: FromThread) => port.postMessage(message);

const { role, config, eventStore } = workerData as ThreadData;
const program = await programs[role]();
/**
 * The calls the parent may make: the role's, and one every thread offers, made once the first start
 * has settled (`pds serve`; docs/read-side.md, "Memory after the first start").
 */
const methods: ThreadProgram['methods'] = {
  ...program.methods,
  giveMemoryBack: async () => {
    const given = giveMemoryBack();
    service.logger.info(given, CATCH_UP_MEMORY_GIVEN_BACK);
    return given;
  },
};
const service = createService(config, {
  // A delivery thread runs a part of the dispatcher's components.
  role: role === 'delivery' ? 'dispatcher' : role,
  components: program.components,
  eventStoreOptions: eventStore,
  logger: configuredLogger(config).child({ thread: threadLabel(role, (workerData as ThreadData).shard) }),
  listen: false,
});

/**
 * Lowers this thread's CPU priority (on Linux a nice value is per thread, and `/proc/thread-self`
 * names the thread); elsewhere, or where the system refuses, the thread keeps the process's.
 */
function lowerPriority(increment: number): void {
  try {
    const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
    const nice = Math.min(19, getPriority(tid) + increment);
    setPriority(tid, nice);
    service.logger.info({ nice }, `${role} thread ready: now at a lower CPU priority`);
  } catch (error) {
    service.logger.info({ err: error }, `${role} thread keeps the process's CPU priority`);
  }
}

/**
 * Sends the readiness checks when they changed since last sent (every 250 ms, once started); the first
 * time all pass, lowers the thread's priority if its role asks for it.
 */
let reported = '';
let readiness: NodeJS.Timeout | undefined;
let lowered = false;
async function reportReadiness(): Promise<void> {
  const { checks, impacts } = await service.readiness.check();
  // With each check's impact: the parent's `/readyz` weighs them as this thread's role does.
  const states = Object.fromEntries(
    Object.entries(checks).map(([name, state]) => [
      name,
      { ok: state === 'standby' ? state : state === 'ok', impact: impacts[name] },
    ]),
  );
  const text = JSON.stringify(states);
  if (text === reported) return;
  reported = text;
  // Lowered before the parent hears the thread is ready: its `/readyz` 200 finds the priority set.
  if (program.niceIncrement && !lowered && Object.values(states).every((s) => s.ok)) {
    lowered = true;
    lowerPriority(program.niceIncrement);
  }
  send({ type: 'readiness', checks: states });
}

/**
 * Sends this thread's `pds_*` metrics (the parent's process metrics already cover the process); a
 * collect that fails sends nothing this time rather than ending the thread.
 */
let metrics: NodeJS.Timeout | undefined;
async function reportMetrics(): Promise<void> {
  const all = await service.registry.getMetricsAsJSON().catch(() => undefined);
  if (all) send({ type: 'metrics', metrics: all.filter((m) => m.name.startsWith('pds_')) });
}

/** Runs a call and sends its result; a failed call answers with its message, the thread goes on. */
async function answer(id: number, method: string, args: unknown[]): Promise<void> {
  try {
    const run = methods[method];
    if (!run) throw new Error(`the ${role} thread offers no ${method}`);
    send({ type: 'result', id, ok: true, value: await run(...(args as never[])) });
  } catch (error) {
    send({ type: 'result', id, ok: false, message: error instanceof Error ? error.message : String(error) });
  }
}

port.on('message', async (message: ToThread) => {
  if (message.type === 'call') {
    await answer(message.id, message.method, message.args);
  } else if (message.type === 'stop') {
    clearInterval(readiness);
    clearInterval(metrics);
    await service.stop();
    process.exit(0); // ends this thread only
  }
});

await service.start();
// The checks before `started`: the parent is not ready on a thread that has not told them yet.
await reportReadiness();
readiness = setInterval(reportReadiness, READINESS_EVERY_MS);
await reportMetrics();
metrics = setInterval(reportMetrics, METRICS_EVERY_MS);
send({ type: 'started' });
