/**
 * A role thread's entry (`role-thread.ts`): turns on Node's compile cache for this thread (a worker
 * thread does not share its parent's), then runs the thread's program (`thread-run.ts`), whose
 * modules then come from the cache, as `cli/pds.ts` does for the main thread.
 */
import { enableCompileCache } from 'node:module';

enableCompileCache();
await import('./thread-run.ts');
