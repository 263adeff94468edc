/**
 * `GET /admin/v1/webhook-fan-out` (docs/operations.md, "The fan-out's group"): how far the webhook
 * fan-out's group has got, seen from any process that reaches the event store, an `api` process of a
 * split deployment too: its checkpoint, the oldest cart event after it and that event's age, `behind`
 * past 5 minutes, and what is parked in it. The fan-out never parks, so an event it keeps failing on
 * shows here as an age that grows. One read of the group's info and one filtered read of the log.
 */
import { z } from 'zod';
import type { Clock } from '../domain/clock.ts';
import type { EventStore } from '../eventstore/port.ts';
import { fanOutProgress } from '../webhooks/fan-out-group.ts';
import { fanOut } from './admin-records.ts';
import { type AdminRoute, adminRoute } from './admin-route-table.ts';

export function webhookFanOutRoutes(deps: { store: EventStore; clock: Clock }): AdminRoute[] {
  return [
    adminRoute({
      method: 'get',
      path: '/webhook-fan-out',
      operationId: 'getWebhookFanOut',
      summary: "How far the webhook fan-out's group has got",
      description:
        'Its checkpoint, the oldest cart event after it and its age (`behind` past ' +
        '`behind_after_seconds`), the messages parked in it and the consumers joined.',
      // Strict: any parameter is a 400.
      query: z.strictObject({}),
      response: { status: 200, description: "The fan-out's progress.", schema: fanOut },
      problems: [],
      async handler(ctx) {
        ctx.body = { fan_out: await fanOutProgress(deps.store, deps.clock.now()) };
      },
    }),
  ];
}
