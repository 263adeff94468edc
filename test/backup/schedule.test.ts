/**
 * Scheduled backups with rotation (`PDS_BACKUP_DIR`, `PDS_BACKUP_EVERY`, `PDS_BACKUP_KEEP`;
 * docs/operations.md, "Backups"), on a manual clock: no test waits for a period to pass.
 */
import { mkdir, readdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import test from 'ava';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { scheduledBackups } from '../../cli/backup/component.ts';
import { completeBackups, createBackupSchedule } from '../../cli/backup/schedule.ts';
import { takeBackupOnThread } from '../../cli/backup/take-thread.ts';
import { verifyBackup } from '../../cli/backup/verify.ts';
import type { ServiceContext } from '../../cli/compose.ts';
import { manualClock } from '../../domain/clock.ts';
import { childDataDir, killChild, serveChild } from '../support/child-service.ts';
import { oneEventDataDir, tempDir } from './support.ts';

const HOUR = 3_600_000;
const logger = pino({ level: 'silent' });

test('one backup at start into an empty directory, then one every period; the oldest beyond the number kept are deleted', async (t) => {
  const data = await oneEventDataDir(t, 'pds-schedule-data-');
  const backups = await tempDir(t, 'pds-scheduled-');
  const clock = manualClock('2026-11-29T00:00:00.000Z');
  const schedule = createBackupSchedule({
    dataDir: data,
    backupDir: backups,
    everyMs: 6 * HOUR,
    keep: 2,
    version: '1',
    clock,
    logger,
  });
  t.teardown(() => schedule.stop());
  await schedule.start();
  t.is(schedule.next()?.toISOString(), '2026-11-29T00:00:00.000Z');
  t.is(await schedule.tick(), 1);
  t.deepEqual(await completeBackups(backups), ['pds-backup-2026-11-29T00-00-00-000Z']);
  t.is(schedule.next()?.toISOString(), '2026-11-29T06:00:00.000Z');

  clock.advance(6 * HOUR - 1);
  t.is(await schedule.tick(), 0, 'not due yet');
  clock.advance(1);
  t.is(await schedule.tick(), 1);
  clock.advance(6 * HOUR);
  t.is(await schedule.tick(), 1);
  t.deepEqual(await readdir(backups), [
    'pds-backup-2026-11-29T06-00-00-000Z',
    'pds-backup-2026-11-29T12-00-00-000Z',
  ]);
});

test('after a restart the next backup is due a period after the newest in the directory, or at once when that is past', async (t) => {
  const data = await oneEventDataDir(t, 'pds-schedule-data-');
  const backups = await tempDir(t, 'pds-scheduled-');
  const clock = manualClock('2026-11-29T00:00:00.000Z');
  const options = {
    dataDir: data,
    backupDir: backups,
    everyMs: 24 * HOUR,
    keep: 3,
    version: '1',
    clock,
    logger,
  };
  const first = createBackupSchedule(options);
  await first.start();
  await first.tick();
  await first.stop();

  clock.set('2026-11-29T05:00:00.000Z');
  const restarted = createBackupSchedule(options);
  await restarted.start();
  t.is(restarted.next()?.toISOString(), '2026-11-30T00:00:00.000Z', 'no backup more for the restart');
  t.is(await restarted.tick(), 0);
  await restarted.stop();

  clock.set('2026-12-02T05:00:00.000Z');
  const late = createBackupSchedule(options);
  t.teardown(() => late.stop());
  await late.start();
  t.is(late.next()?.toISOString(), '2026-12-02T05:00:00.000Z', 'none skipped for the time it was down');
  t.is(await late.tick(), 1);
  t.is((await completeBackups(backups)).length, 2);
});

test('after a restart /metrics shows the newest backup in the directory, not 0, before the next is taken', async (t) => {
  const data = await oneEventDataDir(t, 'pds-schedule-data-');
  const backups = await tempDir(t, 'pds-scheduled-');
  const clock = manualClock('2026-11-29T00:00:00.000Z');
  const first = createBackupSchedule({
    dataDir: data,
    backupDir: backups,
    everyMs: 24 * HOUR,
    keep: 3,
    version: '1',
    clock,
    logger,
  });
  await first.start();
  await first.tick();
  await first.stop();

  clock.set('2026-11-29T05:00:00.000Z');
  const registry = new Registry();
  const component = scheduledBackups(clock);
  const config = {
    backupDir: backups,
    backupEveryMs: 24 * HOUR,
    backupKeep: 3,
    dataDir: data,
    embedded: true,
  };
  await component.start({ config, logger, registry } as unknown as ServiceContext);
  t.teardown(() => component.stop());
  const value = async (name: string) => (await registry.getSingleMetric(name)?.get())?.values[0]?.value;
  t.is(await value('pds_backup_last_success_seconds'), Date.parse('2026-11-29T00:00:00.000Z') / 1000);
  const duration = await value('pds_backup_last_duration_seconds');
  t.true(duration !== undefined && duration > 0, String(duration));
  t.is((await completeBackups(backups)).length, 1, 'no backup taken for the restart');
});

test('a backup that fails is tried again after a tenth of the period, and counts for nothing', async (t) => {
  const data = await tempDir(t, 'pds-schedule-nolog-');
  const backups = await tempDir(t, 'pds-scheduled-');
  const clock = manualClock('2026-11-29T00:00:00.000Z');
  const lines: string[] = [];
  const captured = pino({ level: 'info' }, { write: (line: string) => lines.push(line) });
  const schedule = createBackupSchedule({
    dataDir: data,
    backupDir: backups,
    everyMs: 10 * HOUR,
    keep: 2,
    version: '1',
    clock,
    logger: captured,
  });
  t.teardown(() => schedule.stop());
  await schedule.start();
  t.is(await schedule.tick(), 1);
  t.is(schedule.next()?.toISOString(), '2026-11-29T01:00:00.000Z');
  t.deepEqual(await readdir(backups), []);
  const failed = lines
    .map((l) => JSON.parse(l))
    .find((l) => l.msg === 'scheduled backup failed: tried again later');
  t.is(failed?.level, 50);
  t.regex(failed?.err?.message ?? '', /holds no embedded event store/);
});

test('pds serve with PDS_BACKUP_DIR takes a backup at its first start, a sound one', async (t) => {
  const data = await childDataDir(t, 'pds-schedule-serve-');
  const backups = await tempDir(t, 'pds-scheduled-');
  const child = await serveChild(t, data, {
    PDS_BACKUP_DIR: backups,
    PDS_BACKUP_EVERY: '1h',
    PDS_BACKUP_KEEP: '3',
  });
  const deadline = Date.now() + 30_000;
  while ((await completeBackups(backups)).length === 0 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  await killChild(child);
  const [name] = await completeBackups(backups);
  t.truthy(name, 'a backup was taken');
  const { problems, manifest } = await verifyBackup(path.join(backups, name));
  t.deepEqual(problems, []);
  t.deepEqual(manifest?.files.map((f) => f.name).slice(0, 3), ['dispatcher.db', 'read.db', 'events.db']);
});

test('a newest backup whose manifest cannot be read does not stop the start: the next backup is due at once', async (t) => {
  const data = await oneEventDataDir(t, 'pds-schedule-data-');
  const backups = await tempDir(t, 'pds-scheduled-');
  const clock = manualClock('2026-11-29T00:00:00.000Z');
  await mkdir(path.join(backups, 'pds-backup-2026-11-28T23-00-00-000Z'));
  await writeFile(path.join(backups, 'pds-backup-2026-11-28T23-00-00-000Z', 'manifest.json'), 'not json');
  const schedule = createBackupSchedule({
    dataDir: data,
    backupDir: backups,
    everyMs: 24 * HOUR,
    keep: 5,
    version: '1',
    clock,
    logger,
  });
  t.teardown(() => schedule.stop());
  await schedule.start();
  t.is(schedule.next()?.toISOString(), '2026-11-29T00:00:00.000Z');
});

test("on a thread of its own: the backup is the same, taken at the time of the caller's clock, and its failure comes back", async (t) => {
  const data = await oneEventDataDir(t, 'pds-schedule-data-');
  const backups = await tempDir(t, 'pds-scheduled-');
  const clock = manualClock('2026-11-29T07:00:00.000Z');
  const taken = await takeBackupOnThread({ dataDir: data, into: backups, version: '2', clock });
  t.is(taken.dir, path.join(backups, 'pds-backup-2026-11-29T07-00-00-000Z'));
  t.is(taken.manifest.created_at, '2026-11-29T07:00:00.000Z');
  t.is(taken.manifest.log.events, 1);
  t.deepEqual((await verifyBackup(taken.dir)).problems, []);
  const empty = await tempDir(t, 'pds-schedule-nolog-');
  await t.throwsAsync(takeBackupOnThread({ dataDir: empty, into: backups, version: '2', clock }), {
    message: /holds no embedded event store/,
  });
});
