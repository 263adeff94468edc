/**
 * Retention bounds the log's file (docs/operations.md, "Retention"): 60 simulated days of steady
 * idempotent writes, their records expiring after a day and the retention job run each hour, grow
 * `events.db` after the seventh day only by what the business events written meanwhile take. Those
 * share pages with the records deleted around them, and SQLite rebalances a page only once it is less
 * than a third full (btree.c, `balance()`): they take at most three times what they take in a store of
 * their own (the same business events, written alone). Without retention it grows with every record.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { createRetention } from '../application/retention.ts';
import { manualClock } from '../domain/clock.ts';
import type { EventStore, NewEvent } from '../eventstore/port.ts';
import { openSqliteEventStore } from '../eventstore/sqlite.ts';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const KEYS_PER_HOUR = 8;
const CARTS_PER_HOUR = 2;

function event(type: string, at: Date, size: number): NewEvent {
  return {
    type,
    data: { filler: 'x'.repeat(size), id: randomUUID() },
    metadata: {
      correlation_id: randomUUID(),
      causation_id: null,
      actor: { type: 'platform', id: 'test' },
      occurred_at: at.toISOString(),
      schema_version: 1,
    },
  };
}

/** The file's size once the WAL is copied into it. */
async function fileSize(store: EventStore, file: string): Promise<number> {
  // The WAL is copied into the file at close; the caller opens it again for the next hours.
  await store.close();
  return statSync(file).size;
}

test('60 days of idempotency records with a one-day TTL grow events.db after day 7 by the carts alone', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'pds-retention-size-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const clock = manualClock('2026-01-01T00:00:00.000Z');
  const files = { both: join(dir, 'events.db'), carts: join(dir, 'carts.db') };
  const open = async () => ({
    both: await openSqliteEventStore(files.both, { now: clock.now }),
    carts: await openSqliteEventStore(files.carts, { now: clock.now }),
  });
  let stores = await open();
  const sizes: Record<number, { both: number; carts: number }> = {};
  for (let day = 1; day <= 60; day++) {
    const retention = createRetention({ store: stores.both, clock });
    for (let hour = 0; hour < 24; hour++) {
      const at = clock.now();
      for (let k = 0; k < KEYS_PER_HOUR; k++) {
        const stream = `idempotency-${randomUUID()}`;
        await stores.both.append(stream, [event('IdempotencyKeyClaimed', at, 200)], {
          expectedRevision: 'no_stream',
          maxAgeMs: DAY,
        });
        await stores.both.append(stream, [event('IdempotentResponseRecorded', at, 600)], {
          expectedRevision: 0,
          maxAgeMs: DAY,
        });
      }
      for (let c = 0; c < CARTS_PER_HOUR; c++) {
        const cart = event('CartCreated', at, 400);
        const stream = `cart-${randomUUID()}`;
        await stores.both.append(stream, [cart]);
        await stores.carts.append(stream, [cart]);
      }
      clock.advance(HOUR);
      await retention.tick();
    }
    if (day === 7 || day === 60) {
      sizes[day] = {
        both: await fileSize(stores.both, files.both),
        carts: await fileSize(stores.carts, files.carts),
      };
      stores = await open();
    }
  }
  await stores.both.close();
  await stores.carts.close();
  t.log(`events.db: ${sizes[7].both} bytes after 7 days, ${sizes[60].both} after 60`);
  t.log(`the carts alone: ${sizes[7].carts} bytes after 7 days, ${sizes[60].carts} after 60`);
  const cartsGrew = sizes[60].carts - sizes[7].carts;
  const grew = sizes[60].both - sizes[7].both;
  t.log(`from day 7 to day 60: events.db grew ${grew} bytes, the carts alone ${cartsGrew}`);
  t.true(cartsGrew > 0);
  // A few pages of slack (4 KiB each): the live records of the last day fall differently on pages.
  t.true(grew <= 3 * cartsGrew + 16 * 4_096, `${grew} > 3 × ${cartsGrew}`);
});
