/**
 * `npm start`'s command line after `node` (package.json: `exec node <args>`), so the restart test and the
 * restart bench run the service exactly as a user does, V8 flags included.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const PACKAGE_JSON = fileURLToPath(new URL('../../package.json', import.meta.url));

export function npmStartArgs(): string[] {
  const pkg = JSON.parse(readFileSync(PACKAGE_JSON, 'utf8')) as { scripts: { start: string } };
  const match = /^exec node (.+)$/.exec(pkg.scripts.start);
  if (!match) throw new Error(`unexpected start script: ${pkg.scripts.start}`);
  return match[1].split(' ');
}
