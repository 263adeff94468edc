/**
 * `pds audit cart <uuid>`: every event of a cart, in order, with what it changed and who caused it,
 * then the webhook deliveries its events produced; as tables or `--json` ({cart_uuid, events,
 * deliveries, pruned_before}), with a note when the cart is older than the deliveries kept. Reading a cart's history is recorded (docs/operations.md, "Accounts and roles").
 * `pds audit views <uuid>`: who read that history and when, newest first.
 * `pds audit carts`: find carts by store, status, time, partner or customer (`audit-carts.ts`).
 */
import type { Command } from 'commander';
import type { HistoryEntry } from '../../api/admin-audit.ts';
import type { WaitingBehind } from '../../api/admin-delivery-queue.ts';
import type { NamedActor } from '../../api/operator-names.ts';
import type { WebhookDeliveryRecord } from '../../projections/read-models/webhook-deliveries.ts';
import { type AdminClient, createAdminClient, fetchAll, table } from '../client.ts';
import { printJson } from '../options.ts';
import { registerAuditCarts } from './audit-carts.ts';
import { runClientCommand } from './run.ts';
import { nextAttempt } from './webhook-deliveries.ts';

/** A cart's delivery as the admin API answers it: with the delivery it waits behind in its queue. */
type CartDelivery = WebhookDeliveryRecord & { waiting_behind: WaitingBehind };

/** `status: pending → verification; amount: 0 → 20`. */
const changesText = (e: HistoryEntry) =>
  e.changes
    .map(
      (c) =>
        `${c.field}: ${c.before === null ? '∅' : JSON.stringify(c.before)} → ${c.after === null ? '∅' : JSON.stringify(c.after)}`,
    )
    .join('; ');

/** `operator:<id> (Name)`: the actor's id, with the person's name where it names one. */
const actorText = (a: NamedActor) => `${a.type}:${a.id}${a.name === null ? '' : ` (${a.name})`}`;

/**
 * Every delivery of the cart, following the pages, and before when a finished one is pruned
 * (docs/operations.md, "Retention").
 */
async function cartDeliveries(
  client: AdminClient,
  uuid: string,
): Promise<{ deliveries: CartDelivery[]; prunedBefore: string | null }> {
  const all: CartDelivery[] = [];
  let cursor: string | null = null;
  let prunedBefore: string | null = null;
  do {
    const params = new URLSearchParams({ limit: '500', ...(cursor && { cursor }) });
    const page: {
      deliveries: CartDelivery[];
      next_cursor: string | null;
      pruned_before?: string;
    } = await client.request('GET', `/admin/v1/carts/${encodeURIComponent(uuid)}/webhooks?${params}`);
    all.push(...page.deliveries);
    prunedBefore ??= page.pruned_before ?? null;
    cursor = page.next_cursor;
  } while (cursor);
  return { deliveries: all, prunedBefore };
}

/** Said under the deliveries when the cart has events from before the retention: theirs may be gone. */
function prunedNote(history: { events: HistoryEntry[] }, prunedBefore: string | null): string {
  const first = history.events[0]?.occurred_at;
  if (!prunedBefore || !first || Date.parse(first) >= Date.parse(prunedBefore)) return '';
  return `\nwebhook deliveries finished before ${prunedBefore} are pruned (PDS_DELIVERY_LOG_RETENTION): those of earlier events may not be listed\n`;
}

export function registerAudit(program: Command): void {
  const audit = program.command('audit').description('read the event history auditors need');
  registerAuditCarts(audit);
  audit
    .command('cart')
    .description(
      'every event of a cart in order (type, revision, position, time, actor, correlation, causation, data, what it changed), then the webhooks it produced',
    )
    .argument('<uuid>', 'the cart uuid')
    .option('--json', 'print {cart_uuid, events, deliveries} as JSON')
    .action((uuid: string, options: { json?: boolean }) =>
      runClientCommand(async () => {
        const client = await createAdminClient();
        const history = await client.request<{ cart_uuid: string; events: HistoryEntry[] }>(
          'GET',
          `/admin/v1/carts/${encodeURIComponent(uuid)}/history`,
        );
        const { deliveries, prunedBefore } = await cartDeliveries(client, uuid);
        if (options.json) return printJson({ ...history, deliveries, pruned_before: prunedBefore });
        const note = prunedNote(history, prunedBefore);
        const revisionOf = new Map(history.events.map((e) => [e.event_id, e.revision]));
        const events = table(
          [
            'rev',
            'position',
            'occurred_at',
            'type',
            'actor',
            'correlation_id',
            'causation_id',
            'data',
            'changes',
          ],
          history.events.map((e) => [
            e.revision,
            e.position,
            e.occurred_at,
            e.type,
            actorText(e.actor),
            e.correlation_id,
            e.causation_id,
            JSON.stringify(e.data),
            changesText(e),
          ]),
        );
        if (deliveries.length === 0) return `${events}\n\nno webhook deliveries\n${note}`;
        const webhooks = table(
          ['rev', 'event', 'webhook_id', 'delivery_id', 'status', 'attempts', 'delivered_at', 'next'],
          deliveries.map((d) => [
            revisionOf.get(d.source_event_id) ?? '',
            d.event_kind,
            d.webhook_id,
            d.delivery_id,
            d.status,
            d.attempt_count,
            d.delivered_at,
            // When its next attempt is due, or the delivery it waits behind in its queue.
            nextAttempt(d),
          ]),
        );
        return `${events}\n\n${webhooks}\n${note}`;
      }),
    );
  audit
    .command('views')
    .description(
      "who read a cart's history (pds audit cart, the console, the admin API) and when, newest first",
    )
    .argument('<uuid>', 'the cart uuid')
    .option('--json', 'print {cart_uuid, views} as JSON')
    .action((uuid: string, options: { json?: boolean }) =>
      runClientCommand(async () => {
        const views = await fetchAll<{ viewed_at: string; by: NamedActor; position: number }>(
          await createAdminClient(),
          `/admin/v1/carts/${encodeURIComponent(uuid)}/views`,
          'views',
        );
        if (options.json) return printJson({ cart_uuid: uuid, views });
        if (views.length === 0) return 'nobody has read this cart’s history\n';
        return `${table(
          ['viewed_at', 'by'],
          views.map((v) => [v.viewed_at, actorText(v.by)]),
        )}\n`;
      }),
    );
}
