/**
 * The service's source modules, as paths from the repository root: what the layer, docs and size
 * checks read.
 */
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** The folders of the service's code, from the bottom layer up (docs/architecture.md). */
export const SOURCE_FOLDERS = [
  'domain',
  'application',
  'eventstore',
  'projections',
  'webhooks',
  'api',
  'dispatcher',
  'cli',
] as const;

/** The `.ts` files under `folders`, as posix paths from the repository root. */
export function sourceFiles(folders: readonly string[] = SOURCE_FOLDERS): string[] {
  return folders.flatMap((folder) =>
    readdirSync(path.join(ROOT, folder), { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile() && e.name.endsWith('.ts'))
      .map((e) => path.relative(ROOT, path.join(e.parentPath, e.name)).split(path.sep).join('/')),
  );
}
