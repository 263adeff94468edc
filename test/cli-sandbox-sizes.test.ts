/**
 * Every sandbox size seeds: the data set of each size is decided record by record through the
 * deciders, as seeding does, without writing it (`decideSandbox`), so the large sizes stay fast. Size
 * 200 once planned a cart ready for pickup at a store that only delivers, which its decider refused.
 */
import { createSecretKey } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test from 'ava';
import { sandboxCounts } from '../cli/sandbox/generate.ts';
import { decideSandbox, seedSandbox } from '../cli/sandbox/seed.ts';
import { MAX_SANDBOX_SIZE } from '../cli/sandbox/sizes.ts';
import { manualClock } from '../domain/clock.ts';
import { openSqliteEventStore } from '../eventstore/sqlite.ts';

const HOUR = 3_600_000;
const KEY = createSecretKey(Buffer.alloc(32, 5));
const REFERENCE = '2026-03-01T12:00:00.000Z';

test('deciding a size writes nothing and counts the events seeding that size writes', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-sandbox-sizes-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const store = await openSqliteEventStore(path.join(dir, 'events.db'));
  t.teardown(() => store.close());
  const clock = manualClock(REFERENCE);
  const seeded = await seedSandbox({ store, secretKey: KEY, abandonAfterMs: 6 * HOUR, size: 4, clock });
  const decided = await decideSandbox({
    secretKey: KEY,
    size: 4,
    reference: REFERENCE,
    abandonAfterMs: 6 * HOUR,
  });
  t.is(decided, seeded.events_written);
});

for (const size of [1, 2, 3, 7, 19, 50, 133, 200, MAX_SANDBOX_SIZE]) {
  test(`the size-${size} sandbox is accepted by every decider`, async (t) => {
    t.timeout(120_000);
    const events = await decideSandbox({
      secretKey: KEY,
      size,
      reference: REFERENCE,
      abandonAfterMs: 6 * HOUR,
    });
    // At least one event per record: the data set was decided, not skipped.
    const counts = sandboxCounts(size);
    const records = Object.values(counts).reduce((a, b) => a + b, 0);
    t.true(events >= records, `${events} events for ${records} records`);
  });
}
