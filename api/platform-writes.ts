/**
 * What every platform write shares (`platform.ts`): the command run on its stream with the request's
 * metadata and `If-Match`, the facts a decider needs from other streams (the write side's lookups),
 * and the wait for this process's pricing to apply a special.
 */
import type { CommandHandler, CommandResult } from '../application/command-handler.ts';
import type { Lookups } from '../application/lookups.ts';
import type { OperatorAuthenticator } from '../application/operator-principal.ts';
import type { StoreSpecials } from '../application/store-specials.ts';
import type { Clock } from '../domain/clock.ts';
import type { Decider, DomainEvent } from '../domain/decider.ts';
import * as store from '../domain/store.ts';
import type { Actor, EventStore } from '../eventstore/port.ts';
import { type AppContext, HttpProblem } from './http.ts';
import { operatorOf } from './operator-auth.ts';
import { ifMatch } from './validation.ts';
import { commandMetadata } from './write-support.ts';

export const PLATFORM_BASE = '/platform/v1';

/** The platform's writes are the platform's, made with an operator account's token: the actor names it. */
export const platformActor = (ctx: AppContext): Actor => ({
  type: 'platform',
  id: operatorOf(ctx).operator_id,
});

export interface PlatformDeps {
  store: EventStore;
  commands: CommandHandler;
  specials: StoreSpecials;
  /** The menu product, product, brand and store a command looks up, kept folded. */
  lookups: Lookups;
  clock: Clock;
  /** Who the bearer of an operator token is (docs/operations.md, "Accounts and roles"). */
  operators: OperatorAuthenticator;
  /** How long a special's write waits for this process's pricing to apply it (5 s). */
  specialsWaitMs?: number;
  /** How long an `Idempotency-Key` binds its request and answer (`PDS_IDEMPOTENCY_TTL`; 24 hours when left out). */
  idempotencyTtlMs?: number;
  /**
   * Whether the lookups and the specials have been built (docs/operations.md, "Health"); until then
   * every write answers 503. Built when left out.
   */
  writeSideBuilt?: () => boolean;
}

/** Seconds a client waits before it asks again whether this replica's pricing applies a special. */
const PRICING_RETRY_AFTER_SECONDS = 5;

export type PlatformWrites = ReturnType<typeof platformWrites>;

/** What every platform write shares: the command run with the request's metadata, and lookups. */
export function platformWrites(deps: PlatformDeps) {
  const { commands, specials, lookups, clock } = deps;
  const now = () => clock.now().toISOString();

  /** Runs a command on one stream with the request's metadata and `If-Match`. */
  async function run<C, E extends DomainEvent, S>(
    ctx: AppContext,
    streamId: string,
    decider: Decider<C, E, S>,
    command: C,
  ): Promise<CommandResult<S, E>> {
    const result = await commands.handle(
      streamId,
      decider,
      command,
      commandMetadata(ctx, platformActor(ctx), clock),
      {
        ifMatch: ifMatch(ctx),
      },
    );
    if (result.events.length > 0) lookups.written(streamId, result.position);
    return result;
  }

  const exists = async (streamId: string, decider: Decider<never, DomainEvent, { exists: boolean }>) =>
    (await lookups.load(streamId, decider)).exists;
  const storeExists = (id: number) => exists(store.streamId(id), store.decider as never);

  /** 201 when this write created the resource, 200 otherwise. */
  const createdOr200 = (result: { events: unknown[]; revision: number }) =>
    result.events.length > 0 && result.revision + 1 === result.events.length ? 201 : 200;

  /**
   * Waits until this process's pricing applies the special written at `result` (docs/write-side.md,
   * "Lookups"). Its follower may be behind or down (just after an EventStoreDB restart it waits for its
   * pause, up to 30 s): the write stands, and the answer is a 503 that says so, never a 500.
   */
  async function pricingApplies(id: number, result: { revision: number; position: number }): Promise<void> {
    try {
      await specials.waitFor(result.position, deps.specialsWaitMs);
    } catch {
      throw new HttpProblem(503, {
        code: 'pricing_catching_up',
        detail:
          `special ${id} was written (revision ${result.revision}, position ${result.position}), but pricing ` +
          'on this replica has not caught up with it yet, so items placed here meanwhile may be priced ' +
          'without it; retry the request (it writes nothing again) to learn when it applies',
        headers: { 'Retry-After': String(PRICING_RETRY_AFTER_SECONDS) },
        extensions: { revision: result.revision, position: result.position },
      });
    }
  }

  return { run, now, exists, storeExists, createdOr200, commands, specials, lookups, pricingApplies };
}
