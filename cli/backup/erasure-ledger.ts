/**
 * The erasure ledger's file (`application/erasure-ledger.ts`; docs/operations.md, "Backups"):
 * `erasures.jsonl` in `PDS_BACKUP_DIR`, one erasure a line, each appended and flushed to the disk
 * before the erasure's keys are destroyed. Rotation never removes it: it outlives every backup. A
 * restore also reads the erasures a key store file records (the `keys.db` of the data dir it replaces).
 */
import { constants } from 'node:fs';
import { mkdir, open, readFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import type { CustomerErasure } from '../../application/customer-keys.ts';
import type { ErasureLedger } from '../../application/erasure-ledger.ts';
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from '../../application/private-files.ts';
import { erasuresRecordedIn } from '../../eventstore/key-store-sqlite.ts';
import { SQLITE_HEADER } from './files.ts';

export const ERASURE_LEDGER_FILE = 'erasures.jsonl';

const entry = z.object({
  erasure_id: z.string().min(1),
  requested_at: z.string().min(1),
  key_ids: z.array(z.string()),
  cart_uuids: z.array(z.string()),
});

/** The ledger in `dir` (created with its first entry). */
export function fileErasureLedger(dir: string): ErasureLedger {
  const file = path.join(dir, ERASURE_LEDGER_FILE);
  return {
    async record(erasure) {
      await mkdir(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
      const { erasure_id, requested_at, key_ids, cart_uuids } = erasure;
      const line = `${JSON.stringify({ erasure_id, requested_at, key_ids, cart_uuids })}\n`;
      const handle = await open(
        file,
        constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT,
        PRIVATE_FILE_MODE,
      );
      try {
        await handle.appendFile(line);
        await handle.datasync();
      } finally {
        await handle.close();
      }
      // The file's first entry also makes its name in the directory: that must last as well.
      const directory = await open(dir, 'r');
      try {
        await directory.sync();
      } finally {
        await directory.close();
      }
    },
  };
}

function parseJson(line: string): unknown {
  try {
    return JSON.parse(line);
  } catch {
    return undefined;
  }
}

/** Why a ledger could not be read: named in the restore's refusal. */
export class ErasureLedgerUnreadable extends Error {
  override name = 'ErasureLedgerUnreadable';
}

/**
 * The erasures of a ledger file, or of a key store file (`keys.db`); none when it does not exist. A last line cut short (a crash while it
 * was written: its erasure never began) is left out; a damaged line elsewhere is refused.
 */
export async function readErasureLedger(file: string): Promise<CustomerErasure[]> {
  let bytes: Buffer;
  try {
    bytes = await readFile(file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
  // The key store of the data dir being replaced (its `keys.db`) records every erasure it made too.
  if (bytes.subarray(0, SQLITE_HEADER.length).equals(SQLITE_HEADER)) {
    try {
      return erasuresRecordedIn(file);
    } catch (error) {
      throw new ErasureLedgerUnreadable(`${file}: not a key store (${(error as Error).message})`);
    }
  }
  const text = bytes.toString('utf8');
  const lines = text.split('\n');
  const erasures: CustomerErasure[] = [];
  for (const [i, line] of lines.entries()) {
    if (line.trim() === '') continue;
    const parsed = entry.safeParse(parseJson(line));
    if (parsed.success) erasures.push(parsed.data);
    else if (i !== lines.length - 1) {
      throw new ErasureLedgerUnreadable(`${file}, line ${i + 1}: not an erasure`);
    }
  }
  return erasures;
}
