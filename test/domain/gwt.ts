/** Given/when/then for deciders: given past events, when a command, then new events or a refusal. */
import type { ExecutionContext } from 'ava';
import { type Decider, DomainError, type DomainEvent, fold } from '../../domain/decider.ts';

export function scenario<C, E extends DomainEvent, S>(decider: Decider<C, E, S>) {
  return {
    given(events: E[]) {
      const state = fold(decider, events);
      return {
        state,
        when(command: C) {
          return {
            thenEmits(t: ExecutionContext, expected: E[]) {
              t.deepEqual(decider.decide(command, state), expected);
            },
            thenRefused(t: ExecutionContext, code: string, kind?: DomainError['kind']) {
              const err = t.throws(() => decider.decide(command, state), { instanceOf: DomainError });
              t.is(err?.code, code);
              if (kind) t.is(err?.kind, kind);
              return err;
            },
          };
        },
      };
    },
  };
}
