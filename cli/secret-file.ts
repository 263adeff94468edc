/** The secrets embedded mode keeps in the data dir (the operator token, the secret key): one file each. */
import { randomBytes } from 'node:crypto';
import { link, readFile, unlink, writeFile } from 'node:fs/promises';

/**
 * Reads a secret file, or creates it with a fresh value when absent. Creation goes through a temporary
 * file and `link`, which fails if the name exists: processes starting together on one data dir (one
 * per role) all end up with the value of whichever wrote first, never with a half-written file.
 */
export async function readOrCreateSecret(
  file: string,
  generate: () => string,
): Promise<{ text: string; generated: boolean }> {
  try {
    return { text: (await readFile(file, 'utf8')).trim(), generated: false };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  const temp = `${file}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
  const text = generate();
  await writeFile(temp, `${text}\n`, { mode: 0o600, flag: 'wx' });
  try {
    await link(temp, file);
    return { text, generated: true };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    return { text: (await readFile(file, 'utf8')).trim(), generated: false };
  } finally {
    await unlink(temp);
  }
}
