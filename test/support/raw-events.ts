/**
 * Events of no aggregate, for tests of the event store itself: fixed metadata, and an event of a
 * given type (and data) carrying it.
 */
import type { NewEvent } from '../../eventstore/port.ts';

export const META = {
  correlation_id: 'c',
  causation_id: null,
  actor: { type: 'system', id: 'test' },
  occurred_at: '2026-01-01T00:00:00.000Z',
  schema_version: 1,
} as const;

export const rawEvent = (type: string, data: Record<string, unknown> = {}): NewEvent => ({
  type,
  data,
  metadata: META,
});
