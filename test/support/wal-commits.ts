/**
 * Counts the commits in an SQLite database's write-ahead log, read from the file as SQLite wrote it
 * (https://www.sqlite.org/fileformat.html, "WAL File Format"): a frame whose header gives the
 * database's size after it ends a transaction. Frames left from before the log was restarted carry
 * other salts and are not counted. A log that is checkpointed and restarted meanwhile starts the
 * count again: tests open the store with `checkpoints: 'elsewhere'` (no copy before 16,000 pages).
 */
import { existsSync, readFileSync } from 'node:fs';

const WAL_HEADER = 32;
const FRAME_HEADER = 24;

export function walCommits(databaseFile: string): number {
  const file = `${databaseFile}-wal`;
  if (!existsSync(file)) return 0;
  const wal = readFileSync(file);
  if (wal.length < WAL_HEADER) return 0;
  const pageSize = wal.readUInt32BE(8);
  const salt1 = wal.readUInt32BE(16);
  const salt2 = wal.readUInt32BE(20);
  let commits = 0;
  for (let at = WAL_HEADER; at + FRAME_HEADER + pageSize <= wal.length; at += FRAME_HEADER + pageSize) {
    if (wal.readUInt32BE(at + 8) !== salt1 || wal.readUInt32BE(at + 12) !== salt2) break;
    if (wal.readUInt32BE(at + 4) !== 0) commits += 1;
  }
  return commits;
}
