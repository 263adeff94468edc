/**
 * A service context that records which store each component opens and with what options (the page
 * caches of `cli/dispatcher-state.ts` and `cli/read-side.ts`), opening an in-memory SQLite store.
 */
import { pino } from 'pino';
import type { ServiceContext } from '../../cli/compose.ts';
import type { Config } from '../../cli/config.ts';
import type { OpenReadStoreOptions } from '../../projections/index.ts';
import { openSqliteReadStore } from '../../projections/sqlite/read-store.ts';

export function recordingOpenings(config: Config): {
  ctx: ServiceContext;
  opened: Array<{ url: string } & OpenReadStoreOptions>;
} {
  const opened: Array<{ url: string } & OpenReadStoreOptions> = [];
  const ctx = {
    config,
    logger: pino({ level: 'silent' }),
    readiness: { add() {} },
    async openReadStore(url: string, options: OpenReadStoreOptions) {
      opened.push({ url, ...options });
      return openSqliteReadStore(':memory:', options);
    },
  } as unknown as ServiceContext;
  return { ctx, opened };
}
