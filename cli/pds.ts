#!/usr/bin/env -S node --max-semi-space-size=16
/**
 * `pds`: turns on Node's on-disk compile cache, then runs the program (`cli/program.ts`). The cache
 * keeps every module's type-stripped source and V8 code, so a restart does not strip and compile them
 * again: about a third of the time from `npm start` to `/readyz` (docs/read-side.md). It lives in
 * `NODE_COMPILE_CACHE`, or in the system's temporary directory; without it the program runs as before.
 *
 * `--max-semi-space-size=16` (here, in `npm start` and in the image's `NODE_OPTIONS`): V8 otherwise
 * lets its young generation grow to 128 MB under request load on a large machine, most of a serving
 * process's memory; 16 MB semi-spaces cost no throughput (docs/read-side.md, "Memory").
 */
import { enableCompileCache } from 'node:module';

enableCompileCache();
await import('./program.ts');
