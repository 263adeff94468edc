/**
 * What the customer data tests share (docs/operations.md, "Customer data"): a customer whose values no
 * random bytes or base64 text of the files would hold by chance, a cart identified with them, the
 * cart's history and stored customer, and the scan of a data dir's files for the customer's bytes.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import type { ExecutionContext } from 'ava';
import { openReadStore } from '../../projections/index.ts';
import { CARTS, type CartDoc, cartByUuid } from '../../projections/read-models/carts.ts';
import { addItem, createCart, type WorldCart } from './cart-world.ts';
import { until } from './probes.ts';
import type { TestService } from './service.ts';

export const customer = {
  email: 'zebulonia.quixwhistle@example.org',
  first_name: 'Zebulonia',
  last_name: 'Quixwhistle',
  phone_number: '+14155557319',
  DOB: '1987-06-05T00:00:00.000Z',
};
/** The customer's values an erasure must leave no byte of. */
export const personal = [customer.email, customer.first_name, customer.last_name, customer.phone_number];

/** A cart with an item, its customer identified. */
export async function identifiedCart(t: ExecutionContext, s: TestService): Promise<WorldCart> {
  const cart = await createCart(s);
  await addItem(s, cart);
  t.is((await s.call('PUT', `/platform/v1/carts/${cart.uuid}/customer`, customer)).status, 200);
  return cart;
}

export const caughtUp = (s: TestService) =>
  until('the projections have caught up', async () => {
    const { projections } = (await (await s.call('GET', '/admin/v1/projections')).json()) as {
      projections: Array<{ lag_events: number }>;
    };
    return projections.every((p) => p.lag_events === 0);
  });

/** The cart's history as an auditor reads it. */
export async function historyOf(s: TestService, cartUuid: string) {
  const res = await s.call('GET', `/admin/v1/carts/${cartUuid}/history`);
  return (await res.json()) as { events: Array<{ type: string; data: Record<string, unknown> }> };
}

/** The customer the read model of a stopped service's data dir holds for the cart. */
export async function storedCustomer(dataDir: string, cartUuid: string): Promise<unknown> {
  const read = await openReadStore(`sqlite:${path.join(dataDir, 'read.db')}`);
  const doc = await cartByUuid(await read.collection<CartDoc>(CARTS), cartUuid);
  await read.close();
  return doc?._state.customer;
}

/** Every file under `dir` (or those whose name starts with `prefix`) holding any of `values`. */
export function filesHolding(dir: string, values: readonly string[], prefix = ''): string[] {
  const found: string[] = [];
  for (const name of readdirSync(dir, { recursive: true }) as string[]) {
    const file = path.join(dir, name);
    if (!name.startsWith(prefix) || !statSync(file).isFile()) continue;
    const bytes = readFileSync(file);
    const held = values.filter((v) => bytes.includes(Buffer.from(v, 'utf8')));
    if (held.length > 0) found.push(`${name}: ${held.join(', ')}`);
  }
  return found;
}

/** Copies every database's WAL into its file, as SQLite's automatic checkpoints do in time. */
export function checkpoint(dir: string): void {
  for (const name of readdirSync(dir).filter((n) => n.endsWith('.db'))) {
    const db = new DatabaseSync(path.join(dir, name));
    db.exec('PRAGMA busy_timeout = 5000');
    db.exec('PRAGMA wal_checkpoint(TRUNCATE)');
    db.close();
  }
}
