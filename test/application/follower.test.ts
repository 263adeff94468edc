/**
 * A follower of rarely written streams on EventStoreDB (modelled around the embedded store:
 * test/support/esdb-server-model.ts): it moves on with the server's checkpoints, and `settle` reads the
 * head and searches only what lies after the follower's position, then says it has seen the log up to
 * that head (application/follower.ts).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { createFollower } from '../../application/follower.ts';
import type { RecordedEvent } from '../../eventstore/port.ts';
import { openSqliteEventStore } from '../../eventstore/sqlite.ts';
import { esdbServerModel, RECORD_BYTES } from '../support/esdb-server-model.ts';
import { until } from '../support/probes.ts';
import { rawEvent } from '../support/raw-events.ts';

async function modelled(t: ExecutionContext) {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-follower-'));
  const server = esdbServerModel(await openSqliteEventStore(path.join(dir, 'events.db')));
  t.teardown(async () => {
    await server.close();
    await rm(dir, { recursive: true, force: true });
  });
  const others = (n: number) =>
    server.append(
      `other-${n}`,
      Array.from({ length: n }, () => rawEvent('Other')),
    );
  return { server, others };
}

function followRare(t: ExecutionContext, server: ReturnType<typeof esdbServerModel>) {
  const applied: RecordedEvent[] = [];
  const follower = createFollower({
    name: 'rare',
    store: server,
    filter: { streamPrefixes: ['rare-'] },
    apply: (events) => {
      applied.push(...events);
    },
  });
  t.teardown(() => follower.stop());
  follower.start();
  return { follower, applied };
}

test('a follower of rare streams moves on with the server’s checkpoints between its events', async (t) => {
  const { server, others } = await modelled(t);
  await server.append('rare-1', [rawEvent('Rare')]);
  const { follower } = followRare(t, server);
  await follower.caughtUp;
  const head = (await others(100)).position;
  // The server checkpoints every 32 events it considers: the follower is within that of the head.
  await until('the follower moved past the others', () => follower.position() > head - 32 * RECORD_BYTES);
  t.pass();
});

test('settle reads the head and the stretch after the follower, never back to its last event', async (t) => {
  const { server, others } = await modelled(t);
  await server.append('rare-1', [rawEvent('Rare')]);
  await others(5_000);
  const { follower, applied } = followRare(t, server);
  await follower.caughtUp;
  // Fewer than a checkpoint's interval since: the follower has not been told of these yet.
  const head = (await others(10)).position;
  server.reset();
  await follower.settle();
  t.is(follower.position(), head, 'it has seen the log up to the head it read');
  t.deepEqual(server.costs, { reads: 2, scanned: 1 + 10 }, 'the head, then the ten events after it');

  // A match after the follower: settle waits until it is applied, then goes on to the head.
  const rare = await server.append('rare-2', [rawEvent('Rare')]);
  const last = (await others(3)).position;
  await follower.settle();
  t.true(applied.some((e) => e.position === rare.position));
  t.is(follower.position(), last);
  // Nothing new: no search at all, only the head.
  server.reset();
  await follower.settle();
  t.deepEqual(server.costs, { reads: 1, scanned: 1 });
});
