/**
 * The erasure ledger's file (`application/erasure-ledger.ts`; docs/operations.md, "Backups"):
 * `erasures.jsonl` in `PDS_BACKUP_DIR`, one erasure a line, each appended and flushed to the disk
 * before the erasure's keys are destroyed. Rotation never removes it: it outlives every backup. It is
 * created holding the erasures the key store recorded before (`seed`), so that it holds those made
 * before `PDS_BACKUP_DIR` was set too. A restore also reads the erasures a key store file records (the
 * `keys.db` of the data dir it replaces).
 */
import { constants } from 'node:fs';
import { mkdir, open, readFile, stat } from 'node:fs/promises';
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

const lineOf = ({ erasure_id, requested_at, key_ids, cart_uuids }: CustomerErasure) =>
  `${JSON.stringify({ erasure_id, requested_at, key_ids, cart_uuids })}\n`;

/**
 * The ledger in `dir`, created with its first entry, then holding the erasures `seed` answers (those
 * the key store recorded before) ahead of it.
 */
export function fileErasureLedger(dir: string, seed: () => CustomerErasure[] = () => []): ErasureLedger {
  const file = path.join(dir, ERASURE_LEDGER_FILE);
  return {
    async record(erasure) {
      await mkdir(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
      const size = await stat(file).then(
        (s) => s.size,
        () => null,
      );
      const earlier = size === null ? seed().filter((e) => e.erasure_id !== erasure.erasure_id) : [];
      const handle = await open(
        file,
        constants.O_RDWR | constants.O_APPEND | constants.O_CREAT,
        PRIVATE_FILE_MODE,
      );
      try {
        // A line cut short by a crash is ended first, so this entry is a line of its own.
        let cut = false;
        if (size !== null && size > 0) {
          const last = Buffer.alloc(1);
          await handle.read(last, 0, 1, size - 1);
          cut = last[0] !== 0x0a;
        }
        await handle.appendFile(`${cut ? '\n' : ''}${[...earlier, erasure].map(lineOf).join('')}`);
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

/** A ledger named on the command line that is not there. */
export class ErasureLedgerMissing extends Error {
  override name = 'ErasureLedgerMissing';
}

/** Why a ledger could not be read: named in the restore's refusal. */
export class ErasureLedgerUnreadable extends Error {
  override name = 'ErasureLedgerUnreadable';
}

/**
 * The erasures of a ledger file, or of a key store file (`keys.db`); none when it does not exist. A line
 * cut short (a crash while it was written: its erasure never began; the next entry starts a line of its
 * own after it) is left out; any other line that is not an erasure refuses the ledger.
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
    // An entry ends with its object's only closing brace: a line without it was cut short.
    const cut = !line.trimEnd().endsWith('}') && parseJson(line) === undefined;
    if (parsed.success) erasures.push(parsed.data);
    else if (!cut) {
      throw new ErasureLedgerUnreadable(`${file}, line ${i + 1}: not an erasure`);
    }
  }
  return erasures;
}
