/**
 * `npm run bench`: runs every bench and prints one JSON line each, with its figures, the baseline
 * measured in the same run, and `ratio` (ours / baseline). Pass bench names to run only some. The
 * benches of `NAMED_ONLY` run only when named: `fanout` takes 10 minutes or more, `during-rebuild` 3 or
 * more.
 */
import { benchApi } from './api.ts';
import { benchApiDuringRebuild } from './api-rebuild.ts';
import { benchBackup } from './backup.ts';
import { benchCatalogListings } from './catalog-listings.ts';
import { benchEventStore } from './eventstore.ts';
import { benchProjectionRebuild } from './projection.ts';
import { benchRestart } from './restart.ts';
import { benchTimers } from './timers.ts';
import { benchWebhooks } from './webhook.ts';
import { benchWebhookFanOut } from './webhook-fanout.ts';

const benches: Record<string, () => Promise<Array<{ name: string }>>> = {
  eventstore: () => benchEventStore(),
  projection: async () => [...(await benchProjectionRebuild()), ...(await benchCatalogListings())],
  webhook: () => benchWebhooks(),
  fanout: () => benchWebhookFanOut(),
  api: () => benchApi(),
  timers: () => benchTimers(),
  restart: () => benchRestart(),
  backup: () => benchBackup(),
  'during-rebuild': () => benchApiDuringRebuild(),
};

const NAMED_ONLY = new Set(['fanout', 'during-rebuild']);

const only = process.argv.slice(2);
for (const [name, run] of Object.entries(benches)) {
  if (only.length > 0 ? !only.includes(name) : NAMED_ONLY.has(name)) continue;
  for (const line of await run()) console.log(JSON.stringify({ ...line, node: process.version }));
}
