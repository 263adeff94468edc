#!/usr/bin/env -S MALLOC_ARENA_MAX=2 node --scavenger-max-new-space-capacity-mb=8 --v8-pool-size=0 --heap-growing-percent=50
/**
 * `pds`: turns on Node's on-disk compile cache, then runs the program (`cli/program.ts`). The cache
 * keeps every module's type-stripped source and V8 code, so a restart does not strip and compile them
 * again: about a third of the time from `npm start` to `/readyz` (docs/read-side.md). It lives in
 * `NODE_COMPILE_CACHE`, or in the system's temporary directory; without it the program runs as before.
 *
 * `--scavenger-max-new-space-capacity-mb=8` (here, in `npm start` and in the image's commands): V8 otherwise lets
 * its young generation grow to 128 MB under request load on a large machine, most of a serving
 * process's memory; 16 MB semi-spaces (8 MB doubled, without pointer compression) cost no throughput.
 * Unlike `--max-semi-space-size`, which overrides every isolate's limit, it is a default the role
 * threads lower (`cli/role-thread.ts`; docs/read-side.md, "Memory"). `NODE_OPTIONS` cannot carry it.
 *
 * `--heap-growing-percent=50`: each isolate collects its old generation once it has grown by half of
 * what survived the last full collection; V8 otherwise lets it grow up to four times that on a machine
 * with gigabytes, which in `webhook.fanout` held most of the process's memory as garbage. A quarter
 * held less, but its more frequent collections doubled `webhook.e2e`'s p99 (docs/read-side.md, "Memory").
 */
import { enableCompileCache } from 'node:module';

enableCompileCache();
await import('./program.ts');
