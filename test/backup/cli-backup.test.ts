/**
 * `pds backup <dir>`, `pds backup verify <backup>` and `pds restore <backup> [data dir]` as an operator
 * runs them (docs/operations.md, "Backups"): what they print and their exit codes (docs/operations.md,
 * "The `pds` command").
 */
import { execFile } from 'node:child_process';
import { readdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import test, { type ExecutionContext } from 'ava';
import { oneEventDataDir, tempDir } from './support.ts';

const exec = promisify(execFile);
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

async function pds(args: string[], env: Record<string, string>) {
  try {
    const { stdout, stderr } = await exec(process.execPath, ['cli/pds.ts', ...args], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', ...env },
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

async function dataDir(t: ExecutionContext): Promise<string> {
  const dir = await oneEventDataDir(t, 'pds-cli-backup-');
  await writeFile(path.join(dir, 'secret-key'), `${Buffer.alloc(32, 3).toString('base64')}\n`, {
    mode: 0o600,
  });
  return dir;
}

test('pds backup, verify and restore: exit 0 with what they did, 1 for a damaged backup, 3 for none, 4 into a data dir that holds data', async (t) => {
  const data = await dataDir(t);
  const into = await tempDir(t, 'pds-cli-backups-');
  const taken = await pds(['backup', into, '--json'], { PDS_DATA_DIR: data });
  t.is(taken.code, 0, taken.stderr);
  const { backup, manifest } = JSON.parse(taken.stdout) as {
    backup: string;
    manifest: { log: { head: number } };
  };
  t.is(path.dirname(backup), into);
  t.is(manifest.log.head, 1);

  const sound = await pds(['backup', 'verify', backup], {});
  t.is(sound.code, 0, sound.stderr);
  t.regex(sound.stdout, /is sound: 1 event in 1 stream up to position 1, taken .* by pds /);

  const inUse = await pds(['restore', backup], { PDS_DATA_DIR: data });
  t.is(inUse.code, 4);
  t.regex(inUse.stderr, /^pds: .* is not empty \(events\.db.*\): restore into an empty data dir\n$/);

  const target = path.join(await tempDir(t, 'pds-cli-restore-'), 'data');
  const restored = await pds(['restore', backup, target], {});
  t.is(restored.code, 0, restored.stderr);
  t.regex(restored.stdout, /^restored into .*: 1 event in 1 stream up to position 1, /);
  t.deepEqual((await readdir(target)).sort(), ['events.db', 'secret-key']);

  await writeFile(path.join(backup, 'secret-key'), 'changed');
  const damaged = await pds(['backup', 'verify', backup], {});
  t.is(damaged.code, 1);
  t.regex(damaged.stderr, /is not sound: secret-key: \d+ bytes, the manifest says \d+/);
  const damagedJson = await pds(['backup', 'verify', backup, '--json'], {});
  t.is(damagedJson.code, 1);
  t.false((JSON.parse(damagedJson.stdout) as { sound: boolean }).sound);

  const none = await pds(['backup', 'verify', path.join(into, 'nothing-here')], {});
  t.is(none.code, 3);
  t.regex(none.stderr, /nothing-here is not a directory/);
});

test('pds backup refuses what it cannot copy whole: the split deployment, a store outside the data dir (exit 2)', async (t) => {
  const data = await dataDir(t);
  const into = await tempDir(t, 'pds-cli-backups-');
  const split = await pds(['backup', into], {
    PDS_DATA_DIR: data,
    PDS_EVENT_STORE: 'esdb://localhost:2113?tls=false',
    PDS_SECRET_KEY: Buffer.alloc(32, 1).toString('base64'),
    PDS_OPERATOR_TOKEN: 'operator-token-for-the-test',
  });
  t.is(split.code, 2);
  t.regex(split.stderr, /not the embedded store: back up EventStoreDB and MongoDB with their own tools/);
  const outside = await pds(['backup', into], {
    PDS_DATA_DIR: data,
    PDS_EVENT_STORE: `sqlite:${path.join(into, 'elsewhere', 'events.db')}`,
  });
  t.is(outside.code, 2);
  t.regex(outside.stderr, /PDS_EVENT_STORE names a file outside the data dir/);
  const keys = await pds(['backup', into], {
    PDS_DATA_DIR: data,
    PDS_KEY_STORE: `sqlite:${path.join(into, 'elsewhere', 'keys.db')}`,
  });
  t.is(keys.code, 2);
  t.regex(keys.stderr, /PDS_KEY_STORE names a file outside the data dir/);
  t.deepEqual(await readdir(into), []);
});
