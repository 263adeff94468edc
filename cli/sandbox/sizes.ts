/**
 * The sandbox's sizes and seed, apart from the generator: the configuration reads them at every start,
 * and the generator (1,500 lines) is loaded only when a sandbox is seeded (docs/read-side.md,
 * "Start-up and restart").
 */

/** Stores in the sandbox unless `PDS_SANDBOX_SIZE` says otherwise; everything else scales with them. */
export const DEFAULT_SANDBOX_SIZE = 50;
export const MAX_SANDBOX_SIZE = 500;
export const DEFAULT_SANDBOX_SEED = 1;
