/**
 * `backup`: how long `pds backup` takes on a data dir with a long history while the service serves,
 * and the partner API's latency meanwhile (docs/operations.md, "Backups").
 *
 * The history (`PDS_BENCH_BACKUP_EVENTS`, default 1,000,000 events: a catalog and carts through checkout
 * and status moves, `generateEvents`) is written straight into `events.db`; `npm start`'s command then
 * builds every read model from it. Partner API load (8 connections: one menu product and the first page
 * of a store's menu) runs 8 s alone, the baseline, and then during `pds backup` run as a child process.
 * `ratio` is the p99 during the backup over the p99 without it.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import autocannon from 'autocannon';
import { openSqliteEventStore } from '../eventstore/sqlite.ts';
import type { BenchLine } from './eventstore.ts';
import { generateEvents } from './history.ts';
import { type Served, serve } from './serve.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const EVENTS = Number(process.env.PDS_BENCH_BACKUP_EVENTS ?? 1_000_000);
const round = (n: number, digits = 0) => Number(n.toFixed(digits));

interface Load {
  p50: number;
  p99: number;
  requestsPerS: number;
}

/** The partner key and paths the load reads. */
async function partnerPaths(
  served: Served,
  dir: string,
): Promise<{ headers: Record<string, string>; paths: string[] }> {
  const token = readFileSync(path.join(dir, 'operator-token'), 'utf8').trim();
  const created = await fetch(`${served.base}/admin/v1/partners`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      name: 'Backup bench',
      kind: 'store_operator',
      store_ids: [1],
      rate_limit_per_minute: 100_000,
    }),
  });
  if (created.status !== 201) throw new Error(`partner: ${created.status} ${await created.text()}`);
  const { api_key: key } = (await created.json()) as { api_key: string };
  const headers = { authorization: `Bearer ${key}` };
  for (;;) {
    const res = await fetch(`${served.base}/partner/store/v1/menu_products?limit=20`, { headers });
    if (res.status === 200) {
      const page = (await res.json()) as { menu_products: Array<{ id: number }> };
      return {
        headers,
        paths: [
          '/partner/store/v1/menu_products?limit=20',
          `/partner/store/v1/menu_products/${page.menu_products[0].id}`,
        ],
      };
    }
    await res.body?.cancel();
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Partner API load until `until` settles (or for `seconds`). */
function load(
  served: Served,
  target: { headers: Record<string, string>; paths: string[] },
  seconds: number,
  until?: Promise<unknown>,
): Promise<Load> {
  let n = 0;
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      {
        url: served.base,
        connections: 8,
        duration: seconds,
        headers: target.headers,
        requests: [{ setupRequest: (req) => ({ ...req, path: target.paths[n++ % target.paths.length] }) }],
      },
      (err, result) => {
        if (err) return reject(err);
        if (result.non2xx > 0) return reject(new Error(`backup load: ${result.non2xx} answers were not 2xx`));
        resolve({
          p50: result.latency.p50,
          p99: result.latency.p99,
          requestsPerS: Math.round(result.requests.average),
        });
      },
    );
    until?.finally(() => instance.stop());
  });
}

export async function benchBackup(): Promise<BenchLine[]> {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-bench-backup-'));
  const into = await mkdtemp(path.join(tmpdir(), 'pds-bench-backups-'));
  try {
    const es = await openSqliteEventStore(path.join(dir, 'events.db'));
    const written = await generateEvents(es, EVENTS);
    await es.close();
    const served = await serve(dir);
    try {
      const target = await partnerPaths(served, dir);
      const baseline = await load(served, target, 8);
      const began = performance.now();
      const backup = promisify(execFile)(process.execPath, ['cli/pds.ts', 'backup', into, '--json'], {
        cwd: ROOT,
        env: { PATH: process.env.PATH ?? '', PDS_DATA_DIR: dir },
        maxBuffer: 16 * 1024 * 1024,
      }).then(({ stdout }) => {
        const answer = JSON.parse(stdout) as BackupAnswer;
        return { ms: performance.now() - began, ownMs: answer.ms, manifest: answer.manifest };
      });
      const [during, taken] = await Promise.all([load(served, target, 600, backup), backup]);
      const bytes = taken.manifest.files.reduce((sum, f) => sum + f.bytes, 0);
      return [
        {
          name: 'backup',
          events: written,
          backup_events: taken.manifest.log.events,
          backup_mb: round(bytes / 1e6, 1),
          files: Object.fromEntries(taken.manifest.files.map((f) => [f.name, round(f.bytes / 1e6, 1)])),
          backup_ms: round(taken.ms),
          backup_copy_ms: taken.ownMs,
          p50_ms_during: during.p50,
          p99_ms_during: during.p99,
          requests_per_s_during: during.requestsPerS,
          baseline: 'the same partner API load without a backup',
          baseline_p50_ms: baseline.p50,
          baseline_p99_ms: baseline.p99,
          baseline_requests_per_s: baseline.requestsPerS,
          ratio: round(during.p99 / baseline.p99, 2),
        },
      ];
    } finally {
      await served.stop('SIGTERM');
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
    await rm(into, { recursive: true, force: true });
  }
}

interface BackupAnswer {
  /** The copy's own time, as `pds backup` measured it (without loading the program). */
  ms: number;
  manifest: { log: { events: number }; files: Array<{ name: string; bytes: number }> };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  for (const line of await benchBackup()) console.log(JSON.stringify(line));
}
