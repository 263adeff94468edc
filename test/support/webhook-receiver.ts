/**
 * A real HTTP receiver for webhook tests (no mocks): listens on 127.0.0.1, records every request with
 * its raw body and headers, and answers as the test scripts it — a status, a delay, `Retry-After`, a
 * connection reset — per request, in order, then with the default.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { ExecutionContext } from 'ava';

export interface ReceivedWebhook {
  headers: IncomingHttpHeaders;
  raw: Buffer;
  // biome-ignore lint/suspicious/noExplicitAny: bodies are checked field by field
  body: any;
  /** `performance.now()` when the body was complete. */
  receivedAt: number;
  path: string;
}

export type Answer =
  | {
      status: number;
      headers?: Record<string, string>;
      body?: string;
      delayMs?: number;
      /** Answers with the body it was sent, after `body` (a receiver echoing what it got). */
      echo?: boolean;
    }
  | { reset: true }
  /** Never answers (until the receiver closes). */
  | { hang: true };

export interface Receiver {
  url: string;
  received: ReceivedWebhook[];
  /** Requests received and not answered yet (nor their connection closed), now and at most so far. */
  open(): { now: number; max: number };
  /** Answers for the next requests, in order. */
  script(...answers: Answer[]): void;
  /** The answer once the script is used up (default 200). */
  setDefault(answer: Answer): void;
  /** Resolves when `count` requests have arrived (rejects after `timeoutMs`). */
  waitFor(count: number, timeoutMs?: number): Promise<ReceivedWebhook[]>;
  close(): Promise<void>;
}

export async function startReceiver(t: ExecutionContext, path = '/hooks'): Promise<Receiver> {
  const received: ReceivedWebhook[] = [];
  const queue: Answer[] = [];
  let fallback: Answer = { status: 200, body: 'ok' };
  const waiters: Array<{ count: number; resolve: () => void }> = [];
  const sockets = new Set<Socket>();
  const open = { now: 0, max: 0 };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      let body: unknown = null;
      try {
        body = JSON.parse(raw.toString('utf8'));
      } catch {
        body = raw.toString('utf8');
      }
      received.push({ headers: req.headers, raw, body, receivedAt: performance.now(), path: req.url ?? '' });
      open.now += 1;
      open.max = Math.max(open.max, open.now);
      res.once('close', () => {
        open.now -= 1;
      });
      for (const w of [...waiters]) if (received.length >= w.count) w.resolve();
      const answer = queue.shift() ?? fallback;
      if ('reset' in answer) {
        req.socket.destroy();
        return;
      }
      if ('hang' in answer) return;
      const send = () => {
        res.writeHead(answer.status, { 'content-type': 'text/plain', ...answer.headers });
        res.end(`${answer.body ?? ''}${answer.echo ? raw.toString('utf8') : ''}`);
      };
      if (answer.delayMs) setTimeout(send, answer.delayMs);
      else send();
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  t.teardown(close);
  return {
    url: `http://127.0.0.1:${port}${path}`,
    received,
    open: () => ({ ...open }),
    script: (...answers) => queue.push(...answers),
    setDefault(answer) {
      fallback = answer;
    },
    waitFor(count, timeoutMs = 10_000) {
      if (received.length >= count) return Promise.resolve(received.slice());
      return new Promise((resolve, reject) => {
        const waiter = {
          count,
          resolve: () => {
            clearTimeout(timer);
            waiters.splice(waiters.indexOf(waiter), 1);
            resolve(received.slice());
          },
        };
        const timer = setTimeout(() => {
          waiters.splice(waiters.indexOf(waiter), 1);
          reject(new Error(`receiver got ${received.length} of ${count} requests in ${timeoutMs} ms`));
        }, timeoutMs);
        waiters.push(waiter);
      });
    },
    close,
  };
}

/** The revisions received for each (subscription, cart) of the test bodies (`{hook, cart, revision}`), in the order received. */
export function revisionsByQueue(received: ReceivedWebhook[]): Map<string, number[]> {
  const byQueue = new Map<string, number[]>();
  for (const r of received) {
    const key = `${r.body.hook}/${r.body.cart}`;
    byQueue.set(key, [...(byQueue.get(key) ?? []), r.body.revision as number]);
  }
  return byQueue;
}
