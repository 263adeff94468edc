/**
 * `pds customers erase <user id | email | cart uuid>...`: erases a customer's personal data through
 * the admin API (`POST /admin/v1/customers/erase`, role `operator`), every identifier named in one
 * erasure, and prints the erasure and the carts that recorded it. `pds customers export <…>...`:
 * everything held about them
 * (`POST /admin/v1/customers/export`; docs/operations.md, "Customer data"). `pds customers protect`:
 * `customers-protect.ts`.
 */
import type { Command } from 'commander';
import { targetProblem } from '../../application/customer-data.ts';
import { CliError, createAdminClient, EXIT, table } from '../client.ts';
import { printJson } from '../options.ts';
import { plural } from '../terminal.ts';
import { registerProtect } from './customers-protect.ts';
import { runClientCommand } from './run.ts';

interface Erasure {
  erasure_id: string | null;
  keys_destroyed: number;
  carts: string[];
  finished: boolean;
}

interface ExportedCart {
  cart: { uuid: string; status: string; customer: Record<string, unknown> | null };
  webhooks: unknown[];
}

/** The identifiers as given, each checked: a typo exits with the usage code, naming it. */
function targets(customer: string[]): string[] {
  for (const value of customer) {
    const problem = targetProblem(value);
    if (problem) throw new CliError(`${JSON.stringify(value)} ${problem}`, EXIT.usage);
  }
  return customer;
}

export function registerCustomers(program: Command): void {
  const customers = program.command('customers').description("customers' personal data");
  customers
    .command('erase')
    .description(
      'destroy the keys of the carts these identifiers name (docs/operations.md, Customer data): from then on no read model, history, webhook or console shows their customer',
    )
    .argument('<customer...>', 'user ids, email addresses or cart uuids: all of one customer, erased at once')
    .option('--json', 'print {erasure_id, keys_destroyed, carts, finished} as JSON')
    .action((customer: string[], options: { json?: boolean }) =>
      runClientCommand(async () => {
        const checked = targets(customer);
        const client = await createAdminClient();
        const erasure = await client.request<Erasure>('POST', '/admin/v1/customers/erase', {
          customer: checked,
        });
        if (options.json) return printJson(erasure);
        if (erasure.erasure_id === null)
          return 'nothing to erase: the service holds no data of that customer\n';
        const pending = erasure.finished
          ? ''
          : 'pending: the key store still holds a copy of the keys in its files (a reader held them); the next erasure or the next start finishes it\n';
        return (
          `erasure ${erasure.erasure_id}: ${plural(erasure.keys_destroyed, 'key')} destroyed, ` +
          `${plural(erasure.carts.length, 'cart')} recorded it\n${erasure.carts.map((c) => `  ${c}\n`).join('')}${pending}`
        );
      }),
    );
  customers
    .command('export')
    .description(
      'everything held about a customer: their carts, arrivals and the webhooks sent with their data',
    )
    .argument('<customer...>', 'user ids, email addresses or cart uuids of one customer')
    .option('--json', 'print the whole document as JSON')
    .action((customer: string[], options: { json?: boolean }) =>
      runClientCommand(async () => {
        const checked = targets(customer);
        const client = await createAdminClient();
        const answer = await client.request<{ export: { exported_at: string; carts: ExportedCart[] } }>(
          'POST',
          '/admin/v1/customers/export',
          { customer: checked },
        );
        if (options.json) return printJson(answer.export);
        if (answer.export.carts.length === 0) return 'the service holds no data of that customer\n';
        return `${table(
          ['cart', 'status', 'customer', 'webhooks'],
          answer.export.carts.map((c) => [
            c.cart.uuid,
            c.cart.status,
            c.cart.customer === null ? '' : JSON.stringify(c.cart.customer),
            c.webhooks.length,
          ]),
        )}\n`;
      }),
    );
  registerProtect(customers);
}
