/**
 * The sample cart of a test request (`POST /admin/v1/webhooks/{id}/test`, `admin-webhook-deliveries.ts`):
 * clearly synthetic (a fixed uuid, a sample customer and product), in the subscription's first store,
 * rendered into a body of either kind exactly as a real delivery's.
 */
import * as cart from '../domain/cart.ts';
import type * as webhooks from '../domain/webhook-subscription.ts';

/** The cart of every test request: a fixed, recognisably synthetic uuid. */
export const SAMPLE_CART_UUID = '00000000-0000-4000-8000-5a3b1ec0ffee';

/** A sample cart for test requests: clearly synthetic, in the given store, with one line and a customer. */
export function sampleCart(storeId: number, now: Date, kind: webhooks.WebhookEventKind): cart.Cart {
  const created = new Date(now.getTime() - 3_600_000).toISOString();
  const at = now.toISOString();
  const abandoned = kind === 'cart_abandoned';
  return {
    exists: true,
    uuid: SAMPLE_CART_UUID,
    store_id: storeId,
    source: { channel: 'headless', partner_id: null },
    user_id: null,
    created_at: created,
    updated_at: at,
    lines: [
      {
        menu_product_id: 1,
        price_id: 'eighth ounce',
        count: 1,
        product_id: 1,
        store_id: storeId,
        name: 'Sample Product (test webhook)',
        brand: 'Sample Brand',
        brand_id: 1,
        kind: 'flower',
        kind_subtype: null,
        lineage: 'hybrid',
        image_urls: [],
        unit_price: '35.00',
        discounted_unit_price: '35.00',
        special_id: null,
        special_title: null,
      },
    ],
    first_item_at: created,
    customer: {
      email: 'sample.customer@example.com',
      first_name: 'Sample',
      last_name: 'Customer',
      phone_number: '+15555550100',
      DOB: '1990-01-01T00:00:00.000Z',
    },
    status: abandoned ? 'pending' : 'verification',
    reservation_mode: abandoned ? null : 'pickup',
    reservation_start_window: abandoned ? '' : at.slice(0, 16).replace('T', ' '),
    checked_out_at: abandoned ? null : at,
    promo_code: null,
    rating: 0,
    abandoned_at: abandoned ? at : null,
    curbside_arrivals: [],
    ...cart.noAssignment,
  };
}
