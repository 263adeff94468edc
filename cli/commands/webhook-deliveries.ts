/**
 * `pds webhooks deliveries | redeliver | recover | test-send | health`: a subscription's deliveries
 * and their attempts, sending them again, one signed sample request, and how its deliveries fared
 * (the usage is in `webhooks.ts`).
 */
import type { Command } from 'commander';
import type { WaitingBehind } from '../../api/admin-delivery-queue.ts';
import type { WebhookHealthAnswer } from '../../api/admin-webhook-health.ts';
import { deliveryStatuses } from '../../domain/webhook-delivery.ts';
import { webhookEventKinds } from '../../domain/webhook-subscription.ts';
import type { WebhookDeliveryRecord } from '../../projections/read-models/webhook-deliveries.ts';
import { CliError, createAdminClient, EXIT, table } from '../client.ts';
import { parseDuration } from '../durations.ts';
import { oneOrMoreOf, positiveInteger, printJson } from '../options.ts';
import { plural, print } from '../terminal.ts';
import { runClientCommand } from './run.ts';

const BASE = '/admin/v1/webhooks';
const path = (id: string) => `${BASE}/${encodeURIComponent(id)}`;

/** A delivery as the admin API answers it: with the delivery it waits behind in its queue. */
type Delivery = WebhookDeliveryRecord & { waiting_behind: WaitingBehind };

interface DeliveryPage {
  deliveries: Delivery[];
  next_cursor: string | null;
}

interface TestSendAnswer {
  webhook_id: string;
  result: {
    outcome: string;
    status: number | null;
    duration_ms: number;
    response_excerpt: string;
    error_code: string | null;
    error: string | null;
  };
  sample: { event: string; webhook_id: string; body: unknown };
}

interface RecoverAnswer {
  webhook_id: string;
  since: string;
  recovered: number;
  delivery_ids: string[];
  truncated: boolean;
  limit: number;
}

type HealthTally = WebhookHealthAnswer['health']['totals'];

const deliveryPath = (id: string) => `${BASE}/deliveries/${encodeURIComponent(id)}`;
const ISO_DATE_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:Z|[+-]\d\d:\d\d)$/;

/** What the last attempt came to: `500 HTTP 500`, `timeout: no complete response…`, `(in flight)`. */
function lastAttempt(d: WebhookDeliveryRecord): string {
  const a = d.attempts.at(-1);
  if (!a) return '';
  if (a.outcome === null) return '(in flight)';
  const parts = [
    a.status === null ? '' : String(a.status),
    a.error ?? (a.outcome === 'delivered' ? 'ok' : a.outcome),
  ];
  const text = parts.filter((p) => p !== '').join(' ');
  return text.length > 60 ? `${text.slice(0, 59)}…` : text;
}

/**
 * When the next attempt is due, or what it waits for: a pending delivery behind another in its queue
 * leaves only after that one (docs/webhooks.md, "Order, isolation, durability").
 */
export function nextAttempt(d: Pick<Delivery, 'next_attempt_at' | 'waiting_behind'>): string | null {
  const b = d.waiting_behind;
  if (!b) return d.next_attempt_at;
  return `waits behind ${b.delivery_id} (${b.status}${b.next_attempt_at ? `, next attempt ${b.next_attempt_at}` : ''})`;
}

function deliveriesTable(list: Delivery[]): string {
  return `${table(
    ['delivery_id', 'event', 'cart', 'status', 'attempts', 'last', 'next_attempt_at'],
    list.map((d) => [
      d.delivery_id,
      d.event_kind,
      d.cart_uuid,
      d.status === 'parked' ? `parked (${d.parked_reason})` : d.status,
      d.attempt_count,
      lastAttempt(d),
      nextAttempt(d),
    ]),
  )}\n`;
}

function deliveryTable(d: Delivery): string {
  const fields = table(
    ['field', 'value'],
    [
      ['delivery_id', d.delivery_id],
      ['webhook_id', d.webhook_id],
      ['event_kind', d.event_kind],
      ['cart_uuid', d.cart_uuid],
      ['store_id', d.store_id],
      ['status', d.status],
      ['attempt_count', d.attempt_count],
      ['scheduled_at', d.scheduled_at],
      ['queued_since', d.queued_since],
      ['next_attempt_at', d.next_attempt_at],
      ['waiting_behind', d.waiting_behind ? nextAttempt(d) : null],
      ['delivered_at', d.delivered_at],
      ['parked_reason', d.parked_reason],
      ['parked_at', d.parked_at],
    ],
  );
  if (d.attempts.length === 0) return `${fields}\n`;
  const attempts = table(
    ['attempt', 'started_at', 'outcome', 'status', 'duration_ms', 'error'],
    d.attempts.map((a) => [
      a.attempt,
      a.started_at,
      a.outcome ?? '(in flight)',
      a.status,
      a.duration_ms,
      a.error,
    ]),
  );
  return `${fields}\n\n${attempts}\n`;
}

