/**
 * The process's supervisor of subscriptions (docs/operations.md, "Recovery"), wired to what operators
 * watch: each drop is logged, `/readyz` names `subscription:<name>` while that one is down (failing or
 * degraded, as the role needs it), and `/metrics` counts drops and resubscriptions per subscription.
 */
import type { Logger } from 'pino';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { CheckImpact, Readiness } from '../api/readiness.ts';
import { type SubscriptionHealth, Supervisor, type SupervisorOptions } from '../application/supervisor.ts';
import type { Role } from './roles.ts';

/**
 * What a subscription that is down, or the write side's lookups not built yet, means to a role
 * (docs/operations.md, "Health"). An `api` process serves partner reads from the read store; its
 * subscriptions (the write side's lookups and specials, and with a `memory` read store its own read
 * models once caught up) only make writes answer 503 or reads staler while they are down, so a drop
 * (any EventStoreDB blip), or a start during an outage, degrades it but does not take it out of the
 * load balancer. The projector, the dispatcher and `all` (one machine's whole service) do
 * their work through their subscriptions: a drop makes them unready.
 */
export function subscriptionImpact(role: Role): CheckImpact {
  return role === 'api' ? 'degraded' : 'required';
}

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
  role: Role,
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
  readiness.addEach(
    'subscription',
    () => Object.fromEntries(supervisor.health().map((h) => [slug(h.name), h.state !== 'down'])),
    { impact: subscriptionImpact(role) },
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
    // Each delivery thread follows the subscriptions: the series is up while every thread's is.
    aggregator: 'min',
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
