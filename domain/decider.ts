/**
 * The shape every aggregate follows (Emmett/Eventuous style): pure functions, no I/O.
 * `decide` turns a command and the current state into new events (or throws a DomainError);
 * `evolve` folds one event into the state. A command handler reads the stream, folds it with
 * `evolve` from `initialState`, calls `decide` and appends the result with the expected revision.
 */

/** An event as the domain sees it: its type and its data (metadata is added by the command handler). */
export interface DomainEvent<Type extends string = string, Data = unknown> {
  type: Type;
  data: Data;
}

export interface Decider<Command, Event extends DomainEvent, State> {
  initialState: State;
  decide(command: Command, state: State): Event[];
  evolve(state: State, event: Event): State;
}

/** Folds events into a state. */
export function fold<Event extends DomainEvent, State>(
  decider: Pick<Decider<unknown, Event, State>, 'initialState' | 'evolve'>,
  events: Iterable<Event>,
): State {
  let state = decider.initialState;
  for (const e of events) state = decider.evolve(state, e);
  return state;
}

/**
 * Why a command is refused. `kind` tells the API which status to answer:
 * not_found → 404, conflict → 409, invalid → 422.
 */
export type DomainErrorKind = 'not_found' | 'conflict' | 'invalid';

export class DomainError extends Error {
  override name = 'DomainError';
  readonly kind: DomainErrorKind;
  /** Machine-readable code, stable across releases (e.g. `cart_not_found`, `invalid_status_move`). */
  readonly code: string;
  /** Extra facts for the client, e.g. `{ allowed: ['preparing', 'cancelled'] }`. */
  readonly details: Record<string, unknown> | undefined;
  constructor(kind: DomainErrorKind, code: string, message: string, details?: Record<string, unknown>) {
    super(message);
    this.kind = kind;
    this.code = code;
    this.details = details;
  }
}

export const notFound = (code: string, message: string, details?: Record<string, unknown>) =>
  new DomainError('not_found', code, message, details);
export const conflict = (code: string, message: string, details?: Record<string, unknown>) =>
  new DomainError('conflict', code, message, details);
export const invalid = (code: string, message: string, details?: Record<string, unknown>) =>
  new DomainError('invalid', code, message, details);
