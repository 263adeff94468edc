/**
 * `verifyBackup`: whether a backup is whole and sound (docs/operations.md, "Backups"): its manifest
 * parses; every file it lists is there with its size and SHA-256, and nothing else is; each database
 * passes `PRAGMA integrity_check`; the log's copy ends where the manifest says and holds what it
 * counts; and the files derived from the log were copied before it.
 */
import { readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { isDeepStrictEqual } from 'node:util';
import { plural } from '../terminal.ts';
import { DERIVED_FILES } from './files.ts';
import { checksum, MANIFEST_FILE, type Manifest, readManifest } from './manifest.ts';
import { summarizeLog } from './take.ts';

export interface Verification {
  /** `null` when the manifest could not be read. */
  manifest: Manifest | null;
  /** What is wrong, one sentence each; empty when the backup is sound. */
  problems: string[];
}

/** The backup named is not a directory. */
export class BackupNotFound extends Error {
  override name = 'BackupNotFound';
}

async function isDirectory(dir: string): Promise<boolean> {
  try {
    return (await stat(dir)).isDirectory();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw error;
  }
}

/** Throws `BackupNotFound` when `dir` is not a directory; every other finding is a problem. */
export async function verifyBackup(dir: string): Promise<Verification> {
  if (!(await isDirectory(dir))) throw new BackupNotFound(`${dir} is not a directory`);
  let manifest: Manifest;
  try {
    manifest = await readManifest(dir);
  } catch (error) {
    return { manifest: null, problems: [(error as Error).message] };
  }
  const problems: string[] = [];
  const listed = new Set(manifest.files.map((f) => f.name));
  for (const entry of await readdir(dir)) {
    if (entry !== MANIFEST_FILE && !listed.has(entry)) problems.push(`${entry} is not in the manifest`);
  }
  for (const file of manifest.files) {
    const at = path.join(dir, file.name);
    let found: { sha256: string; bytes: number };
    try {
      found = await checksum(at);
    } catch (error) {
      problems.push(
        `${file.name}: ${(error as NodeJS.ErrnoException).code === 'ENOENT' ? 'missing' : (error as Error).message}`,
      );
      continue;
    }
    if (found.bytes !== file.bytes)
      problems.push(`${file.name}: ${plural(found.bytes, 'byte')}, the manifest says ${file.bytes}`);
    else if (found.sha256 !== file.sha256)
      problems.push(`${file.name}: its SHA-256 differs from the manifest's`);
    if (file.kind === 'sqlite') problems.push(...checkDatabase(at, file.name, manifest));
  }
  const order = manifest.files.map((f) => f.name);
  const logAt = order.indexOf(manifest.log.file);
  if (logAt === -1 || manifest.files[logAt].kind !== 'sqlite') {
    problems.push(`the log ${manifest.log.file} is not among the databases the manifest lists`);
  }
  for (const name of DERIVED_FILES) {
    if (order.includes(name) && order.indexOf(name) > logAt) {
      problems.push(`${name} was copied after the log: it may be ahead of it`);
    }
  }
  return { manifest, problems };
}

function checkDatabase(file: string, name: string, manifest: Manifest): string[] {
  let db: DatabaseSync;
  try {
    db = new DatabaseSync(file, { readOnly: true });
  } catch (error) {
    return [`${name}: cannot be opened: ${(error as Error).message}`];
  }
  try {
    const rows = db
      .prepare('PRAGMA integrity_check')
      .all()
      .map((row) => String(Object.values(row)[0]));
    if (rows.length !== 1 || rows[0] !== 'ok')
      return [`${name}: integrity check: ${rows.slice(0, 5).join('; ')}`];
    if (name !== manifest.log.file) return [];
    const found = summarizeLog(db, name);
    return isDeepStrictEqual(found, manifest.log)
      ? []
      : [
          `${name}: holds ${plural(found.events, 'event')} up to position ${found.head}, the manifest says ${manifest.log.events} up to ${manifest.log.head}` +
            (found.events === manifest.log.events && found.head === manifest.log.head
              ? ' (its streams or types differ)'
              : ''),
        ];
  } catch (error) {
    return [`${name}: ${(error as Error).message}`];
  } finally {
    db.close();
  }
}
