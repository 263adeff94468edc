/**
 * The project's account of its contract lives in `docs/`, and the code cites it there (docs/architecture.md):
 * never a document a reader of this repository does not have, never a page or section that does not
 * exist. A citation is `docs/<page>.md`, optionally followed by `, "<section heading>"`.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import test from 'ava';
import { ROOT, SOURCE_FOLDERS, sourceFiles } from './support/source-files.ts';

const FOLDERS = [...SOURCE_FOLDERS, 'bench', 'test'];

function files(): string[] {
  return [
    ...sourceFiles(FOLDERS),
    'README.md',
    ...readdirSync(path.join(ROOT, 'docs')).map((f) => `docs/${f}`),
  ];
}

/** Headings of a docs page, without their `#`s. */
function headings(page: string): Set<string> {
  const text = readFileSync(path.join(ROOT, page), 'utf8');
  return new Set([...text.matchAll(/^#+ (.+)$/gm)].map((m) => m[1].trim()));
}

test('no source cites a document outside the repository', (t) => {
  const found: string[] = [];
  for (const file of files()) {
    if (file === 'test/docs.test.ts') continue;
    const text = readFileSync(path.join(ROOT, file), 'utf8');
    for (const m of text.matchAll(/\b(DESIGN(\.md)? ?§|seed §|RESOURCES(\.md)?\b)/g)) {
      const line = text.slice(0, m.index).split('\n').length;
      found.push(`${file}:${line}: ${m[0]}`);
    }
  }
  t.deepEqual(found, []);
});

test('every docs page and section a file cites exists', (t) => {
  const missing: string[] = [];
  const cache = new Map<string, Set<string>>();
  let citations = 0;
  for (const file of files()) {
    const text = readFileSync(path.join(ROOT, file), 'utf8');
    for (const m of text.matchAll(/docs\/([a-z-]+\.md)(?:, "([^"]+)")?/g)) {
      citations += 1;
      const page = `docs/${m[1]}`;
      if (!existsSync(path.join(ROOT, page))) {
        missing.push(`${file}: ${page}`);
        continue;
      }
      if (m[2] === undefined) continue;
      if (!cache.has(page)) cache.set(page, headings(page));
      if (!cache.get(page)?.has(m[2])) missing.push(`${file}: ${page}, "${m[2]}"`);
    }
  }
  t.true(citations > 100, `${citations} citations read`);
  t.deepEqual(missing, []);
});

test('docs/partner-api.md says where every partner endpoint lives, and what it names exists', async (t) => {
  const { partnerApis } = await import('../api/partner/index.ts');
  const text = readFileSync(path.join(ROOT, 'docs/partner-api.md'), 'utf8');
  const section = text.slice(text.indexOf('## Where each endpoint lives'));
  const rows = [
    ...section.matchAll(/^\| (`\/partner.+?) \| `(GET|POST) ([^`]+)` \| `([^`]+)` \| (.+) \|$/gm),
  ];
  const problems: string[] = [];
  for (const api of partnerApis) {
    for (const route of api.routes) {
      const endpoint = `${route.method.toUpperCase()} ${route.path}`;
      const row = rows.find((r) => r[1].includes(`\`${api.base}\``) && `${r[2]} ${r[3]}` === endpoint);
      if (!row) problems.push(`${api.base} ${endpoint}: no row`);
    }
  }
  for (const [, , , , routeFile, reads] of rows) {
    if (!existsSync(path.join(ROOT, routeFile))) problems.push(`${routeFile}: no such file`);
    for (const [, name, file] of reads.matchAll(/`(\w+)` in `([^`]+)`/g)) {
      const source = existsSync(path.join(ROOT, file)) ? readFileSync(path.join(ROOT, file), 'utf8') : '';
      if (!new RegExp(`export (async )?(function|const) ${name}\\b`).test(source)) {
        problems.push(`${file} exports no ${name}`);
      }
    }
  }
  t.true(rows.length >= 16, `${rows.length} rows read`);
  t.deepEqual(problems, []);
});
