/** What tests of a running service poll: `/readyz`, `/metrics`, and a condition until it holds; and a role thread's end. */
import type { Worker } from 'node:worker_threads';
import type { RoleThread } from '../../cli/role-thread.ts';
import type { TestService } from './service.ts';

export async function readyz(
  s: Pick<TestService, 'base'>,
): Promise<{ code: number; checks: Record<string, string> }> {
  const res = await fetch(`${s.base}/readyz`);
  return { code: res.status, checks: ((await res.json()) as { checks: Record<string, string> }).checks };
}

export const metrics = async (s: Pick<TestService, 'base'>) => (await fetch(`${s.base}/metrics`)).text();

/** Resolves with the check's first truthy answer; throws, naming `what`, after `timeoutMs`. */
export async function until<T>(
  what: string,
  check: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 15_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const answer = await check();
    if (answer) return answer;
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Ends the role thread's running worker as a crash would, and resolves with it once it exited. */
export async function killThread(thread: RoleThread): Promise<Worker> {
  const dead = thread.worker;
  if (!dead) throw new Error(`no ${thread.role} thread runs`);
  const exited = new Promise((resolve) => dead.once('exit', resolve));
  await dead.terminate();
  await exited;
  return dead;
}
