/** Every aggregate's events in one registry: what the command handler validates and readers upcast with. */
import * as brand from './brand.ts';
import * as cart from './cart.ts';
import { type AnyEventDefinition, createEventRegistry } from './events.ts';
import * as menuProduct from './menu-product.ts';
import * as operatorAccount from './operator-account.ts';
import * as operatorActivity from './operator-activity.ts';
import * as partner from './partner.ts';
import * as product from './product.ts';
import * as review from './review.ts';
import * as special from './special.ts';
import * as store from './store.ts';
import * as webhookDelivery from './webhook-delivery.ts';
import * as webhookDeliveryRetention from './webhook-delivery-retention.ts';
import * as webhookSubscription from './webhook-subscription.ts';

export const aggregates = {
  brand,
  cart,
  menuProduct,
  operatorAccount,
  operatorActivity,
  partner,
  product,
  review,
  special,
  store,
  webhookSubscription,
  webhookDelivery,
  webhookDeliveryRetention,
};

export const eventRegistry = createEventRegistry(
  Object.values(aggregates).flatMap((a) => Object.values(a.events) as AnyEventDefinition[]),
);
