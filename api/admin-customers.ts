/**
 * `POST /admin/v1/customers/erase` {customer: <user id | email | cart uuid>, or several in an array}:
 * erases a customer's personal data in one erasure (docs/operations.md, "Customer data"). The
 * customer goes in the body, not the path,
 * so no access log line ever holds an email address. The answer names the erasure and the carts that
 * recorded it; nothing in it, or in the events it appends, is personal.
 */
import { z } from 'zod';
import type { CommandHandler } from '../application/command-handler.ts';
import { type CustomerData, targetProblem } from '../application/customer-data.ts';
import { eraseCustomer } from '../application/customer-erasure.ts';
import type { Clock } from '../domain/clock.ts';
import { oneLine } from '../domain/schemas.ts';
import { type AdminRoute, adminRoute } from './admin-route-table.ts';
import { requestActor } from './operator-auth.ts';
import { commandMetadata } from './write-support.ts';

export interface CustomerAdminDeps {
  customerData: CustomerData;
  commands: CommandHandler;
  clock: Clock;
}

/** A user id (a positive integer), an email address, or a cart uuid; a typo is refused, never erases nothing. */
const customerTarget = oneLine(254)
  .min(1)
  .superRefine((value, ctx) => {
    const problem = targetProblem(value);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  });

/** One customer target, or several of them, all erased (or exported) at once. */
export const customerTargets = z.union([customerTarget, z.array(customerTarget).min(1).max(100)]);

const eraseBody = z.strictObject({ customer: customerTargets });

const erasureAnswer = z.object({
  /** null: the service holds nothing of that customer (never held, or erased before). */
  erasure_id: z.uuid().nullable(),
  keys_destroyed: z.number().int().nonnegative(),
  carts: z.array(z.uuid()),
  /**
   * false: the keys are destroyed and the data reads as erased, but a copy of them may still be in the
   * key store's files (a reader held them); the erasure is finished by the next one or the next start.
   */
  finished: z.boolean(),
});

export function customerRoutes(deps: CustomerAdminDeps): AdminRoute[] {
  return [
    adminRoute({
      method: 'post',
      path: '/customers/erase',
      operationId: 'eraseCustomer',
      summary: "Erase a customer's personal data",
      description:
        'Destroys the keys of the carts a user id (the carts identified with it), an email address (the carts identified with it) or a cart uuid names; ' +
        '`customer` is one of them or an array of several, all erased in one erasure: name both the user id and the email when a request gives both. ' +
        'Then records `CartCustomerErased` on each of those carts. From then on no read model, history, webhook or console view shows their ' +
        'name, email, phone number, date of birth or arrival answers. Erasing a customer the service holds nothing of (again, say) ' +
        "answers `erasure_id: null` and changes nothing. `finished: false`: the data reads as erased, but a copy of the keys may still be in the key store's files " +
        '(a reader held them); the erasure stays pending and is finished by the next erasure or the next start.',
      body: eraseBody,
      response: {
        status: 200,
        description: 'The erasure and the carts that recorded it.',
        schema: erasureAnswer,
      },
      problems: [422],
      async handler(ctx, { body }) {
        const metadata = commandMetadata(ctx, requestActor(ctx), deps.clock);
        const outcome = await eraseCustomer(
          deps.customerData,
          deps.commands,
          body.customer,
          metadata,
          (erasureId, error) =>
            ctx.state.log.warn(
              { err: error, erasure_id: erasureId },
              'could not finish an earlier customer erasure; the next erasure or start will',
            ),
        );
        ctx.state.log.info(
          {
            erasure_id: outcome.erasure_id,
            keys_destroyed: outcome.keys_destroyed,
            carts: outcome.carts.length,
            finished: outcome.finished,
          },
          outcome.finished
            ? 'customer erased'
            : 'customer erased; the key store still holds a copy of the keys in its files, the erasure is finished by the next one or the next start',
        );
        ctx.body = outcome;
      },
    }),
  ];
}
