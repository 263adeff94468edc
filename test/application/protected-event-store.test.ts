import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test from 'ava';
import { createCustomerData } from '../../application/customer-data.ts';
import type { CustomerKeyStore } from '../../application/customer-keys.ts';
import { protectCustomerData } from '../../application/protected-event-store.ts';
import { openSqliteKeyStore } from '../../eventstore/key-store-sqlite.ts';
import type { RecordedEvent } from '../../eventstore/port.ts';
import { openSqliteEventStore } from '../../eventstore/sqlite.ts';
import { until } from '../support/probes.ts';

test('a persistent message whose data does not open goes back to its group only after a pause growing with its retries', async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'pds-protected-'));
  const log = await openSqliteEventStore(path.join(dir, 'events.db'));
  const keys = openSqliteKeyStore(path.join(dir, 'keys.db'));
  t.teardown(async () => {
    await keys.close();
    await log.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const secretKey = randomBytes(32);
  const writer = protectCustomerData(log, createCustomerData(keys, secretKey));
  const uuid = randomUUID();
  await writer.append(`cart-${uuid}`, [
    {
      id: randomUUID(),
      type: 'CartCustomerIdentified',
      data: { email: 'ada@example.com', first_name: 'Ada', user_id: 7 },
      metadata: {
        correlation_id: 'c-1',
        causation_id: null,
        actor: { type: 'platform', id: 'p' },
        occurred_at: '2026-03-01T00:00:00.000Z',
        schema_version: 2,
      },
    },
  ]);
  // Another process, whose key store is down for its first three reads.
  let outage = 3;
  const flaky: CustomerKeyStore = {
    ...keys,
    async key(keyId) {
      if (outage > 0) {
        outage -= 1;
        throw new Error('key store unreachable');
      }
      return keys.key(keyId);
    },
  };
  const pauses: number[] = [];
  const reader = protectCustomerData(log, createCustomerData(flaky, secretKey), {
    retryDelay: (n) => 1000 * 2 ** n,
    sleep: async (ms) => {
      pauses.push(ms);
    },
  });
  await reader.createPersistentSubscription('g', { filter: { streamPrefixes: ['cart-'] } });
  const handled: RecordedEvent[] = [];
  const consumer = reader.subscribeToPersistent('g', async (m) => {
    handled.push(m.event);
    await m.ack();
  });
  t.teardown(() => consumer.stop());
  await until('the message is handled', () => handled.length === 1);
  t.deepEqual(pauses, [1000, 2000, 4000]);
  t.like(handled[0].data, { email: 'ada@example.com', first_name: 'Ada' });
  t.deepEqual(await reader.listParkedMessages('g'), []);
});
