/**
 * The webhook benches' throughput baselines (bench/webhook.ts, bench/webhook-fanout.ts): loops that sign and POST the same body to the
 * receiver at the dispatcher's concurrency, timed and with this thread's CPU counted.
 */
import { randomUUID } from 'node:crypto';
import { Agent } from 'node:http';
import got from 'got';
import { deliverOnce } from '../webhooks/deliver.ts';
import { webhookHeaders } from '../webhooks/signing.ts';
import type { Receiver } from './webhook-receiver.ts';

/** The dispatcher's default per-subscription concurrency (dispatcher/delivery-worker.ts). */
const CONCURRENCY = 8;

/** What a loop posts: `total` times `body`, signed with the subscription's `secret`, `concurrency` at once. */
export interface Posts {
  secret: string;
  body: string;
  total: number;
  /** Requests open at once. Default: one subscription's (`CONCURRENCY`). */
  concurrency?: number;
}

/** This thread's CPU time (user and system) since `from`, in microseconds. */
export const cpuSince = (from: NodeJS.CpuUsage): number => {
  const used = process.threadCpuUsage(from);
  return used.user + used.system;
};

/**
 * `total` POSTs by `concurrency` loops, each signing the body anew (a fresh webhook id and time) and
 * sending it with `post`; timed, and this thread's CPU counted, from the first request to the
 * receiver's last receipt.
 */
async function postLoop(
  receiver: Receiver,
  { secret, body, total, concurrency = CONCURRENCY }: Posts,
  post: (headers: Record<string, string>) => Promise<unknown>,
): Promise<{ perS: number; cpuUsPerPost: number }> {
  const before = receiver.count();
  const start = performance.now();
  const cpu = process.threadCpuUsage();
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < total) {
        next += 1;
        const headers = webhookHeaders({
          authToken: 'bench',
          secret,
          webhookId: randomUUID(),
          attempt: 1,
          body,
          now: new Date(),
        });
        await post(headers);
      }
    }),
  );
  await receiver.waitFor(before + total);
  return { perS: total / ((performance.now() - start) / 1000), cpuUsPerPost: cpuSince(cpu) / total };
}

/** The baseline: a raw signed-POST loop, same receiver, same concurrency, fresh connections. */
export function rawPosts(receiver: Receiver, posts: Posts) {
  const agent = new Agent({ keepAlive: false });
  return postLoop(receiver, posts, (headers) =>
    got.post(receiver.url, { body: posts.body, headers, agent: { http: agent }, retry: { limit: 0 } }),
  );
}

/**
 * The dispatcher's send path alone (`deliverOnce`: the URL check, the pinned lookup, the timeout, the
 * excerpt of the answer) in the same loop: what the dispatcher's durable bookkeeping costs is the
 * difference between this and the drain.
 */
export function sendOnly(receiver: Receiver, posts: Posts) {
  return postLoop(receiver, posts, (headers) =>
    deliverOnce({ url: receiver.url, body: posts.body, headers, timeoutMs: 10_000, allowPrivate: true }),
  );
}
