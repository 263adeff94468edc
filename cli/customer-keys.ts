/**
 * Opens the customer key store `PDS_KEY_STORE` names (docs/operations.md, "Customer data"): the
 * embedded `keys.db`, or MongoDB's collections, whose driver is loaded only then.
 */
import type { CustomerKeyStore } from '../application/customer-keys.ts';
import { recordErasuresIn } from '../application/erasure-ledger.ts';
import { openSqliteKeyStore } from '../eventstore/key-store-sqlite.ts';
import type { Config } from './config.ts';

export async function openKeyStore(url: string): Promise<CustomerKeyStore> {
  if (url.startsWith('mongodb')) {
    const { openMongoKeyStore } = await import('../eventstore/key-store-mongo.ts');
    return openMongoKeyStore(url);
  }
  return openSqliteKeyStore(url.slice('sqlite:'.length));
}

/**
 * The key store, each of whose erasures is also written to the ledger in `PDS_BACKUP_DIR` first, when
 * backups are kept there (embedded deployment): a restore applies it again (docs/operations.md,
 * "Backups"). The ledger's module is loaded only then.
 */
export async function withErasureLedger(
  config: Pick<Config, 'backupDir' | 'embedded'>,
  keys: CustomerKeyStore,
): Promise<CustomerKeyStore> {
  if (config.backupDir === null || !config.embedded) return keys;
  const { fileErasureLedger } = await import('./backup/erasure-ledger.ts');
  return recordErasuresIn(keys, fileErasureLedger(config.backupDir));
}
