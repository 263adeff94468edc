/** Where a deployment's stores are, as the configuration names them (docs/operations.md, "Backups"). */
import path from 'node:path';

/**
 * The variables naming a store of the embedded deployment that is not a file in the data dir: a
 * backup copies the data dir, and such a store would be left out of it (docs/operations.md,
 * "Backups"). A read store in memory is rebuilt from the log and needs no copy; a key store that is
 * not a file of the data dir (a file elsewhere, a MongoDB collection) holds keys a backup would lack.
 */
export function storesOutsideDataDir(
  config: Record<'dataDir' | 'eventStoreUrl' | 'readStoreUrl' | 'dispatcherStoreUrl' | 'keyStoreUrl', string>,
): string[] {
  const elsewhere = (url: string) =>
    url.startsWith('sqlite:') && path.dirname(path.resolve(url.slice('sqlite:'.length))) !== config.dataDir;
  const stores: [string, boolean][] = [
    ['PDS_EVENT_STORE', elsewhere(config.eventStoreUrl)],
    ['PDS_READ_STORE', elsewhere(config.readStoreUrl)],
    ['PDS_DISPATCHER_STORE', elsewhere(config.dispatcherStoreUrl)],
    ['PDS_KEY_STORE', elsewhere(config.keyStoreUrl) || !config.keyStoreUrl.startsWith('sqlite:')],
  ];
  return stores.filter(([, outside]) => outside).map(([name]) => name);
}
