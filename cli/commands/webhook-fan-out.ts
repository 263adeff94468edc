/**
 * `pds webhooks fan-out`: how far the webhook fan-out's group has got
 * (docs/operations.md, "The fan-out's group"): its checkpoint, the oldest cart event after it and its
 * age, and what is parked in it. Exits with 1 when the fan-out is behind or its group is absent, so a
 * check can run it.
 */
import type { Command } from 'commander';
import type { FanOutProgress } from '../../webhooks/fan-out-group.ts';
import { CliError, createAdminClient, EXIT, table } from '../client.ts';
import { printJson } from '../options.ts';
import { print } from '../terminal.ts';
import { runClientCommand } from './run.ts';

function progressText(f: FanOutProgress): string {
  const oldest = f.oldest_pending;
  return `${table(
    ['field', 'value'],
    [
      ['group', f.group],
      ['state', f.state],
      ['checkpoint', f.checkpoint],
      [
        'oldest pending',
        oldest
          ? `${oldest.type} of ${oldest.stream_id} at ${oldest.position} (${oldest.age_seconds} s, recorded ${oldest.recorded_at})`
          : '',
      ],
      ['parked', f.parked],
      ['consumers', f.consumers],
      ['behind after (s)', f.behind_after_seconds],
    ],
  )}\n`;
}

export function fanOutCommand(webhooks: Command): void {
  webhooks
    .command('fan-out')
    .description("how far the webhook fan-out's group has got; exits 1 when it is behind or absent")
    .option('--json', 'print the answer as JSON')
    .action((options: { json?: boolean }) =>
      runClientCommand(async () => {
        const { fan_out } = await (await createAdminClient()).request<{ fan_out: FanOutProgress }>(
          'GET',
          '/admin/v1/webhook-fan-out',
        );
        print(options.json ? printJson({ fan_out }) : progressText(fan_out));
        if (fan_out.state !== 'current') {
          const why =
            fan_out.state === 'absent'
              ? 'no dispatcher has made the group yet'
              : `its oldest pending cart event is ${fan_out.oldest_pending?.age_seconds} s old`;
          throw new CliError(`the webhook fan-out is ${fan_out.state}: ${why}`, EXIT.failed);
        }
        return '';
      }),
    );
}
