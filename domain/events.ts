/**
 * Versioned event schemas. Every event type has a zod schema for its data and a schema version that
 * is written into the event's metadata; `upcast` functions lift older versions to the current shape,
 * so events written years ago stay readable and read models can always be rebuilt.
 */
import type { z } from 'zod';
import type { DomainEvent } from './decider.ts';

export interface EventDefinition<Type extends string, Schema extends z.ZodType> {
  type: Type;
  version: number;
  schema: Schema;
  /** Lifts data written at an older version to the current one. */
  upcast?: (data: unknown, fromVersion: number) => unknown;
  /** Builds the domain event, validating its data. */
  (data: z.input<Schema>): DomainEvent<Type, z.output<Schema>>;
}

export function defineEvent<Type extends string, Schema extends z.ZodType>(
  type: Type,
  schema: Schema,
  options: { version?: number; upcast?: (data: unknown, fromVersion: number) => unknown } = {},
): EventDefinition<Type, Schema> {
  const make = (data: z.input<Schema>) => ({ type, data: schema.parse(data) as z.output<Schema> });
  return Object.assign(make, { type, version: options.version ?? 1, schema, upcast: options.upcast });
}

/** The event union an aggregate's definitions produce. */
export type EventOf<Defs extends Record<string, EventDefinition<string, z.ZodType>>> = {
  [K in keyof Defs]: Defs[K] extends EventDefinition<infer T, infer S> ? DomainEvent<T, z.output<S>> : never;
}[keyof Defs];

export type AnyEventDefinition = EventDefinition<string, z.ZodType>;

export function createEventRegistry(definitions: AnyEventDefinition[]) {
  const byType = new Map<string, AnyEventDefinition>();
  for (const d of definitions) {
    if (byType.has(d.type)) throw new Error(`event type ${d.type} defined twice`);
    byType.set(d.type, d);
  }
  return {
    has: (type: string) => byType.has(type),
    get: (type: string) => byType.get(type),
    versionOf(type: string): number {
      const d = byType.get(type);
      if (!d) throw new Error(`unknown event type ${type}`);
      return d.version;
    },
    /** Validates stored data (upcasting older versions) and returns the domain event. */
    parse(type: string, data: unknown, version: number): DomainEvent {
      const d = byType.get(type);
      if (!d) throw new Error(`unknown event type ${type}`);
      const current = version < d.version && d.upcast ? d.upcast(data, version) : data;
      return { type, data: d.schema.parse(current) };
    },
    /**
     * The domain event of a stored event, for readers that must be fast (projections). Data at the
     * current version was validated when it was appended (the command handler parses every event
     * before appending), so it is trusted as is; only older versions are upcast and validated.
     */
    read(type: string, data: unknown, version: number): DomainEvent {
      const d = byType.get(type);
      if (!d) throw new Error(`unknown event type ${type}`);
      if (version === d.version) return { type, data };
      const current = version < d.version && d.upcast ? d.upcast(data, version) : data;
      return { type, data: d.schema.parse(current) };
    },
    types: () => [...byType.keys()],
  };
}
export type EventRegistry = ReturnType<typeof createEventRegistry>;