function testSendText(out: TestSendAnswer): string {
  const r = out.result;
  return `${table(
    ['field', 'value'],
    [
      ['event', out.sample.event],
      ['x_service_webhook_id', out.sample.webhook_id],
      ['outcome', r.outcome],
      ['status', r.status],
      ['duration_ms', r.duration_ms],
      ['error_code', r.error_code],
      ['error', r.error],
      ['response_excerpt', r.response_excerpt.replace(/[\r\n\t]+/g, ' ').slice(0, 200)],
    ],
  )}\n`;
}

/** Adds the delivery subcommands to `pds webhooks`. */
export function registerDeliveryCommands(webhooks: Command): void {
  deliveriesCommand(webhooks);
  redeliverCommand(webhooks);
  recoverCommand(webhooks);
  testSendCommand(webhooks);
  healthCommand(webhooks);
}

function deliveriesCommand(webhooks: Command): void {
  webhooks
    .command('deliveries')
    .description("a subscription's deliveries with their attempts, newest first")
    .argument('<id>', 'the webhook id')
    .option('--status <status...>', `only these statuses (of ${deliveryStatuses.join(', ')})`)
    .option('--limit <n>', 'how many to show (default 50)')
    .option('--cursor <cursor>', 'continue after a `next_cursor` of an earlier --json answer')
    .option('--json', 'print {deliveries: [...], next_cursor} as JSON')
    .action((id: string, options: { status?: string[]; limit?: string; cursor?: string; json?: boolean }) =>
      runClientCommand(async () => {
        const wanted = options.limit === undefined ? 50 : positiveInteger('--limit', options.limit, 100_000);
        const only = oneOrMoreOf('--status', options.status, deliveryStatuses);
        const client = await createAdminClient();
        const all: Delivery[] = [];
        let cursor: string | null = options.cursor ?? null;
        do {
          const params = new URLSearchParams({ limit: String(Math.min(500, wanted - all.length)) });
          if (only) params.set('status', only.join(','));
          if (cursor) params.set('cursor', cursor);
          const page: DeliveryPage = await client.request('GET', `${path(id)}/deliveries?${params}`);
          all.push(...page.deliveries);
          cursor = page.next_cursor;
        } while (cursor && all.length < wanted);
        if (options.json) return printJson({ deliveries: all, next_cursor: cursor });
        const more = cursor ? `\n(more: --cursor ${cursor})\n` : '';
        return deliveriesTable(all) + more;
      }),
    );
}

function redeliverCommand(webhooks: Command): void {
  webhooks
    .command('redeliver')
    .description('send a failed, parked or delivered delivery again (same webhook id, next attempt number)')
    .argument('<delivery_id>', 'the delivery id (the X-Service-Webhook-Id)')
    .option('--json', 'print the answer as JSON')
    .action((deliveryId: string, options: { json?: boolean }) =>
      runClientCommand(async () => {
        const out = await (await createAdminClient()).request<{ delivery: Delivery }>(
          'POST',
          `${deliveryPath(deliveryId)}/redeliver`,
        );
        return options.json ? printJson(out) : deliveryTable(out.delivery);
      }),
    );
}

/** How `pds webhooks recover` is called, said whenever a part is missing or wrong. */
const RECOVER_USAGE =
  'usage: pds webhooks recover <webhook_id> --since <time> (`pds webhooks list` shows the webhook ids)';
const SINCE_FORMS = 'an ISO 8601 date-time with offset (2026-03-01T00:00:00Z) or a duration ago (6h, 30m)';

/**
 * The subscription and the time `pds webhooks recover` was given, checked before any request: each
 * part missing or wrong is named, with the usage. `--since 6h` is six hours before `now`.
 */
export function recoverArguments(
  id: string | undefined,
  since: string | undefined,
  now: Date,
): { id: string; since: string } {
  const missing = [id ? undefined : 'the webhook id', since ? undefined : '--since <time>'].filter(Boolean);
  if (!id || !since)
    throw new CliError(
      `webhooks recover needs ${missing.join(' and ')}, the time ${SINCE_FORMS}; ${RECOVER_USAGE}`,
      EXIT.usage,
    );
  if (ISO_DATE_TIME.test(since) && !Number.isNaN(Date.parse(since))) return { id, since };
  try {
    return { id, since: new Date(now.getTime() - parseDuration(since)).toISOString() };
  } catch {
    throw new CliError(
      `--since: ${JSON.stringify(since)} is not ${SINCE_FORMS}; ${RECOVER_USAGE}`,
      EXIT.usage,
    );
  }
}

