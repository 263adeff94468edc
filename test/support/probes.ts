/** What tests of a running service poll: `/readyz`, `/metrics`, and a condition until it holds. */
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
