/**
 * The process's supervisor of subscriptions (docs/operations.md, "Recovery"), wired to what operators
 * watch: each drop is logged, `/readyz` fails `subscription:<name>` while that one is down, and
 * `/metrics` counts drops and resubscriptions per subscription.
 */
import type { Logger } from 'pino';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { Readiness } from '../api/http.ts';
import { type SubscriptionHealth, Supervisor, type SupervisorOptions } from '../application/supervisor.ts';

/** `projection carts` → `projection_carts`: a name fit for a check and a label. */
const slug = (name: string) =>
  name
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '_')
    .replace(/^_+|_+$/g, '');

/** `options`: the pauses (tests shorten them) and who else is told of each drop. */
export function createSupervisor(
  logger: Logger,
  readiness: Readiness,
  registry: Registry,
  options: SupervisorOptions = {},
): Supervisor {
  const supervisor = new Supervisor({
    ...options,
    onDrop(name, err, delayMs) {
      logger.warn(
        { err, subscription: name, retry_in_ms: delayMs },
        'subscription dropped: subscribing again',
      );
      options.onDrop?.(name, err, delayMs);
    },
  });
  readiness.addEach('subscription', () =>
    Object.fromEntries(supervisor.health().map((h) => [slug(h.name), h.state !== 'down'])),
  );
  const each = (metric: Counter | Gauge, pick: (h: SubscriptionHealth) => number) => {
    metric.reset();
    for (const h of supervisor.health()) {
      if (metric instanceof Counter) metric.inc({ subscription: slug(h.name) }, pick(h));
      else metric.set({ subscription: slug(h.name) }, pick(h));
    }
  };
  new Gauge({
    name: 'pds_subscription_up',
    help: 'whether a log subscription is up (1), or down and waiting to subscribe again (0)',
    labelNames: ['subscription'],
    registers: [registry],
    collect() {
      each(this, (h) => (h.state === 'down' ? 0 : 1));
    },
  });
  new Counter({
    name: 'pds_subscription_drops_total',
    help: 'times a log subscription ended with an error',
    labelNames: ['subscription'],
    registers: [registry],
    collect() {
      each(this, (h) => h.drops);
    },
  });
  new Counter({
    name: 'pds_subscription_resubscriptions_total',
    help: 'times a log subscription was opened again after a drop',
    labelNames: ['subscription'],
    registers: [registry],
    collect() {
      each(this, (h) => h.resubscriptions);
    },
  });
  return supervisor;
}
