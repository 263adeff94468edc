/** Bench data is appended straight to the store: a domain event with the metadata the handler would add. */
import { randomUUID } from 'node:crypto';
import type { DomainEvent } from '../domain/decider.ts';
import { eventRegistry } from '../domain/index.ts';
import * as store from '../domain/store.ts';
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

/** A store of the benches' own, at 1 Broadway, Denver, with pickup and no hours. */
export const benchStore = (storeId: number, name: string, at: string): DomainEvent =>
  store.events.StoreUpserted({
    store_id: storeId,
    name,
    display_name: null,
    store_url: null,
    address: '1 Broadway',
    city: 'Denver',
    state: 'CO',
    zip: '80203',
    lat: 39.72,
    long: -104.98,
    phone: null,
    time_zone: 'America/Denver',
    recreational: true,
    medical: false,
    pickup: true,
    delivery: false,
    curbside: false,
    working_hours: [],
    upserted_at: at,
  });
