/**
 * Projection checkpoints in the MongoDB read store: the `_checkpoints` collection, one document per
 * name (with its `version`), written in the transaction of the batch or promote they belong to.
 */
import type { ClientSession, Collection as MongoCollection } from 'mongodb';
import type { Checkpoint, NamedCheckpoint } from '../read-store.ts';

export const CHECKPOINTS = '_checkpoints';

export type CheckpointDoc = { _id: string } & Checkpoint;

/** The stored form: exactly the port's fields (a version only when there is one). */
export function checkpointFields({ position, events, updated_at, version }: Checkpoint): Checkpoint {
  return version === undefined ? { position, events, updated_at } : { position, events, updated_at, version };
}

export async function writeCheckpoints(
  checkpoints: MongoCollection<CheckpointDoc>,
  list: readonly NamedCheckpoint[],
  session: ClientSession,
): Promise<void> {
  for (const { name, checkpoint } of list) {
    await checkpoints.replaceOne({ _id: name }, checkpointFields(checkpoint), { upsert: true, session });
  }
}
