/** `pds audit cart <uuid>`: every event of a cart, in order, as a table or `--json`. */
import type { Command } from 'commander';
import type { HistoryEntry } from '../../api/admin.ts';
import { createAdminClient, table } from '../client.ts';
import { runClientCommand } from './run.ts';

export function registerAudit(program: Command): void {
  const audit = program.command('audit').description('read the event history auditors need');
  audit
    .command('cart')
    .description(
      'every event of a cart in order: type, revision, position, time, actor, correlation, causation, data',
    )
    .argument('<uuid>', 'the cart uuid')
    .option('--json', 'print the history as JSON')
    .action((uuid: string, options: { json?: boolean }) =>
      runClientCommand(async () => {
        const client = await createAdminClient();
        const history = await client.request<{ cart_uuid: string; events: HistoryEntry[] }>(
          'GET',
          `/admin/v1/carts/${encodeURIComponent(uuid)}/history`,
        );
        if (options.json) return `${JSON.stringify(history, null, 2)}\n`;
        return `${table(
          ['rev', 'position', 'occurred_at', 'type', 'actor', 'correlation_id', 'causation_id', 'data'],
          history.events.map((e) => [
            e.revision,
            e.position,
            e.occurred_at,
            e.type,
            `${e.actor.type}:${e.actor.id}`,
            e.correlation_id,
            e.causation_id,
            JSON.stringify(e.data),
          ]),
        )}\n`;
      }),
    );
}
