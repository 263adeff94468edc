/**
 * The components each role runs, in start order. The composition root (`compose.ts`) starts the ones
 * of its role and stops them in reverse.
 */
import { createAdminRouter } from '../api/admin.ts';
import { createCommandHandler } from '../api/command-handler.ts';
import { createPlatformRouter } from '../api/platform.ts';
import { type Clock, systemClock } from '../domain/clock.ts';
import { eventRegistry } from '../domain/index.ts';
import { createPartnerDirectory, type PartnerDirectory } from '../projections/partner-directory.ts';
import { createStoreSpecials, type StoreSpecials } from '../projections/store-specials.ts';
import type { Component } from './compose.ts';

/** The platform and admin APIs with the write-side lookups they need (partner keys, store specials). */
export function writeApi(clock: Clock = systemClock): Component {
  let directory: PartnerDirectory | undefined;
  let specials: StoreSpecials | undefined;
  return {
    name: 'write-api',
    roles: ['api'],
    async start(ctx) {
      const store = ctx.eventStore;
      const commands = createCommandHandler(store, eventRegistry);
      directory = createPartnerDirectory(store, eventRegistry);
      specials = createStoreSpecials(store, eventRegistry);
      let ready = false;
      ctx.readiness.add('write_side_lookups', () => ready);
      const lookups = Promise.all([directory.caughtUp, specials.caughtUp]).then(() => {
        ready = true;
      });
      const operatorToken = ctx.config.operatorToken;
      ctx.app.use(createPlatformRouter({ store, commands, specials, clock, operatorToken }).routes());
      ctx.app.use(createAdminRouter({ store, commands, directory, clock, operatorToken }).routes());
      await lookups;
    },
    async stop() {
      await directory?.stop();
      await specials?.stop();
    },
  };
}

export function defaultComponents(clock: Clock = systemClock): Component[] {
  return [writeApi(clock)];
}
