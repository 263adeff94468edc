/**
 * The MongoDB ReadStore (docs/read-side.md), whose modules are in `projections/mongo/`: this module
 * names what the rest of the service and its tests use of it. Only a MongoDB URL loads it (and the
 * driver), through a dynamic import in `projections/index.ts`.
 */

export {
  clientTimeouts,
  connectionGuard,
  DEFAULT_MONGO_TIMEOUTS,
  DEFAULT_READ_MAX_TIME_MS,
  type MongoTimeouts,
  ReadStoreUnavailableError,
  transactionsProblem,
} from './mongo/connection.ts';
export { type LiveNameCache, type LiveNames, liveNameCache } from './mongo/live-names.ts';
export {
  createMongoReadStore,
  DEFAULT_LIVE_NAMES_TTL_MS,
  DEFAULT_RETIRED_GRACE_MS,
  type MongoReadStore,
  type MongoReadStoreOptions,
} from './mongo/read-store.ts';
export { commitFailure } from './mongo/transaction.ts';
export { CommitTooLargeError } from './read-store.ts';
