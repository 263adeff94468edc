/**
 * Opens the customer key store `PDS_KEY_STORE` names (docs/operations.md, "Customer data"): the
 * embedded `keys.db`, or MongoDB's collections, whose driver is loaded only then.
 */
import type { CustomerKeyStore } from '../application/customer-keys.ts';
import { openSqliteKeyStore } from '../eventstore/key-store-sqlite.ts';

export async function openKeyStore(url: string): Promise<CustomerKeyStore> {
  if (url.startsWith('mongodb')) {
    const { openMongoKeyStore } = await import('../eventstore/key-store-mongo.ts');
    return openMongoKeyStore(url);
  }
  return openSqliteKeyStore(url.slice('sqlite:'.length));
}
