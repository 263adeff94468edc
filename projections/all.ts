/** Every read-model projection the service runs, in the order they start. */

import type { Projection } from './projection.ts';
import { cartsProjection } from './read-models/carts.ts';
import { catalogProjection } from './read-models/catalog/projection.ts';
import { operatorsProjection } from './read-models/operators.ts';
import { partnerKeysProjection } from './read-models/partner-keys.ts';
import { webhookDeliveriesProjection } from './read-models/webhook-deliveries.ts';
import { webhookSubscriptionsProjection } from './read-models/webhook-subscriptions.ts';

export function allProjections(): Projection[] {
  return [
    partnerKeysProjection,
    operatorsProjection,
    catalogProjection,
    cartsProjection,
    webhookSubscriptionsProjection,
    webhookDeliveriesProjection,
  ];
}
