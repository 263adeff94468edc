/**
 * Leases in the SQLite read store's `pds_leases` table, one row per lease: its holder, the token of
 * the last acquisition and when it runs out (ms since the epoch, by the store's clock: every process
 * on one file shares the machine's). Each function runs inside the caller's write transaction, so an
 * acquisition and a fenced write are serialized by SQLite's write lock: a write checked against a
 * token commits before any later acquisition, or is refused (docs/read-side.md, "One projector at a time").
 */
import { type Fence, type LeaseAttempt, LeaseLostError } from '../read-store.ts';
import type { Statements } from './statements.ts';

export const LEASES_TABLE =
  'CREATE TABLE IF NOT EXISTS pds_leases (name TEXT PRIMARY KEY, owner TEXT NOT NULL, token INTEGER NOT NULL, expires_at INTEGER NOT NULL)';

type LeaseRow = [owner: string, token: number, expiresAt: number];

function row(statements: Statements, name: string): LeaseRow | undefined {
  return statements.get('SELECT owner, token, expires_at FROM pds_leases WHERE name = ?').get(name) as
    | LeaseRow
    | undefined;
}

export function acquireLease(
  statements: Statements,
  name: string,
  owner: string,
  ttlMs: number,
  now: number,
  from?: string,
): LeaseAttempt {
  const held = row(statements, name);
  if (held && held[0] !== owner && held[0] !== from && held[2] > now) {
    return { acquired: false, holder: held[0], expiresInMs: held[2] - now };
  }
  const token = (held?.[1] ?? 0) + 1;
  statements
    .get(
      `INSERT INTO pds_leases (name, owner, token, expires_at) VALUES (?, ?, ?, ?)
         ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, token = excluded.token,
         expires_at = excluded.expires_at`,
    )
    .run(name, owner, token, now + ttlMs);
  return { acquired: true, fence: { lease: name, token } };
}

/** Moves the expiry while `fence` is the last acquisition; false once it is not. */
export function renewLease(statements: Statements, fence: Fence, expiresAt: number): boolean {
  const result = statements
    .get('UPDATE pds_leases SET expires_at = ? WHERE name = ? AND token = ?')
    .run(expiresAt, fence.lease, fence.token);
  return Number(result.changes) === 1;
}

/** Throws LeaseLostError unless `fence` is the lease's last acquisition (the caller then rolls back). */
export function assertFence(statements: Statements, fence: Fence | undefined): void {
  if (fence === undefined) return;
  if (row(statements, fence.lease)?.[1] !== fence.token) throw new LeaseLostError(fence);
}
