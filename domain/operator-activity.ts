/**
 * What operators do that changes no aggregate but must be on record
 * (docs/operations.md, "Accounts and roles"): who read a cart's history (the customer's personal
 * data), and who asked for a projection's rebuild. Each is one small event of fixed size in a stream
 * of its own, appended with any expected revision (nothing is decided: the record is the fact that it
 * happened), its actor the person.
 *
 * - `cartviews-<cart_uuid>`: `CartHistoryViewed`, one per answered read of the cart's history. It holds
 *   the cart's id and the time, nothing of what was read, so "who looked at this customer" is one
 *   stream read.
 * - `projectionrebuilds-<name>`: `ProjectionRebuildRequested`, one per accepted rebuild request.
 */
import { z } from 'zod';
import { defineEvent, type EventOf } from './events.ts';
import { isoDateTime, uuid } from './schemas.ts';

export const CART_VIEWS_PREFIX = 'cartviews-';
export const cartViewsStreamId = (cartUuid: string) => `${CART_VIEWS_PREFIX}${cartUuid}`;
export const PROJECTION_REBUILDS_PREFIX = 'projectionrebuilds-';
export const projectionRebuildsStreamId = (name: string) => `${PROJECTION_REBUILDS_PREFIX}${name}`;

export const events = {
  CartHistoryViewed: defineEvent('CartHistoryViewed', z.object({ cart_uuid: uuid, viewed_at: isoDateTime })),
  ProjectionRebuildRequested: defineEvent(
    'ProjectionRebuildRequested',
    z.object({
      projection: z.string().min(1).max(100),
      /** A rebuild was running already: the request joined it. */
      already_running: z.boolean(),
      requested_at: isoDateTime,
    }),
  ),
};
export type OperatorActivityEvent = EventOf<typeof events>;

export const cartHistoryViewed = (cartUuid: string, at: string) =>
  events.CartHistoryViewed({ cart_uuid: cartUuid, viewed_at: at });

export const projectionRebuildRequested = (projection: string, alreadyRunning: boolean, at: string) =>
  events.ProjectionRebuildRequested({ projection, already_running: alreadyRunning, requested_at: at });