function recoverCommand(webhooks: Command): void {
  webhooks
    .command('recover')
    .description('send every failed or parked delivery of a subscription scheduled since a time again')
    .argument('[webhook_id]', 'the webhook id (`pds webhooks list` shows them)')
    .option(
      '--since <time>',
      'scheduled since: an ISO 8601 date-time with offset (2026-03-01T00:00:00Z) or a duration ago (6h, 30m)',
    )
    .option('--json', 'print the answer as JSON')
    .addHelpText(
      'after',
      '\nExample: every failed or parked delivery of the last six hours, sent again:\n  pds webhooks recover <webhook_id> --since 6h\n',
    )
    .action((webhookId: string | undefined, options: { since?: string; json?: boolean }) =>
      runClientCommand(async () => {
        const { id, since } = recoverArguments(webhookId, options.since, new Date());
        const out = await (await createAdminClient()).request<RecoverAnswer>('POST', `${path(id)}/recover`, {
          since,
        });
        if (options.json) return printJson(out);
        let text = `recovered ${plural(out.recovered, 'delivery', 'deliveries')} of webhook ${out.webhook_id} scheduled since ${out.since}\n`;
        for (const d of out.delivery_ids) text += `${d}\n`;
        if (out.truncated) text += `(stopped at ${out.limit}: run it again for the rest)\n`;
        return text;
      }),
    );
}

function testSendCommand(webhooks: Command): void {
  webhooks
    .command('test-send')
    .description("send one signed sample request to a subscription's URL now; exits 1 unless delivered")
    .argument('<id>', 'the webhook id')
    .option(
      '--event <kind>',
      `the sample's kind (${webhookEventKinds.join(' or ')}; default cart_status_updated)`,
    )
    .option('--json', 'print the answer as JSON')
    .action((id: string, options: { event?: string; json?: boolean }) =>
      runClientCommand(async () => {
        const kind =
          options.event === undefined
            ? undefined
            : oneOrMoreOf('--event', [options.event], webhookEventKinds);
        if (kind && kind.length !== 1) throw new CliError('--event: give one kind', EXIT.usage);
        const out = await (await createAdminClient()).request<TestSendAnswer>(
          'POST',
          `${path(id)}/test`,
          kind ? { event: kind[0] } : {},
        );
        print(options.json ? printJson(out) : testSendText(out));
        if (out.result.outcome !== 'delivered') {
          throw new CliError(
            `the test request was not delivered: ${out.result.outcome}${out.result.error ? ` (${out.result.error})` : ''}`,
            EXIT.failed,
          );
        }
        return '';
      }),
    );
}

/** Failed attempts of every kind, as one figure. */
const failedAttempts = (t: HealthTally) =>
  Object.entries(t.attempts).reduce((sum, [outcome, n]) => (outcome === 'delivered' ? sum : sum + n), 0);
const latency = (t: HealthTally) => (t.latency_ms ? `${t.latency_ms.p50} / ${t.latency_ms.p99}` : '');

function healthText({ health: h }: WebhookHealthAnswer): string {
  const t = h.totals;
  const oldest = h.queue.oldest;
  const summary = table(
    ['field', 'value'],
    [
      ['status', h.status === 'failing' ? 'FAILING' : 'ok'],
      ...h.trouble.map((x) => [x.reason, x.detail]),
      ['window', `${h.window}: ${h.from} to ${h.to}`],
      ['scheduled', t.scheduled],
      ['delivered', t.attempts.delivered ?? 0],
      ['failed attempts', failedAttempts(t)],
      ['parked', t.parked],
      ['latency p50 / p99 (ms)', latency(t)],
      ['queue depth', h.queue.depth],
      ['oldest queued', oldest ? `${oldest.delivery_id} (${oldest.status}, ${oldest.age_seconds} s)` : ''],
    ],
  );
  const busy = h.intervals.filter(
    (i) => i.scheduled + i.parked + failedAttempts(i) + (i.attempts.delivered ?? 0) > 0,
  );
  if (busy.length === 0) return `${summary}\n`;
  const intervals = table(
    ['from', 'scheduled', 'delivered', 'failed', 'parked', 'p50 / p99 ms', 'queue'],
    busy.map((i) => [
      i.from,
      i.scheduled,
      i.attempts.delivered ?? 0,
      failedAttempts(i),
      i.parked,
      latency(i),
      i.queue_depth,
    ]),
  );
  return `${summary}\n\n${intervals}\n`;
}

function healthCommand(webhooks: Command): void {
  webhooks
    .command('health')
    .description("how a subscription's deliveries fared over the last hour or day, and its queue now")
    .argument('<id>', 'the webhook id')
    .option('--window <window>', 'the last 1h (by minute) or 24h (by 15 minutes); default 1h')
    .option('--json', 'print the answer as JSON')
    .action((id: string, options: { window?: string; json?: boolean }) =>
      runClientCommand(async () => {
        const window = options.window ?? '1h';
        if (window !== '1h' && window !== '24h') throw new CliError('--window: 1h or 24h', EXIT.usage);
        const out = await (await createAdminClient()).request<WebhookHealthAnswer>(
          'GET',
          `${path(id)}/health?window=${window}`,
        );
        return options.json ? printJson(out) : healthText(out);
      }),
    );
}
