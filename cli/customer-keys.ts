/**
 * Opens the customer key store `PDS_KEY_STORE` names (docs/operations.md, "Customer data"): the
 * embedded `keys.db`, or MongoDB's collections, whose driver is loaded only then. And finishes, at a
 * start, the erasures an earlier run began and did not finish.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { createCommandHandler } from '../application/command-handler.ts';
import type { CustomerData } from '../application/customer-data.ts';
import { finishPendingErasures } from '../application/customer-erasure.ts';
import type { CustomerKeyStore } from '../application/customer-keys.ts';
import { recordErasuresIn } from '../application/erasure-ledger.ts';
import { eventRegistry } from '../domain/index.ts';
import { erasuresRecordedIn, openSqliteKeyStore } from '../eventstore/key-store-sqlite.ts';
import type { Actor, EventStore } from '../eventstore/port.ts';
import type { Config } from './config.ts';

export const ERASURE_ACTOR: Actor = { type: 'system', id: 'customer-erasure' };

export async function openKeyStore(url: string): Promise<CustomerKeyStore> {
  if (url.startsWith('mongodb')) {
    const { openMongoKeyStore } = await import('../projections/mongo/key-store.ts');
    return openMongoKeyStore(url);
  }
  return openSqliteKeyStore(url.slice('sqlite:'.length));
}

/**
 * The key store, each of whose erasures is also written to the ledger in `PDS_BACKUP_DIR` first, when
 * backups are kept there (embedded deployment): a restore applies it again (docs/operations.md,
 * "Backups"). A ledger created now starts with the erasures `keys.db` recorded before. The ledger's
 * module is loaded only then.
 */
export async function withErasureLedger(
  config: Pick<Config, 'backupDir' | 'embedded' | 'keyStoreUrl'>,
  keys: CustomerKeyStore,
): Promise<CustomerKeyStore> {
  if (config.backupDir === null || !config.embedded) return keys;
  const { fileErasureLedger } = await import('./backup/erasure-ledger.ts');
  const file = config.keyStoreUrl.startsWith('sqlite:') ? config.keyStoreUrl.slice('sqlite:'.length) : null;
  const earlier = () => (file === null || file === ':memory:' ? [] : erasuresRecordedIn(file));
  return recordErasuresIn(keys, fileErasureLedger(config.backupDir, earlier));
}

/**
 * Finishes the erasures an earlier run recorded and did not finish (its keys destroyed, its carts
 * recorded). A failure is logged and does not stop the start: the erasure stays pending, for the next
 * start or the next erasure.
 */
export async function finishErasures(data: CustomerData, store: EventStore, logger: Logger): Promise<number> {
  try {
    const metadata = {
      correlationId: randomUUID(),
      causationId: null,
      actor: ERASURE_ACTOR,
      at: new Date().toISOString(),
    };
    const finished = await finishPendingErasures(
      data,
      createCommandHandler(store, eventRegistry),
      metadata,
      (erasureId, error) =>
        logger.error(
          { err: error, erasure_id: erasureId },
          'could not finish a pending customer erasure; the next start or erasure will',
        ),
    );
    if (finished > 0) logger.info({ erasures: finished }, 'finished customer erasures an earlier run began');
    return finished;
  } catch (error) {
    logger.error(
      { err: error },
      'could not finish the pending customer erasures; the next start or erasure will',
    );
    return 0;
  }
}
