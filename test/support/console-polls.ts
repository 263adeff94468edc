/**
 * The console's slow polls stopped, for browser tests that check what an action reads: an init script
 * (`addInitScript`) that makes every `setInterval` of 10 s or more (the health, deliveries and
 * trouble counts; api/console-assets/) wait an hour instead. A read that follows an action within
 * the test then came from the action, never from a poll that happened to fall due. Shorter intervals
 * (the projections' 1 s) are left as they are.
 */
export const SLOW_POLLS = `(() => {
  const every = globalThis.setInterval;
  globalThis.setInterval = (run, ms, ...rest) => every(run, ms >= 10000 ? 3600000 : ms, ...rest);
})()`;
