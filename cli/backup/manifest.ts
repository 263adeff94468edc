/**
 * A backup's manifest (`manifest.json`, docs/operations.md, "Backups"): what was copied, in which order,
 * where the log's copy ends, and a SHA-256 checksum and size of every file, so that `pds backup verify`
 * and `pds restore` can tell a whole backup from a damaged or partial one.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';

export const MANIFEST_FILE = 'manifest.json';
export const MANIFEST_FORMAT = 1;

const fileName = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, 'expected a plain file name')
  .refine((name) => name !== MANIFEST_FILE, 'the manifest does not list itself');

export const backupFileSchema = z.strictObject({
  name: fileName,
  /** `sqlite`: copied with SQLite's online backup API; `file`: copied as it is (the secret files). */
  kind: z.enum(['sqlite', 'file']),
  bytes: z.number().int().nonnegative(),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
});
export type BackupFile = z.infer<typeof backupFileSchema>;

export const manifestSchema = z.strictObject({
  format: z.literal(MANIFEST_FORMAT),
  service: z.literal('pds'),
  /** The version of the service that took it (package.json). */
  version: z.string(),
  created_at: z.iso.datetime(),
  /** How long copying and checking the files took, in ms (absent in a backup taken without it). */
  duration_ms: z.number().nonnegative().optional(),
  /** Where the copy of the log ends: every event at or before `head` is in it, nothing after. */
  log: z.strictObject({
    file: fileName,
    /** The global position of the last event (0: no event). */
    head: z.number().int().nonnegative(),
    events: z.number().int().nonnegative(),
    streams: z.number().int().nonnegative(),
    /** Events by type. */
    by_type: z.record(z.string(), z.number().int().nonnegative()),
  }),
  /** In the order they were copied. */
  files: z.array(backupFileSchema).min(1),
});
export type Manifest = z.infer<typeof manifestSchema>;

/** SHA-256 (hex) and size of a file, read as a stream. */
export async function checksum(file: string): Promise<{ sha256: string; bytes: number }> {
  const hash = createHash('sha256');
  let bytes = 0;
  for await (const chunk of createReadStream(file)) {
    hash.update(chunk as Buffer);
    bytes += (chunk as Buffer).length;
  }
  return { sha256: hash.digest('hex'), bytes };
}

/** The manifest of the backup in `dir`; throws with the problem when it is absent, not JSON or not a manifest. */
export async function readManifest(dir: string): Promise<Manifest> {
  let text: string;
  try {
    text = await readFile(path.join(dir, MANIFEST_FILE), 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT')
      throw new Error(`no ${MANIFEST_FILE}: not a backup`);
    throw error;
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new Error(`${MANIFEST_FILE} is not JSON: ${(error as Error).message}`);
  }
  const parsed = manifestSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(
      `${MANIFEST_FILE} is not a backup manifest: ${issue.path.join('.') || '(root)'}: ${issue.message}`,
    );
  }
  return parsed.data;
}
