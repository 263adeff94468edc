/**
 * A read store file that is lost or damaged heals itself (docs/read-side.md): the service is stopped,
 * `read.db` deleted or overwritten, and the next start rebuilds every read model from the events (no
 * checkpoint survives, so `/readyz` waits for the whole log; test/http.test.ts covers that 503), says
 * why in the log, and then gives every partner route's answer exactly as before. The answers compared
 * are those of every partner route of the hostile catalogue (its valid request), so a read model built
 * from scratch must equal the one built event by event.
 */
import { rmSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { send } from './hostile/harness.ts';
import { partnerRoutes, validQueryValues } from './hostile/routes.ts';
import { pct } from './hostile/values.ts';
import { buildWorld, caughtUp, type World } from './hostile/world.ts';
import { startService, type TestService } from './support/service.ts';

/** Every partner route's valid GET: status and body. */
async function partnerAnswers(s: TestService, world: World): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const spec of partnerRoutes.filter((r) => r.method === 'GET')) {
    const valid = spec.params(world);
    const required = (spec.requiredQuery ?? []).map((k) => `${k}=${pct(validQueryValues(k)[0])}`);
    const url =
      spec.path.replace(/:(\w+)/g, (_, name: string) => pct(valid[name][0])) +
      (required.length > 0 ? `?${required.join('&')}` : '');
    const key =
      spec.auth === 'public' || spec.auth === 'operator' || spec.auth === 'session'
        ? undefined
        : world.keys[spec.auth];
    const res = await send(s.base, undefined, {
      method: 'GET',
      url,
      headers: key ? { authorization: `Bearer ${key}` } : {},
    });
    out[url + (key ? ` (${spec.auth})` : '')] = `${res.status} ${res.text}`;
  }
  return out;
}

async function ready(s: TestService): Promise<number[]> {
  const statuses: number[] = [];
  for (let i = 0; i < 3_000; i++) {
    const res = await fetch(`${s.base}/readyz`);
    statuses.push(res.status);
    await res.body?.cancel();
    if (res.status === 200) return statuses;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`never ready: ${statuses.slice(-5).join(', ')}`);
}

/** A service with the hostile world, its partner answers, and the data dir it leaves behind. */
async function built(t: ExecutionContext) {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'pds-heal-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const first = await startService(t, { dataDir });
  const world = await buildWorld(t, first);
  await caughtUp(first);
  const answers = await partnerAnswers(first, world);
  await first.service.stop();
  return { dataDir, world, answers };
}

const file = (dataDir: string) => path.join(dataDir, 'read.db');

test('a deleted read.db is rebuilt from the events, then gives every partner answer as before', async (t) => {
  t.timeout(120_000);
  const { dataDir, world, answers } = await built(t);
  t.true(Object.keys(answers).length >= 20, 'the partner routes answered');
  for (const suffix of ['', '-wal', '-shm']) rmSync(file(dataDir) + suffix, { force: true });

  const next = await startService(t, { dataDir });
  await ready(next);
  t.regex(next.logs(), /read store created: read models are built from the events/);
  t.deepEqual(await partnerAnswers(next, world), answers);
});

test('a corrupted read.db is moved aside and rebuilt, and the log says why', async (t) => {
  t.timeout(120_000);
  const { dataDir, world, answers } = await built(t);
  writeFileSync(file(dataDir), Buffer.alloc(64 * 1024, 0x42));
  rmSync(`${file(dataDir)}-wal`, { force: true });
  rmSync(`${file(dataDir)}-shm`, { force: true });

  const next = await startService(t, { dataDir });
  await ready(next);
  t.regex(next.logs(), /read store replaced: read models are rebuilt from the events/);
  t.regex(next.logs(), /read\.db is unreadable: .*moved to .*read\.db\.unreadable/);
  t.deepEqual(await partnerAnswers(next, world), answers);
});
