/**
 * docs/operations.md, "Durability of the embedded event store": the event store's connections commit
 * with `synchronous=FULL` unless `PDS_EVENT_STORE_SYNC=normal`, and the derived files (read models,
 * the dispatcher's working state, console sessions) stay on NORMAL.
 * `PRAGMA synchronous` is a setting of each connection, not of the file, so it is read back on the
 * very connections the store and the service opened: 2 is FULL, 1 is NORMAL.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import test, { type ExecutionContext } from 'ava';
import { createService } from '../cli/compose.ts';
import { loadConfig } from '../cli/config.ts';
import { createLogger } from '../cli/logger.ts';
import { openEventStore } from '../eventstore/index.ts';
import { openLog } from '../eventstore/sqlite/log.ts';

const FULL = 2;
const NORMAL = 1;

async function tempDir(t: ExecutionContext): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-sync-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

const synchronousOf = (db: DatabaseSync) =>
  (db.prepare('PRAGMA synchronous').get() as { synchronous: number }).synchronous;

/**
 * Every connection this process opens from now on (each sets its pragmas through `exec` first):
 * the service's own, seen as they are, without a way into the adapters made for the test.
 */
function recordConnections(t: ExecutionContext): Set<DatabaseSync> {
  const opened = new Set<DatabaseSync>();
  const exec = DatabaseSync.prototype.exec;
  DatabaseSync.prototype.exec = function (this: DatabaseSync, sql: string) {
    opened.add(this);
    return exec.call(this, sql);
  };
  t.teardown(() => {
    DatabaseSync.prototype.exec = exec;
  });
  return opened;
}

test.serial('the embedded store commits with synchronous=FULL unless asked for normal', async (t) => {
  const dir = await tempDir(t);
  const durable = openLog(path.join(dir, 'events.db'));
  t.is(synchronousOf(durable.db), FULL);
  durable.close();
  const normal = openLog(path.join(dir, 'events.db'), { synchronous: 'normal' });
  t.is(synchronousOf(normal.db), NORMAL);
  normal.close();
  const full = openLog(path.join(dir, 'events.db'), { synchronous: 'full' });
  t.is(synchronousOf(full.db), FULL);
  full.close();
});

test.serial('openEventStore passes the mode to the embedded store', async (t) => {
  const dir = await tempDir(t);
  const opened = recordConnections(t);
  const store = await openEventStore(`sqlite:${path.join(dir, 'events.db')}`, { synchronous: 'normal' });
  t.deepEqual([...opened].map(synchronousOf), [NORMAL]);
  await store.close();
});

/** The service's connections after it started, by file name, with their `PRAGMA synchronous`. */
async function serviceConnections(t: ExecutionContext, env: Record<string, string>) {
  const dir = await tempDir(t);
  const config = await loadConfig({
    PDS_DATA_DIR: dir,
    PORT: '0',
    PDS_SANDBOX: '0',
    // On this thread, where the connections can be seen; the threads open theirs through the same
    // composition root (`cli/thread-run.ts`) with the same config.
    PDS_DISPATCHER_THREAD: '0',
    PDS_PROJECTOR_THREAD: '0',
    ...env,
  });
  const opened = recordConnections(t);
  const { defaultComponents } = await import('../cli/components.ts');
  const service = createService(config, {
    components: defaultComponents(),
    logger: createLogger('silent'),
  });
  t.teardown(() => service.stop());
  await service.start();
  const byFile = new Map<string, number[]>();
  for (const db of opened) {
    if (!db.isOpen) continue;
    const file = path.basename(db.location() ?? ':memory:');
    byFile.set(file, [...(byFile.get(file) ?? []), synchronousOf(db)]);
  }
  await service.stop();
  return byFile;
}

test.serial(
  'by default the service opens events.db with FULL and its derived files with NORMAL',
  async (t) => {
    const files = await serviceConnections(t, {});
    t.deepEqual(files.get('events.db'), [FULL]);
    for (const derived of ['read.db', 'dispatcher.db', 'sessions.db']) {
      const modes = files.get(derived);
      t.truthy(modes, `${derived} is opened`);
      t.true(
        modes?.every((mode) => mode === NORMAL),
        `${derived}: ${modes}`,
      );
    }
  },
);

test.serial('PDS_EVENT_STORE_SYNC=normal opens events.db with NORMAL', async (t) => {
  const files = await serviceConnections(t, { PDS_EVENT_STORE_SYNC: 'normal' });
  t.deepEqual(files.get('events.db'), [NORMAL]);
  t.true(files.get('read.db')?.every((mode) => mode === NORMAL));
});
