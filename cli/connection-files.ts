/**
 * The files a connection string names (TLS certificates and keys), checked at start so that a wrong
 * path stops the start with one line naming the variable (docs/operations.md, "EventStoreDB"). The
 * clients find out only when they connect, and the EventStoreDB client then says "Failed to load
 * certificate file. File was not found." without saying which variable or file.
 */
import { constants } from 'node:fs';
import { access, stat } from 'node:fs/promises';
import path from 'node:path';

/**
 * The options of each kind of connection string that name a file the client reads, in the spelling
 * its client compares them: `@eventstore/db-client` drops `-` and `_` and ignores case
 * (dist/Client/parseConnectionString.js), the `mongodb` driver ignores case.
 */
const FILE_OPTIONS = {
  esdb: { options: ['tlsCAFile', 'userCertFile', 'userKeyFile'], key: (k: string) => k.replace(/[-_]/g, '') },
  mongodb: { options: ['tlsCAFile', 'tlsCertificateKeyFile', 'tlsCRLFile'], key: (k: string) => k },
} as const;

function kindOf(url: string): keyof typeof FILE_OPTIONS | undefined {
  if (/^(esdb|kurrentdb|kurrent)(\+discover)?:\/\//.test(url)) return 'esdb';
  if (/^mongodb(\+srv)?:\/\//.test(url)) return 'mongodb';
  return undefined;
}

/** The files a connection string names, by option (in the option's documented spelling). */
export function filesNamedBy(url: string): Array<{ option: string; file: string }> {
  const kind = kindOf(url);
  if (!kind) return [];
  const { options, key } = FILE_OPTIONS[kind];
  const byKey = new Map<string, string>(options.map((o) => [key(o).toLowerCase(), o]));
  const query = url.split('#')[0].split('?').slice(1).join('?');
  const named: Array<{ option: string; file: string }> = [];
  for (const pair of query.split('&')) {
    const at = pair.indexOf('=');
    if (at < 0) continue;
    const option = byKey.get(key(pair.slice(0, at).trim()).toLowerCase());
    if (!option) continue;
    let file = pair.slice(at + 1).trim();
    try {
      file = decodeURIComponent(file);
    } catch {
      // Left as written: the client fails on it in its own words.
    }
    if (file !== '') named.push({ option, file });
  }
  return named;
}

/** Why the file cannot be read, or undefined when it can (a relative path is the clients' own: from the working directory). */
async function unreadable(file: string): Promise<string | undefined> {
  const resolved = path.resolve(file);
  try {
    if (!(await stat(resolved)).isFile()) return 'is not a file';
    await access(resolved, constants.R_OK);
    return undefined;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return 'does not exist';
    if (code === 'EACCES' || code === 'EPERM') return 'cannot be read by this process';
    return `cannot be read (${(error as Error).message})`;
  }
}

/** One issue per file a connection string names that this process cannot read. */
export async function connectionFileIssues(
  variable: string,
  url: string,
): Promise<Array<{ variable: string; problem: string }>> {
  const issues: Array<{ variable: string; problem: string }> = [];
  for (const { option, file } of filesNamedBy(url)) {
    const why = await unreadable(file);
    if (why) issues.push({ variable, problem: `${option} names ${file}, which ${why}` });
  }
  return issues;
}
