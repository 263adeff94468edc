/**
 * `npm start`'s command line after `node` (package.json: `NAME=${NAME:-default} … exec node <args>`)
 * and the environment defaults it sets, so the restart test and the restart bench run the service
 * exactly as a user does, V8 flags and malloc's arenas included.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const PACKAGE_JSON = fileURLToPath(new URL('../../package.json', import.meta.url));

function startScript(): { defaults: string; args: string } {
  const pkg = JSON.parse(readFileSync(PACKAGE_JSON, 'utf8')) as { scripts: { start: string } };
  const match = /^((?:\w+=\$\{\w+:-[^}\s]+\} )*)exec node (.+)$/.exec(pkg.scripts.start);
  if (!match) throw new Error(`unexpected start script: ${pkg.scripts.start}`);
  return { defaults: match[1], args: match[2] };
}

export function npmStartArgs(): string[] {
  return startScript().args.split(' ');
}

/** The variables `npm start` sets when the caller's environment does not (`NAME=${NAME:-default}`). */
export function npmStartEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [, name, value] of startScript().defaults.matchAll(/(\w+)=\$\{\w+:-([^}\s]+)\}/g))
    env[name] = value;
  return env;
}
