/**
 * The dispatcher thread's program (see `dispatcher-thread.ts`; `dispatcher-thread-main.ts` loads it):
 * the `dispatcher` role's components on the parent's configuration, without an HTTP listener. It reports when it started, its readiness checks whenever
 * they change, and its `pds_*` metrics when asked (the parent's process metrics already cover the
 * process); on `stop` it stops its components, closes its connections and ends.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { createService } from './compose.ts';
import type { ResolvedConfig } from './config.ts';
import { dispatcherComponents } from './dispatcher-components.ts';
import type { FromThread, ToThread } from './dispatcher-thread.ts';
import { createLogger } from './logger.ts';

/** How often the readiness checks are run to see whether they changed. */
const READINESS_EVERY_MS = 250;

const port = parentPort;
if (!port) throw new Error('dispatcher-thread-run.ts runs as a worker thread of `pds serve --role all`');
const send = (message: FromThread) => port.postMessage(message);

const { config } = workerData as { config: ResolvedConfig };
const service = createService(config, {
  role: 'dispatcher',
  components: dispatcherComponents(),
  logger: createLogger(config.logLevel).child({ thread: 'dispatcher' }),
  listen: false,
});

/** Sends the readiness checks when they changed since last sent (every 250 ms, once started). */
let reported = '';
let readiness: NodeJS.Timeout | undefined;
async function reportReadiness(): Promise<void> {
  const { checks } = await service.readiness.check();
  const ok = Object.fromEntries(Object.entries(checks).map(([name, state]) => [name, state === 'ok']));
  const text = JSON.stringify(ok);
  if (text === reported) return;
  reported = text;
  send({ type: 'readiness', checks: ok });
}

port.on('message', async (message: ToThread) => {
  if (message.type === 'metrics') {
    // A collect that fails answers nothing for this scrape rather than ending the thread.
    const all = await service.registry.getMetricsAsJSON().catch(() => []);
    send({ type: 'metrics', id: message.id, metrics: all.filter((m) => m.name.startsWith('pds_')) });
  } else if (message.type === 'stop') {
    clearInterval(readiness);
    await service.stop();
    process.exit(0); // ends this thread only
  }
});

await service.start();
// The checks before `started`: the parent is not ready on a thread that has not told them yet.
await reportReadiness();
readiness = setInterval(reportReadiness, READINESS_EVERY_MS);
send({ type: 'started' });
