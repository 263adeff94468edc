/**
 * The webhook benches' receiver (bench/webhook.ts, bench/webhook-fanout.ts): an HTTP server on this
 * thread that answers every POST 200 (or `answer`, e.g. 503 for a receiver that is down) and notes
 * when each (cart, status) body first arrived.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceiverOptions {
  /** The status every POST gets. Default 200. */
  answer?: number;
  /** Called on every POST with its (cart, status) key, its arrival time and its `X-Service-Webhook-Id`. */
  onArrival?(key: string, at: number, webhookId: string): void;
}

/** A receiver that notes when each (cart, status) body arrived. */
export async function startReceiver({ answer = 200, onArrival }: ReceiverOptions = {}) {
  const arrivals = new Map<string, number>();
  let count = 0;
  let lastBody = '';
  /**
   * Connections open, and the most at once since `resetOpenPeak`: a sender on fresh connections (as
   * the dispatcher is) has as many requests open as connections; this thread answers one at a time.
   */
  let open = 0;
  let openPeak = 0;
  const waiters: Array<{ n: number; resolve: () => void }> = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const at = performance.now();
      lastBody = Buffer.concat(chunks).toString('utf8');
      const body = JSON.parse(lastBody);
      const key = body.cart?.uuid ? `${body.cart.uuid}:${body.cart.status}` : `raw:${count}`;
      if (!arrivals.has(key)) arrivals.set(key, at);
      onArrival?.(key, at, String(req.headers['x-service-webhook-id'] ?? ''));
      count += 1;
      for (const w of [...waiters]) if (count >= w.n) w.resolve();
      res.writeHead(answer).end(answer === 200 ? 'ok' : 'down');
    });
  });
  server.on('connection', (socket) => {
    open += 1;
    openPeak = Math.max(openPeak, open);
    socket.on('close', () => {
      open -= 1;
    });
  });
  // A backlog for a fan-out's thousands of fresh connections: at Node's default (511) the overflow
  // reset connections, of the dispatcher and of the raw loop alike.
  await new Promise<void>((resolve) => server.listen({ port: 0, host: '127.0.0.1', backlog: 4096 }, resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;
  return {
    url,
    arrivals,
    count: () => count,
    /** The text of the last body received. */
    lastBody: () => lastBody,
    /** The most connections open at once since the start or the last `resetOpenPeak`. */
    openPeak: () => openPeak,
    resetOpenPeak: () => {
      openPeak = open;
    },
    waitFor(n: number, timeoutMs = 120_000): Promise<void> {
      if (count >= n) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`receiver got ${count} of ${n}`)), timeoutMs);
        waiters.push({
          n,
          resolve: () => {
            clearTimeout(timer);
            resolve();
          },
        });
      });
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

export type Receiver = Awaited<ReturnType<typeof startReceiver>>;
