/**
 * What the admin routes share: the base path, reference checks against the event store and
 * read-your-writes waits on the read models.
 */
import { type EventStore, StreamNotFoundError } from '../eventstore/port.ts';
import type { ReadStore } from '../projections/read-store.ts';
import { HttpProblem } from './http.ts';
import { pathUuid } from './validation.ts';

export const ADMIN_BASE = '/admin/v1';

/**
 * The id a list's `cursor` (the base64url of the last id listed) goes on after; 400 `invalid_cursor`
 * for a cursor this API did not give out.
 */
export function uuidAfterCursor(cursor: string): string {
  const after = Buffer.from(cursor, 'base64url').toString('utf8');
  if (!pathUuid.safeParse(after).success) {
    throw new HttpProblem(400, { code: 'invalid_cursor', detail: 'the cursor is not one this API gave out' });
  }
  return after;
}

/**
 * Resolves once the projection has applied every event up to `position` (its checkpoint only moves on
 * the events it reads, so `position` must be one of those). Bounded: a lagging projector is a 503.
 */
export async function waitForProjection(
  readStore: ReadStore,
  name: string,
  position: number,
  timeoutMs = 5_000,
) {
  const until = Date.now() + timeoutMs;
  for (let pause = 1; ; pause = Math.min(pause * 2, 50)) {
    if (((await readStore.getCheckpoint(name))?.position ?? 0) >= position) return;
    if (Date.now() > until) {
      throw new HttpProblem(503, {
        code: 'read_model_lagging',
        detail: `the ${name} read model has not caught up yet; the write succeeded, retry the read shortly`,
        headers: { 'Retry-After': '1' },
      });
    }
    await new Promise((r) => setTimeout(r, pause));
  }
}

/** Which of these ids have no stream (`brand-7` never written): the context the partner decider needs. */
export async function missingIds(
  store: EventStore,
  prefix: string,
  ids: readonly number[],
): Promise<number[]> {
  const missing: number[] = [];
  for (const id of new Set(ids)) {
    try {
      await store.readStream(`${prefix}${id}`, { direction: 'backwards', maxCount: 1 });
    } catch (err) {
      if (!(err instanceof StreamNotFoundError)) throw err;
      missing.push(id);
    }
  }
  return missing;
}
