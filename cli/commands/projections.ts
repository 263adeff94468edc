/** `pds projections status` and `pds projections rebuild <name>|--all` (with a progress bar). */
import { SingleBar } from 'cli-progress';
import type { Command } from 'commander';
import type { ProjectionStatusFields } from '../../api/admin-trouble.ts';
import type { ProjectionStatus } from '../../projections/projector.ts';
import { type AdminClient, CliError, createAdminClient, EXIT, table } from '../client.ts';
import { plural, printableLine } from '../terminal.ts';
import { runClientCommand } from './run.ts';

/** A projection as the admin API answers it: with its mark, `ok` or `lagging` (docs/operations.md, "Health"). */
type Projection = ProjectionStatus & ProjectionStatusFields;

const statusOf = (client: AdminClient) =>
  client.request<{ projections: Projection[] }>('GET', '/admin/v1/projections').then((r) => r.projections);

/** The table, then why each lagging projection is marked. */
function statusTable(list: Projection[]): string {
  const why = list.flatMap((p) => p.trouble.map((x) => `${p.name} is LAGGING: ${x.detail}\n`));
  return `${table(
    ['name', 'state', 'status', 'checkpoint', 'events', 'lag_events', 'lag_seconds', 'rebuild'],
    list.map((p) => [
      p.name,
      p.state,
      p.status === 'lagging' ? 'LAGGING' : p.status,
      p.checkpoint,
      p.events_applied,
      p.lag_events,
      p.lag_seconds,
      [
        p.progress
          ? `${p.progress.percent}% (${plural(p.progress.events_done, 'event')}, ${p.progress.rate_per_second}/s)`
          : '',
        p.rebuild_failure ? `last failed at ${p.rebuild_failure.at}: ${p.rebuild_failure.error}` : '',
      ]
        .filter(Boolean)
        .join('; '),
    ]),
  )}\n${why.length > 0 ? `\n${why.join('')}` : ''}`;
}

export function registerProjections(program: Command): void {
  const projections = program.command('projections').description('read models: status and rebuild');

  projections
    .command('status')
    .description('each projection: state, checkpoint, lag, rebuild progress')
    .option('--json', 'print JSON')
    .action((options: { json?: boolean }) =>
      runClientCommand(async () => {
        const list = await statusOf(await createAdminClient());
        return options.json ? `${JSON.stringify({ projections: list }, null, 2)}\n` : statusTable(list);
      }),
    );

  projections
    .command('rebuild')
    .description('rebuild into fresh copies while the live ones serve; waits until the copies are live')
    .argument('[name]', 'the projection to rebuild')
    .option('--all', 'rebuild every projection, one after another')
    .option('--json', 'print the final status as JSON instead of a progress bar')
    .option('--poll <ms>', 'how often to ask for progress', '250')
    .action((name: string | undefined, options: { all?: boolean; json?: boolean; poll: string }) =>
      runClientCommand(async () => {
        if (!name && !options.all) throw new CliError('name a projection or pass --all', EXIT.usage);
        const client = await createAdminClient();
        const names = options.all ? (await statusOf(client)).map((p) => p.name) : [name as string];
        const done: Projection[] = [];
        for (const n of names)
          done.push(await rebuildOne(client, n, { json: options.json, pollMs: Number(options.poll) || 250 }));
        return options.json ? `${JSON.stringify({ projections: done }, null, 2)}\n` : statusTable(done);
      }),
    );
}

async function rebuildOne(
  client: AdminClient,
  name: string,
  options: { json?: boolean; pollMs: number },
): Promise<Projection> {
  const before = (await statusOf(client)).find((p) => p.name === name);
  await client.request('POST', `/admin/v1/projections/${encodeURIComponent(name)}/rebuild`);
  const bar = options.json
    ? undefined
    : new SingleBar({
        format: `${printableLine(name).padEnd(22)} [{bar}] {percentage}% | {events} events | {rate}/s | ETA {eta_s}`,
        hideCursor: true,
        stream: process.stderr,
      });
  bar?.start(100, 0, { events: 0, rate: 0, eta_s: '?' });
  try {
    for (;;) {
      await new Promise((r) => setTimeout(r, options.pollMs));
      const s = (await statusOf(client)).find((p) => p.name === name);
      if (!s) throw new CliError(`projection ${name} disappeared`, EXIT.failed);
      if (s.state === 'failed') throw new CliError(`rebuild of ${name} failed: ${s.error}`, EXIT.failed);
      // A failure since it was asked: this rebuild's (its progress is gone).
      if (s.rebuild_failure && s.rebuild_failure.at !== before?.rebuild_failure?.at) {
        throw new CliError(`rebuild of ${name} failed: ${s.rebuild_failure.error}`, EXIT.failed);
      }
      if (s.state === 'standby') {
        throw new CliError(
          `rebuild of ${name} ended: this projector lost the lease to another; ask that one again`,
          EXIT.failed,
        );
      }
      const progress = s.progress;
      bar?.update(progress?.percent ?? 0, {
        events: progress?.events_done ?? 0,
        rate: progress?.rate_per_second ?? 0,
        eta_s:
          progress?.eta_seconds === null || progress?.eta_seconds === undefined
            ? '?'
            : `${progress.eta_seconds}s`,
      });
      // Finished: live again, with a rebuild that started after ours was requested.
      const startedAfter =
        progress && (!before?.progress || progress.started_at !== before.progress.started_at);
      if (s.state === 'live' && startedAfter && progress.percent === 100) {
        bar?.update(100);
        return s;
      }
    }
  } finally {
    bar?.stop();
  }
}
