/** Every read-model projection the service runs, in the order they start. */

import type { Projection } from './projection.ts';
import { cartsProjection } from './read-models/carts.ts';
import { catalogProjection } from './read-models/catalog/projection.ts';
import { operatorsProjection } from './read-models/operators.ts';
import { partnerKeysProjection } from './read-models/partner-keys.ts';
import { webhookDeliveriesProjection } from './read-models/webhook-deliveries.ts';
import { DEFAULT_DELIVERY_LOG_RETENTION_MS } from './read-models/webhook-retention.ts';
import { webhookSubscriptionsProjection } from './read-models/webhook-subscriptions.ts';

/**
 * `deliveryLogRetentionMs`: `PDS_DELIVERY_LOG_RETENTION`, how long the `webhook_deliveries` projection
 * keeps finished deliveries (30 days unless said).
 */
export function allProjections(options: { deliveryLogRetentionMs?: number } = {}): Projection[] {
  return [
    partnerKeysProjection,
    operatorsProjection,
    catalogProjection,
    cartsProjection,
    webhookSubscriptionsProjection,
    webhookDeliveriesProjection(options.deliveryLogRetentionMs ?? DEFAULT_DELIVERY_LOG_RETENTION_MS),
  ];
}
