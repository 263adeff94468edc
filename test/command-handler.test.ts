import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { createCommandHandler, PreconditionFailedError } from '../application/command-handler.ts';
import * as brand from '../domain/brand.ts';
import { eventRegistry } from '../domain/index.ts';
import type { EventStore } from '../eventstore/port.ts';
import { openSqliteEventStore } from '../eventstore/sqlite.ts';

const meta = {
  correlationId: 'corr-1',
  causationId: 'cause-1',
  actor: { type: 'platform' as const, id: 'test' },
  at: '2026-05-01T12:00:00.000Z',
};
const upsert = (name: string) => ({
  type: 'UpsertBrand' as const,
  brand_id: 1,
  fields: { name },
  at: meta.at,
});

async function storeFor(t: ExecutionContext): Promise<EventStore> {
  const dir = mkdtempSync(join(tmpdir(), 'pds-cmd-'));
  const store = await openSqliteEventStore(join(dir, 'events.db'));
  t.teardown(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return store;
}

test('a command is decided on the folded stream and appended with its metadata', async (t) => {
  const store = await storeFor(t);
  const commands = createCommandHandler(store, eventRegistry);
  const first = await commands.handle(brand.streamId(1), brand.decider, upsert('Kiva'), meta);
  t.is(first.revision, 0);
  t.is(first.firstPosition, first.position);
  const second = await commands.handle(brand.streamId(1), brand.decider, upsert('Kiva Confections'), meta);
  t.is(second.revision, 1);
  t.is(second.firstPosition, first.position);
  const [e] = await store.readStream(brand.streamId(1), { maxCount: 1 });
  t.deepEqual(e.metadata, {
    correlation_id: 'corr-1',
    causation_id: 'cause-1',
    actor: { type: 'platform', id: 'test' },
    occurred_at: meta.at,
    schema_version: 1,
  });
});

test('a no-op decision appends nothing and answers the current revision', async (t) => {
  const store = await storeFor(t);
  const commands = createCommandHandler(store, eventRegistry);
  const first = await commands.handle(brand.streamId(1), brand.decider, upsert('Kiva'), meta);
  const again = await commands.handle(brand.streamId(1), brand.decider, upsert('Kiva'), meta);
  t.deepEqual(again.events, []);
  t.is(again.revision, first.revision);
  t.is(again.position, first.position);
  t.is((await store.readStream(brand.streamId(1))).length, 1);
});

test('If-Match with a stale revision is refused and nothing is appended', async (t) => {
  const store = await storeFor(t);
  const commands = createCommandHandler(store, eventRegistry);
  await commands.handle(brand.streamId(1), brand.decider, upsert('A'), meta);
  await commands.handle(brand.streamId(1), brand.decider, upsert('B'), meta);
  const err = await t.throwsAsync(
    commands.handle(brand.streamId(1), brand.decider, upsert('C'), meta, { ifMatch: 0 }),
    { instanceOf: PreconditionFailedError },
  );
  t.is(err?.actual, 1);
  t.is((await store.readStream(brand.streamId(1))).length, 2);
  const ok = await commands.handle(brand.streamId(1), brand.decider, upsert('C'), meta, { ifMatch: 1 });
  t.is(ok.revision, 2);
});

test('concurrent commands on one stream re-read and re-decide: none is lost, none overwrites', async (t) => {
  const store = await storeFor(t);
  const commands = createCommandHandler(store, eventRegistry);
  const names = Array.from({ length: 30 }, (_, i) => `Brand ${i}`);
  await Promise.all(names.map((n) => commands.handle(brand.streamId(1), brand.decider, upsert(n), meta)));
  t.true(commands.conflicts() > 0, 'the writers did collide, and the collisions were retried');
  const events = await store.readStream(brand.streamId(1));
  t.is(events.length, 30);
  t.deepEqual(
    events.map((e) => e.revision),
    names.map((_, i) => i),
  );
  // Each name once, in whatever order the retries landed.
  t.deepEqual(events.map((e) => (e.data as { name: string }).name).sort(), [...names].sort());
});

test('a decider that produces an invalid event is stopped at the boundary', async (t) => {
  const store = await storeFor(t);
  const commands = createCommandHandler(store, eventRegistry);
  const broken = {
    ...brand.decider,
    decide: () => [
      { type: 'BrandUpserted' as const, data: { brand_id: -1, name: 'x', upserted_at: 'not a time' } },
    ],
  };
  await t.throwsAsync(commands.handle(brand.streamId(9), broken, upsert('x'), meta));
  t.is(await store.headPosition(), 0);
});
