/** What the backup tests share: temporary directories, and a data dir of one event. */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { ExecutionContext } from 'ava';
import { openSqliteEventStore } from '../../eventstore/sqlite.ts';
import { rawEvent } from '../support/raw-events.ts';

/** A directory removed when the test ends. */
export async function tempDir(t: ExecutionContext, prefix: string): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), prefix));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** A data dir whose `events.db` holds one event. */
export async function oneEventDataDir(t: ExecutionContext, prefix: string): Promise<string> {
  const dir = await tempDir(t, prefix);
  const store = await openSqliteEventStore(path.join(dir, 'events.db'));
  await store.append('thing-1', [rawEvent('ThingCreated')]);
  await store.close();
  return dir;
}
