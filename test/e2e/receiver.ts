/**
 * The partner's side of webhooks: an HTTP server that checks each request the way
 * docs/webhooks.md, "Requests" tells a receiver to: the bearer auth token, then the HMAC-SHA256
 * signature over `<timestamp>:<raw body>` keyed by the `whsec_…` secret, compared in constant time on
 * the raw bytes, and a timestamp at most 5 minutes old. Written from that page with node:crypto
 * alone, not with the service's signing code, so a mismatch between the two shows up here.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export interface Delivery {
  path: string;
  headers: IncomingHttpHeaders;
  raw: Buffer;
  // biome-ignore lint/suspicious/noExplicitAny: bodies are checked field by field
  body: any;
  /** Why the request was refused (401), or null when it verified and was answered 200. */
  refused: string | null;
}

export interface Receiver {
  /** The URL of `path` as the service should call it (through `host`). */
  urlOf(path: string): string;
  /** The credentials a subscription's requests to `path` must carry. */
  expect(path: string, credentials: { authToken: string; secret: string }): void;
  /** Every request so far, in arrival order. */
  deliveries(): Delivery[];
  close(): Promise<void>;
}

const REPLAY_WINDOW_SECONDS = 300;

/** Why a request is not one the subscription sent, or null when it verifies. */
export function refusal(
  headers: IncomingHttpHeaders,
  raw: Buffer,
  credentials: { authToken: string; secret: string } | undefined,
  nowMs = Date.now(),
): string | null {
  if (!credentials) return 'no subscription for this path';
  if (headers.authorization !== `Bearer ${credentials.authToken}`) return 'wrong Authorization';
  const timestamp = String(headers['x-service-request-timestamp'] ?? '');
  if (!/^\d+$/.test(timestamp)) return 'no X-Service-Request-Timestamp';
  if (Math.abs(nowMs / 1000 - Number(timestamp)) > REPLAY_WINDOW_SECONDS) return 'stale timestamp';
  const signature = String(headers['x-service-signature'] ?? '');
  if (!/^[0-9a-f]{64}$/.test(signature)) return 'no hex X-Service-Signature';
  const expected = createHmac('sha256', Buffer.from(credentials.secret, 'utf8'))
    .update(`${timestamp}:`, 'utf8')
    .update(raw)
    .digest();
  if (!timingSafeEqual(Buffer.from(signature, 'hex'), expected)) return 'bad signature';
  return null;
}

/**
 * Listens on `bind` (port chosen by the system). Verified requests get 200, others 401, so a
 * signature the service got wrong is retried by the service and seen as refused here.
 */
export async function startReceiver(host: string, bind: string): Promise<Receiver> {
  const expected = new Map<string, { authToken: string; secret: string }>();
  const received: Delivery[] = [];
  const sockets = new Set<Socket>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      const path = req.url ?? '';
      // Verified before any parsing, on the bytes as they came.
      const refused = req.method === 'POST' ? refusal(req.headers, raw, expected.get(path)) : 'not a POST';
      let body: unknown = null;
      try {
        body = JSON.parse(raw.toString('utf8'));
      } catch {
        body = raw.toString('utf8');
      }
      received.push({ path, headers: req.headers, raw, body, refused });
      res.writeHead(refused === null ? 200 : 401, { 'content-type': 'text/plain' });
      res.end(refused === null ? 'ok' : refused);
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, bind, resolve);
  });
  const port = (server.address() as AddressInfo).port;
  const hostPart = host.includes(':') ? `[${host}]` : host;
  let closed: Promise<void> | undefined;
  return {
    urlOf: (path) => `http://${hostPart}:${port}${path}`,
    expect: (path, credentials) => void expected.set(path, credentials),
    deliveries: () => received.slice(),
    close() {
      closed ??= new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      });
      return closed;
    },
  };
}

/**
 * Where to listen when the service calls `host`: loopback for a loopback address, else every IPv4
 * interface (a container reaches the host through its bridge, not through loopback).
 */
export function bindAddressFor(host: string): string {
  return host === '127.0.0.1' || host === '::1' ? host : '0.0.0.0';
}
