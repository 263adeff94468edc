/**
 * The person behind an actor id, where the admin API shows who did something (a cart's history, a
 * delivery's redeliveries, who viewed a cart): the account's name from the `operators` read model,
 * beside the id, which stays the reference (docs/operations.md, "Accounts and roles"). Events of
 * operators and of the platform name an account (or `bootstrap`); partners and the system are not
 * people, and keep no name.
 */
import { BOOTSTRAP_OPERATOR } from '../application/operator-principal.ts';
import type { Actor } from '../eventstore/port.ts';
import { OPERATORS, type OperatorDoc, operatorNames } from '../projections/read-models/operators.ts';
import type { Collection, ReadStore } from '../projections/read-store.ts';

export type NamedActor = Actor & {
  /** The account's name; null for a partner, the system, or an account the read model does not hold. */
  name: string | null;
};

const isPerson = (actor: Actor) => actor.type === 'operator' || actor.type === 'platform';

export type ActorNamer = (actors: readonly Actor[]) => Promise<(actor: Actor) => NamedActor>;

/** Names actors with one read of the accounts they mention. */
export function actorNamer(readStore: ReadStore): ActorNamer {
  let collection: Collection<OperatorDoc> | undefined;
  return async (actors) => {
    const ids = [...new Set(actors.filter(isPerson).map((a) => a.id))].filter(
      (id) => id !== BOOTSTRAP_OPERATOR.operator_id,
    );
    collection ??= await readStore.collection<OperatorDoc>(OPERATORS);
    const names = await operatorNames(collection, ids);
    names.set(BOOTSTRAP_OPERATOR.operator_id, BOOTSTRAP_OPERATOR.name);
    return (actor) => ({
      type: actor.type,
      id: actor.id,
      name: isPerson(actor) ? (names.get(actor.id) ?? null) : null,
    });
  };
}

type Redelivered = { redeliveries: ReadonlyArray<{ requested_by: Actor | null }> };
type NamedRedeliveries<T extends Redelivered> = Omit<T, 'redeliveries'> & {
  redeliveries: Array<T['redeliveries'][number] & { requested_by: NamedActor | null }>;
};

/** Delivery records with the name of whoever asked for each redelivery (one read for them all). */
export async function withRequesterNames<T extends Redelivered>(
  named: ActorNamer,
  records: readonly T[],
): Promise<NamedRedeliveries<T>[]> {
  const name = await named(
    records.flatMap((r) => r.redeliveries.flatMap((x) => (x.requested_by ? [x.requested_by] : []))),
  );
  return records.map((r) => ({
    ...r,
    redeliveries: r.redeliveries.map((x) => ({
      ...x,
      requested_by: x.requested_by ? name(x.requested_by) : null,
    })),
  }));
}
