/** Bench data is appended straight to the store: a domain event with the metadata the handler would add. */
import { randomUUID } from 'node:crypto';
import type { DomainEvent } from '../domain/decider.ts';
import { eventRegistry } from '../domain/index.ts';
import type { NewEvent } from '../eventstore/port.ts';

export const toNewEvent = (e: DomainEvent, at: string): NewEvent => ({
  type: e.type,
  data: e.data,
  metadata: {
    correlation_id: randomUUID(),
    causation_id: null,
    actor: { type: 'platform', id: 'bench' },
    occurred_at: at,
    schema_version: eventRegistry.versionOf(e.type),
  },
});
