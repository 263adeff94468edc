/**
 * The embedded store's row limits (eventstore/sqlite/rows.ts): written into the SQL, rounded up to a
 * power of two, never bound (SQLite prepares a statement with a bound `LIMIT ?` again at every
 * execution), and the rows read trimmed to the count asked.
 */
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import test from 'ava';
import { limitSql, withinLimit } from '../eventstore/sqlite/rows.ts';
import { createSqliteEventStore } from '../eventstore/sqlite.ts';
import { rawEvent } from './support/raw-events.ts';

test('a limit is SQL text, rounded up to a power of two; none when missing or negative', (t) => {
  t.is(limitSql(undefined), '');
  t.is(limitSql(-1), '');
  t.is(limitSql(0), ' LIMIT 0');
  t.is(limitSql(1), ' LIMIT 1');
  t.is(limitSql(3), ' LIMIT 4');
  t.is(limitSql(64), ' LIMIT 64');
  t.is(limitSql(65), ' LIMIT 128');
  t.is(limitSql(10_001), ' LIMIT 16384');
  // A thousand different limits (a stream read up to each revision) share eleven statements.
  t.is(new Set(Array.from({ length: 1_000 }, (_, i) => limitSql(i + 1))).size, 11);
});

test('the rows read are trimmed to the count asked', (t) => {
  t.deepEqual(withinLimit([1, 2, 3, 4], 3), [1, 2, 3]);
  t.deepEqual(withinLimit([1, 2], 3), [1, 2]);
  t.deepEqual(withinLimit([1, 2], undefined), [1, 2]);
  t.deepEqual(withinLimit([1, 2], -1), [1, 2]);
  t.deepEqual(withinLimit([1, 2], 0), []);
});

test('reads of every kind answer exactly the count asked when it is not a power of two', async (t) => {
  const store = createSqliteEventStore(':memory:');
  t.teardown(() => store.close());
  for (let i = 0; i < 12; i++) await store.append(`cart-${i % 2}`, [rawEvent('CartItemAdded')]);
  t.is((await store.readStream('cart-0', { maxCount: 5 })).length, 5);
  t.deepEqual(
    (await store.readStream('cart-0', { direction: 'backwards', maxCount: 3 })).map((e) => e.revision),
    [5, 4, 3],
  );
  t.is((await store.readAll({ maxCount: 7 })).length, 7);
  t.is((await store.readAll({ maxCount: 5, filter: { streamPrefixes: ['cart-1'] } })).length, 5);
  t.is((await store.readAll({ direction: 'backwards', maxCount: 3 })).length, 3);
});

test('no statement of the embedded store binds its LIMIT', async (t) => {
  const dir = path.join(import.meta.dirname, '..', 'eventstore', 'sqlite');
  for (const file of await readdir(dir)) {
    const code = (await readFile(path.join(dir, file), 'utf8'))
      .split('\n')
      .filter((line) => !/^\s*(\*|\/\/|\/\*)/.test(line));
    const bound = code.filter((line) => /LIMIT \?/i.test(line));
    t.deepEqual(bound, [], `${file} binds a LIMIT: use limitSql (rows.ts)`);
  }
});
