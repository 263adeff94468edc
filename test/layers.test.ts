/**
 * Layers point one way (docs/architecture.md, "Layers"). From the bottom:
 *
 * 0. `domain/`: events, commands, deciders, record shapes; pure.
 * 1. The ports the application works through: `eventstore/port.ts`, `projections/read-store.ts`.
 * 2. `application/`: command handling, credentials, followers.
 * 3. Adapters and the read side: the event stores, the read stores, the projector and its read models,
 *    the outbound webhook path (`webhooks/`).
 * 4. Delivery mechanisms: the HTTP routes (`api/`) and the dispatcher (`dispatcher/`).
 * 5. The composition root and the CLI (`cli/`).
 *
 * A module imports from lower layers, or from its own folder in its own layer: never upwards, and
 * never sideways into another folder of its layer (the routes and the dispatcher do not know each
 * other; an adapter does not know another). Type-only imports count: a type is a dependency too. The
 * domain imports no package but zod, and neither the domain nor the application layer imports an
 * HTTP framework, a database driver or an HTTP client. No modules import one another in a circle.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import test from 'ava';
import { ROOT, sourceFiles } from './support/source-files.ts';

interface Layer {
  rank: number;
  name: string;
}

/** The layer of a source file (a path from the repository root), first match wins. */
const LAYERS: Array<[RegExp, Layer]> = [
  [/^domain\//, { rank: 0, name: 'domain' }],
  [/^eventstore\/port\.ts$/, { rank: 1, name: 'ports' }],
  [/^projections\/read-store\.ts$/, { rank: 1, name: 'ports' }],
  [/^application\//, { rank: 2, name: 'application' }],
  [/^(eventstore|projections|webhooks)\//, { rank: 3, name: 'adapters and read models' }],
  [/^(api|dispatcher)\//, { rank: 4, name: 'delivery mechanisms' }],
  [/^cli\//, { rank: 5, name: 'composition root and CLI' }],
  [/^package\.json$/, { rank: 0, name: 'package' }],
];

function layerOf(file: string): Layer {
  for (const [pattern, layer] of LAYERS) if (pattern.test(file)) return layer;
  throw new Error(`${file} belongs to no layer: add its folder to the layers above`);
}

/** Packages a layer must not import (a prefix matches a package and its subpaths). */
const FORBIDDEN_PACKAGES: Record<string, { allowedOnly?: string[]; forbidden?: string[] }> = {
  domain: { allowedOnly: ['zod', 'node:util', 'node:crypto'] },
  application: {
    forbidden: ['koa', '@koa/', 'got', 'mongodb', '@eventstore/', 'node:sqlite', 'node:http', 'node:https'],
  },
};

interface Import {
  from: string;
  /** A repository path for a relative import, the specifier for a package. */
  to: string;
  relative: boolean;
}

/** Static, re-exported and dynamic imports of a module's text. */
function importsOf(file: string, source: string): Import[] {
  const specifiers = [
    ...source.matchAll(/^\s*(?:import|export)\s[^'"`;]*?\sfrom\s+'([^']+)'/gm),
    ...source.matchAll(/^\s*import\s+'([^']+)'/gm),
    ...source.matchAll(/\bimport\(\s*'([^']+)'\s*\)/g),
  ].map((m) => m[1]);
  return specifiers.map((spec) =>
    spec.startsWith('.')
      ? {
          from: file,
          to: path.posix.normalize(path.posix.join(path.posix.dirname(file), spec)),
          relative: true,
        }
      : { from: file, to: spec, relative: false },
  );
}

/** Why an import breaks the layers, or null when it is allowed. */
function violation(imp: Import): string | null {
  const from = layerOf(imp.from);
  if (!imp.relative) {
    const rule = FORBIDDEN_PACKAGES[from.name];
    if (!rule) return null;
    const matches = (prefix: string) =>
      imp.to === prefix || imp.to.startsWith(prefix.endsWith('/') ? prefix : `${prefix}/`);
    if (rule.allowedOnly && !rule.allowedOnly.some(matches))
      return `the ${from.name} imports only ${rule.allowedOnly.join(', ')}`;
    if (rule.forbidden?.some(matches)) return `the ${from.name} does not import ${imp.to}`;
    return null;
  }
  const to = layerOf(imp.to);
  if (to.rank < from.rank) return null;
  const sameFolder = imp.from.split('/')[0] === imp.to.split('/')[0];
  if (to.rank === from.rank && sameFolder) return null;
  return to.rank > from.rank
    ? `${from.name} imports from ${to.name}, a layer above it`
    : `${imp.from.split('/')[0]}/ imports from ${imp.to.split('/')[0]}/, another folder of its layer`;
}

test('no module imports from a layer above it, or from another folder of its layer', (t) => {
  const files = sourceFiles();
  t.true(files.length > 100, `${files.length} modules read`);
  const found: string[] = [];
  for (const file of files) {
    for (const imp of importsOf(file, readFileSync(path.join(ROOT, file), 'utf8'))) {
      const why = violation(imp);
      if (why) found.push(`${imp.from} → ${imp.to}: ${why}`);
    }
  }
  t.deepEqual(found, []);
});

test('the check itself: an import up, one sideways and a framework in the application layer are caught', (t) => {
  const source = [
    "import type { AppState } from '../api/http.ts';",
    "import { createFanOut } from '../dispatcher/fan-out.ts';",
    "import Koa from 'koa';",
    "const later = await import('../cli/config.ts');",
    "import { decider } from '../domain/cart.ts';",
  ].join('\n');
  const found = importsOf('application/example.ts', source).map(violation);
  t.deepEqual(found, [
    'application imports from delivery mechanisms, a layer above it',
    'application imports from delivery mechanisms, a layer above it',
    'the application does not import koa',
    null,
    'application imports from composition root and CLI, a layer above it',
  ]);
  t.is(
    violation({ from: 'api/admin.ts', to: 'dispatcher/fan-out.ts', relative: true }),
    'api/ imports from dispatcher/, another folder of its layer',
  );
  t.is(
    violation({ from: 'domain/cart.ts', to: 'pino', relative: false }),
    'the domain imports only zod, node:util, node:crypto',
  );
});

/** The circles of the import graph (each a strongly connected set of modules, more than one). */
function circles(graph: Map<string, string[]>): string[][] {
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, counter);
    low.set(v, counter);
    counter += 1;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v) as number, low.get(w) as number));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v) as number, index.get(w) as number));
    }
    if (low.get(v) !== index.get(v)) return;
    const circle: string[] = [];
    for (let w = stack.pop(); w !== undefined; w = w === v ? undefined : stack.pop()) {
      onStack.delete(w);
      circle.push(w);
    }
    if (circle.length > 1) found.push(circle.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
}

test('no modules import one another in a circle', (t) => {
  const graph = new Map<string, string[]>();
  for (const file of sourceFiles()) {
    const imports = importsOf(file, readFileSync(path.join(ROOT, file), 'utf8'));
    graph.set(
      file,
      imports.filter((i) => i.relative).map((i) => i.to),
    );
  }
  t.deepEqual(circles(graph), []);
  // The check itself, on a made-up graph with one circle of three and a module outside it.
  const made = new Map([
    ['a.ts', ['b.ts']],
    ['b.ts', ['c.ts']],
    ['c.ts', ['a.ts', 'd.ts']],
    ['d.ts', []],
  ]);
  t.deepEqual(circles(made), [['a.ts', 'b.ts', 'c.ts']]);
});
