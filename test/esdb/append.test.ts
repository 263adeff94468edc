/**
 * Appends of the EventStoreDB adapter (eventstore/esdb/streams.ts) with the real client and no
 * server: they take the client's unary Append call (never the batch-append stream), end unavailable
 * when nothing answers, within their own timeout when the peer never replies, and close() waits for
 * them before it disposes of the client. A client that would answer a wrong expected version as a
 * success (`throwOnAppendFailure=false`) is refused, and such an answer, from the cluster double's
 * leader (test/support/esdb-cluster.ts), is the refusal it stands for. AVA fails the file on any
 * unhandled rejection.
 */
import { randomUUID } from 'node:crypto';
import { EventStoreDBClient, UnavailableError } from '@eventstore/db-client';
import { append as unaryAppend } from '@eventstore/db-client/dist/streams/appendToStream/append.js';
import { StreamsClient } from '@eventstore/db-client/generated/streams_grpc_pb.js';
import test, { type ExecutionContext } from 'ava';
import { withTimeout } from '../../eventstore/esdb/client.ts';
import { createStreams } from '../../eventstore/esdb/streams.ts';
import { toEventData } from '../../eventstore/esdb/translate.ts';
import { createEsdbEventStore } from '../../eventstore/esdb.ts';
import {
  EventStoreError,
  EventStoreUnavailableError,
  type NewEvent,
  WrongExpectedVersionError,
} from '../../eventstore/port.ts';
import { startClusterDouble } from '../support/esdb-cluster.ts';
import { silentPeer } from '../support/silent-peer.ts';

/** Port 1 on loopback: nothing listens, so a call fails at once with UNAVAILABLE. */
const NOWHERE = 'esdb://127.0.0.1:1?tls=false';

const event = (): NewEvent => ({
  id: randomUUID(),
  type: 'CartCreated',
  data: {},
  metadata: {
    correlation_id: randomUUID(),
    causation_id: null,
    actor: { type: 'platform', id: 'test' },
    occurred_at: '2026-01-02T03:04:05.000Z',
    schema_version: 1,
  },
});

/** A peer that never answers: the gRPC call waits for its handshake. */
async function silentServer(t: ExecutionContext): Promise<string> {
  const port = await silentPeer(t);
  // The client's own call deadline, longer than the append timeouts below, ends the call afterwards.
  return `esdb://127.0.0.1:${port}?tls=false&defaultDeadline=3000`;
}

test('withTimeout: the work’s result when in time, the timeout’s error otherwise', async (t) => {
  t.is(await withTimeout(Promise.resolve(7), 1_000, () => new Error('late')), 7);
  await t.throwsAsync(
    withTimeout(Promise.reject(new Error('own')), 1_000, () => new Error('late')),
    {
      message: 'own',
    },
  );
  const never = new Promise<never>(() => {});
  await t.throwsAsync(
    withTimeout(never, 20, () => new Error('late')),
    { message: 'late' },
  );
  // Work that fails after its timeout fired is not left as an unhandled rejection.
  const failsLater = new Promise<never>((_, reject) => setTimeout(() => reject(new Error('after')), 40));
  await t.throwsAsync(
    withTimeout(failsLater, 10, () => new Error('late')),
    { message: 'late' },
  );
  await new Promise((r) => setTimeout(r, 60));
});

test.serial(
  'an append is one unary Append call, and its failure the client’s UnavailableError',
  async (t) => {
    const store = createEsdbEventStore(NOWHERE);
    t.teardown(() => store.close());
    const proto = StreamsClient.prototype as unknown as Record<
      'append' | 'batchAppend',
      (...a: unknown[]) => unknown
    >;
    const calls: string[] = [];
    const originals = { append: proto.append, batchAppend: proto.batchAppend };
    for (const name of ['append', 'batchAppend'] as const) {
      proto[name] = function (this: unknown, ...args: unknown[]) {
        calls.push(name);
        return originals[name].apply(this, args);
      };
    }
    try {
      const err = await t.throwsAsync(store.append('cart-1', [event()]), {
        instanceOf: EventStoreUnavailableError,
      });
      // The batch path would have failed earlier, in its server-features probe, with a raw gRPC error.
      t.true(err?.cause instanceof UnavailableError);
    } finally {
      Object.assign(proto, originals);
    }
    t.deepEqual(calls, ['append']);
  },
);

