#!/usr/bin/env node
/**
 * `pds`: turns on Node's on-disk compile cache, then runs the program (`cli/program.ts`). The cache
 * keeps every module's type-stripped source and V8 code, so a restart does not strip and compile them
 * again: about a third of the time from `npm start` to `/readyz` (docs/read-side.md). It lives in
 * `NODE_COMPILE_CACHE`, or in the system's temporary directory; without it the program runs as before.
 */
import { enableCompileCache } from 'node:module';

enableCompileCache();
await import('./program.ts');
