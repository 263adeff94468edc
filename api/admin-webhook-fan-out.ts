/**
 * `GET /admin/v1/webhook-fan-out` (docs/operations.md, "The fan-out's group"): how far the webhook
 * fan-out's group has got, seen from any process that reaches the event store, an `api` process of a
 * split deployment too: its checkpoint, the oldest cart event after it and that event's age, `behind`
 * past 5 minutes, and what is parked in it. The fan-out never parks, so an event it keeps failing on
 * shows here as an age that grows. One read of the group's info and one filtered read of the log.
 */
import type Router from '@koa/router';
import { z } from 'zod';
import type { Clock } from '../domain/clock.ts';
import type { EventStore } from '../eventstore/port.ts';
import { fanOutProgress } from '../webhooks/fan-out-group.ts';
import type { AppState } from './http.ts';
import { parseParams } from './validation.ts';

export function webhookFanOutRoutes(
  router: Router<AppState>,
  deps: { store: EventStore; clock: Clock },
): void {
  router.get('/webhook-fan-out', async (ctx) => {
    parseParams(ctx.query, z.strictObject({}));
    ctx.body = { fan_out: await fanOutProgress(deps.store, deps.clock.now()) };
  });
}
