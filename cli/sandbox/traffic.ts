/**
 * One run of `pds sandbox traffic`: a client of the running service (PDS_URL, PDS_OPERATOR_TOKEN) that
 * finds the sandbox's partners, issues the store menu feed partner a key for the run, sends cart
 * requests at a steady rate until the duration is over or it is interrupted, revokes the key, and
 * reports what it did.
 */
import { SingleBar } from 'cli-progress';
import { type AdminClient, CliError, createAdminClient, EXIT } from '../client.ts';
import { plural, printError } from '../terminal.ts';
import { sandboxPartnerIds } from './generate.ts';
import { emptySummary, TrafficCarts, type TrafficPartner, type TrafficSummary } from './traffic-carts.ts';

export type { TrafficSummary } from './traffic-carts.ts';

export interface TrafficOptions {
  /** Requests per second. */
  rate: number;
  /** How long to run; undefined: until SIGINT or SIGTERM. */
  durationMs: number | undefined;
  /** The seed the sandbox was made with, which names its partners. */
  seed: number;
  /** Show a progress bar (on stderr, when it is a terminal and there is a duration). */
  bar: boolean;
}

/** Requests in flight at once, at most. */
const MAX_IN_FLIGHT = 16;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

/** Runs the traffic and answers its summary; throws what stopped it (an unreachable service, say). */
export async function runTraffic(options: TrafficOptions): Promise<TrafficSummary> {
  const client = await createAdminClient();
  const ids = sandboxPartnerIds(options.seed);
  const { stores, operator } = await findSandbox(client, ids, options.seed);
  const issued = await client.request<{ key: { key_id: string }; api_key: string }>(
    'POST',
    `/admin/v1/partners/${ids.store_menu_feed}/keys`,
    {},
  );
  const summary = emptySummary(options.rate);
  const carts = new TrafficCarts({ client, stores, operator, menuKey: issued.api_key, summary });
  const began = performance.now();
  try {
    await drive(carts, summary, options, began);
  } finally {
    await client
      .request('DELETE', `/admin/v1/partners/${ids.store_menu_feed}/keys/${issued.key.key_id}`)
      .catch((err: unknown) => {
        printError(`could not revoke the traffic key ${issued.key.key_id}: ${(err as Error).message}`);
      });
  }
  summary.seconds = Math.round(performance.now() - began) / 1000;
  summary.rate_per_second = Math.round((summary.requests / Math.max(summary.seconds, 0.001)) * 10) / 10;
  return summary;
}

/** The stores the sandbox menu feed partner covers, and the store operator partner if it is there. */
async function findSandbox(
  client: AdminClient,
  ids: ReturnType<typeof sandboxPartnerIds>,
  seed: number,
): Promise<{ stores: number[]; operator: TrafficPartner | undefined }> {
  const menuFeed = await client
    .request<{ partner: TrafficPartner }>('GET', `/admin/v1/partners/${ids.store_menu_feed}`)
    .catch((err: unknown) => {
      if (err instanceof CliError && err.exitCode === EXIT.notFound) {
        throw new CliError(
          `no sandbox (seed ${seed}) on ${client.baseUrl}: run pds sandbox seed first`,
          EXIT.notFound,
        );
      }
      throw err;
    });
  const operator = await client
    .request<{ partner: TrafficPartner }>('GET', `/admin/v1/partners/${ids.store_operator}`)
    .then((r) => r.partner)
    .catch(() => undefined);
  const stores = menuFeed.partner.store_ids;
  if (stores.length === 0) throw new CliError('the sandbox menu feed partner covers no store', EXIT.failed);
  return { stores, operator };
}

/**
 * Starts a request every 1/rate seconds until the duration is over or SIGINT/SIGTERM arrives, then
 * waits for those in flight. A request that throws (the service unreachable) stops the run.
 */
async function drive(
  carts: TrafficCarts,
  summary: TrafficSummary,
  options: TrafficOptions,
  began: number,
): Promise<void> {
  const { durationMs } = options;
  let stopped = false;
  const stop = () => {
    stopped = true;
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  const bar =
    durationMs !== undefined && options.bar && process.stderr.isTTY
      ? new SingleBar({
          format: 'traffic [{bar}] {value}/{total} s | {requests} requests | {failed} failed',
          hideCursor: true,
          stream: process.stderr,
        })
      : undefined;
  bar?.start(Math.round((durationMs ?? 0) / 1000), 0, { requests: 0, failed: 0 });
  const inflight = new Set<Promise<void>>();
  let fatal: unknown;
  try {
    const interval = 1000 / options.rate;
    let next = performance.now();
    while (
      !stopped &&
      fatal === undefined &&
      (durationMs === undefined || performance.now() - began < durationMs)
    ) {
      // At most 16 requests at once; a cart has one request in flight at a time.
      let action = inflight.size < MAX_IN_FLIGHT ? carts.nextAction() : undefined;
      for (let tries = 0; action === undefined && inflight.size < MAX_IN_FLIGHT && tries < 10; tries++)
        action = carts.nextAction();
      if (action) {
        const { cart } = action;
        if (cart) cart.busy = true;
        const run = action
          .run()
          .catch((err: unknown) => {
            fatal = err;
          })
          .finally(() => {
            if (cart) cart.busy = false;
            inflight.delete(run);
          });
        inflight.add(run);
      }
      bar?.update(Math.min(Math.round((performance.now() - began) / 1000), bar.getTotal()), {
        requests: summary.requests,
        failed: summary.failed,
      });
      next += interval;
      await sleep(next - performance.now());
    }
    await Promise.allSettled(inflight);
  } finally {
    bar?.stop();
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
  }
  if (fatal !== undefined) throw fatal;
}

/** The summary as lines for a person. */
export function describeTraffic(summary: TrafficSummary): string {
  const c = summary.carts;
  const failures = Object.entries(summary.failures)
    .map(([k, n]) => `  ${n} × ${k}\n`)
    .join('');
  return (
    `traffic for ${summary.seconds} s at ${summary.target_rate_per_second}/s: ${plural(summary.requests, 'request')} (${summary.rate_per_second}/s): ` +
    `${summary.ok} ok, ${summary.refused} refused as expected (a checkout mode the store does not offer), ${summary.failed} failed\n` +
    `carts created ${c.created}, items added ${c.items_added}, customers identified ${c.customers_identified}, ` +
    `checked out ${c.checked_out}, status moves ${c.status_moves} (${plural(c.reviewed, 'review')}), left idle ${c.left_idle}\n` +
    failures
  );
}
