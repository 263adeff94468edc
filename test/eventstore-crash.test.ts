import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import test from 'ava';
import { openSqliteEventStore } from '../eventstore/sqlite.ts';

test('SIGKILL in the middle of appends: every acknowledged append is present, no partial one', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'pds-crash-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'events.db');
  const child = spawn(process.execPath, ['test/fixtures/append-until-killed.ts', file], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const acked = new Map<string, number>();
  let acks = 0;
  const lines = createInterface({ input: child.stdout });
  const exited = new Promise<NodeJS.Signals | null>((resolve) =>
    child.on('exit', (_code, signal) => resolve(signal)),
  );
  await new Promise<void>((resolve) => {
    lines.on('line', (line) => {
      const [, stream, revision] = line.split(' ');
      acked.set(stream, Number(revision));
      acks += 1;
      // Kill it mid-stream, once it has acknowledged a good number of appends.
      if (acks === 2_000) {
        child.kill('SIGKILL');
        resolve();
      }
    });
  });
  t.is(await exited, 'SIGKILL');

  const store = await openSqliteEventStore(file);
  t.teardown(() => store.close());
  for (const [stream, revision] of acked) {
    const events = await store.readStream(stream);
    // Every acknowledged event is there (there may be more: appended but killed before the ack printed).
    t.true(
      events.length >= revision + 1,
      `${stream}: ${events.length} events, acked up to revision ${revision}`,
    );
    // No partial batch: each append of 3 events is all there or not at all, in order.
    t.is(events.length % 3, 0, `${stream} holds a partial append`);
    for (let i = 0; i < events.length; i += 3) {
      const parts = events.slice(i, i + 3).map((e) => e.data as { batch: number; k: number });
      t.deepEqual(
        parts.map((d) => d.k),
        [0, 1, 2],
      );
      t.true(parts.every((d) => d.batch === parts[0].batch));
    }
  }
  const all = await store.readAll();
  for (let i = 1; i < all.length; i++) t.true(all[i].position > all[i - 1].position);
});
