/**
 * Projection checkpoints in the SQLite read store's `pds_checkpoints` table, one row per name (with its
 * `version`). Writing one is part of the caller's transaction, so a batch and its checkpoint commit
 * together (docs/read-side.md).
 */
import type { Checkpoint, NamedCheckpoint } from '../read-store.ts';
import type { Statements } from './statements.ts';

/** Stores a checkpoint; the caller holds the transaction. */
export function writeCheckpoint(statements: Statements, { name, checkpoint }: NamedCheckpoint): void {
  statements
    .get(
      `INSERT INTO pds_checkpoints (name, position, events, updated_at, version) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (name) DO UPDATE SET position = excluded.position, events = excluded.events,
         updated_at = excluded.updated_at, version = excluded.version`,
    )
    .run(name, checkpoint.position, checkpoint.events, checkpoint.updated_at, checkpoint.version ?? null);
}

export function readCheckpoint(statements: Statements, name: string): Checkpoint | undefined {
  const row = statements
    .get('SELECT position, events, updated_at, version FROM pds_checkpoints WHERE name = ?')
    .get(name) as [number, number, string, string | null] | undefined;
  if (!row) return undefined;
  const [position, events, updated_at, version] = row;
  const checkpoint: Checkpoint = { position, events, updated_at };
  if (version !== null) checkpoint.version = version;
  return checkpoint;
}
