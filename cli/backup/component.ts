/**
 * The component of scheduled backups (`schedule.ts`; docs/operations.md, "Backups"). Its modules are
 * loaded only when `PDS_BACKUP_DIR` is set (docs/read-side.md, "Start-up and restart").
 */
import { Gauge } from 'prom-client';
import { type Clock, systemClock } from '../../domain/clock.ts';
import pkg from '../../package.json' with { type: 'json' };
import type { Component } from '../compose.ts';
import { createTimers, type Timers } from '../dispatcher-components.ts';
import type { BackupSchedule } from './schedule.ts';

/**
 * Scheduled backups in the process that projects (role `all` in the embedded deployment), when
 * `PDS_BACKUP_DIR` is set; `/metrics` has `pds_backup_last_success_seconds` (when the newest backup in
 * `PDS_BACKUP_DIR` began, Unix time) and `pds_backup_last_duration_seconds`, from its manifest at start.
 */
export function scheduledBackups(clock: Clock = systemClock, timers: Timers = createTimers()): Component {
  let schedule: BackupSchedule | undefined;
  return {
    name: 'scheduled-backups',
    roles: ['projector'],
    async start(ctx) {
      const { backupDir, backupEveryMs, backupKeep, dataDir, embedded } = ctx.config;
      if (backupDir === null || !embedded) return;
      const lastSuccess = new Gauge({
        name: 'pds_backup_last_success_seconds',
        help: 'when the newest backup in PDS_BACKUP_DIR began (Unix time)',
        registers: [ctx.registry],
      });
      const lastDuration = new Gauge({
        name: 'pds_backup_last_duration_seconds',
        help: 'how long the newest backup in PDS_BACKUP_DIR took',
        registers: [ctx.registry],
      });
      const { createBackupSchedule } = await import('./schedule.ts');
      const { takeBackupOnThread } = await import('./take-thread.ts');
      const s = createBackupSchedule({
        take: takeBackupOnThread,
        dataDir,
        backupDir,
        everyMs: backupEveryMs,
        keep: backupKeep,
        version: pkg.version,
        clock,
        logger: ctx.logger.child({ component: 'scheduled-backups' }),
        onBackup({ manifest, ms }) {
          lastSuccess.set(new Date(manifest.created_at).getTime() / 1000);
          if (ms !== undefined) lastDuration.set(ms / 1000);
        },
      });
      schedule = s;
      timers.ticks.push(() => s.tick());
      await s.start();
    },
    async stop() {
      await schedule?.stop();
    },
  };
}