test('an append nobody answers ends unavailable at its own timeout, saying it may have been written', async (t) => {
  const store = createEsdbEventStore(await silentServer(t), { appendTimeoutMs: 200 });
  t.teardown(() => store.close());
  const started = Date.now();
  await t.throwsAsync(store.append('cart-1', [event()], { expectedRevision: 3 }), {
    instanceOf: EventStoreUnavailableError,
    message: /within 200 ms; it may have been written/,
  });
  const took = Date.now() - started;
  t.true(took >= 190 && took < 2_500, `took ${took} ms`);
});

test('close() lets the appends under way settle before it disposes of the client', async (t) => {
  const store = createEsdbEventStore(await silentServer(t), { appendTimeoutMs: 300 });
  const order: string[] = [];
  const appending = store.append('cart-1', [event()]).then(
    () => order.push('append resolved'),
    (err: Error) => order.push(`append failed: ${err.name}`),
  );
  // Let the append reach the client before closing.
  await new Promise((r) => setTimeout(r, 20));
  await store.close();
  order.push('closed');
  await appending;
  t.deepEqual(order, ['append failed: EventStoreUnavailableError', 'closed']);
});

test('a connection string with throwOnAppendFailure=false is refused, naming the option, not the password', async (t) => {
  for (const url of [
    'esdb://admin:s3cret@127.0.0.1:1?tls=false&throwOnAppendFailure=false',
    'kurrentdb://127.0.0.1:1,127.0.0.1:2?nodePreference=follower&throw_on_append_failure=false',
  ]) {
    const err = t.throws(() => createEsdbEventStore(url), {
      instanceOf: EventStoreError,
      message: /throwOnAppendFailure=false is not supported/,
    });
    t.false(err?.message.includes('s3cret'), url);
  }
  // The client's default, or said outright: taken.
  await createEsdbEventStore('esdb://127.0.0.1:1?tls=false&throwOnAppendFailure=true').close();
});

test('a wrong expected version answered as success:false is a WrongExpectedVersionError, never a write', async (t) => {
  const cluster = await startClusterDouble();
  t.teardown(() => cluster.close());
  // Made as connect() would refuse to: the client then answers the server's refusal as `success: false`.
  const client = EventStoreDBClient.connectionString(
    `esdb://127.0.0.1:${cluster.leader.port}?tls=false&throwOnAppendFailure=false`,
  );
  t.teardown(() => client.dispose());
  await cluster.log.append('cart-1', [event(), event()]);
  const raw = await unaryAppend.call(client, 'cart-1', [toEventData(event())], {
    expectedRevision: 'no_stream',
    batchAppendSize: 0,
  });
  t.deepEqual(raw, { success: false, nextExpectedRevision: 1n, position: undefined });

  const streams = createStreams(client);
  const stale = await t.throwsAsync(streams.append('cart-1', [event()], { expectedRevision: 0 }), {
    instanceOf: WrongExpectedVersionError,
  });
  t.like(stale, { streamId: 'cart-1', expected: 0, actual: 1 });
  const missing = await t.throwsAsync(streams.append('cart-2', [event()], { expectedRevision: 3 }), {
    instanceOf: WrongExpectedVersionError,
  });
  t.like(missing, { streamId: 'cart-2', expected: 3, actual: 'no_stream' });
  t.is((await cluster.log.readStream('cart-1')).length, 2);
  t.is(await cluster.log.headPosition({ streamPrefixes: ['cart-2'] }), 0);
});

test('an append that starts a stream with a max age writes its $maxAge, in seconds rounded up, once', async (t) => {
  const cluster = await startClusterDouble();
  t.teardown(() => cluster.close());
  const store = createEsdbEventStore(`esdb://127.0.0.1:${cluster.leader.port}?tls=false`);
  t.teardown(() => store.close());
  await store.append('idempotency-a', [event()], { expectedRevision: 'no_stream', maxAgeMs: 90_500 });
  await store.append('idempotency-a', [event()], { expectedRevision: 0, maxAgeMs: 90_500 });
  await store.append('cart-1', [event()]);
  t.deepEqual(Object.fromEntries(cluster.metadata), { 'idempotency-a': [{ $maxAge: 91 }] });
  t.is((await cluster.log.readStream('idempotency-a')).length, 2);
});
