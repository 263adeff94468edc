/**
 * A file does one job, and a long function is a sign that it does several (docs/architecture.md): no
 * source file over 500 lines, no function over 150.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import test from 'ava';
import ts from 'typescript';
import { ROOT, sourceFiles } from './support/source-files.ts';

const MAX_FILE_LINES = 500;
const MAX_FUNCTION_LINES = 150;

interface Size {
  name: string;
  lines: number;
}

/** The functions of a module with their length in lines (nested ones counted on their own too). */
function functionSizes(file: string, text: string): Size[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const out: Size[] = [];
  const visit = (node: ts.Node): void => {
    if (
      ts.isFunctionDeclaration(node) ||
      ts.isFunctionExpression(node) ||
      ts.isArrowFunction(node) ||
      ts.isMethodDeclaration(node)
    ) {
      const first = source.getLineAndCharacterOfPosition(node.getStart()).line;
      const last = source.getLineAndCharacterOfPosition(node.getEnd()).line;
      const name =
        node.name && ts.isIdentifier(node.name) ? node.name.text : `(anonymous at line ${first + 1})`;
      out.push({ name: `${file} ${name}`, lines: last - first + 1 });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return out;
}

/** What is over `max`. */
function overgrown(sizes: Size[], max: number): string[] {
  return sizes.filter((s) => s.lines > max).map((s) => `${s.name}: ${s.lines} lines (at most ${max})`);
}

test('no source file over 500 lines and no function over 150', (t) => {
  const files: Size[] = [];
  const functions: Size[] = [];
  for (const file of sourceFiles()) {
    const text = readFileSync(path.join(ROOT, file), 'utf8');
    files.push({ name: file, lines: text.split('\n').length });
    functions.push(...functionSizes(file, text));
  }
  t.deepEqual(overgrown(files, MAX_FILE_LINES), []);
  t.deepEqual(overgrown(functions, MAX_FUNCTION_LINES), []);
});

test('the check itself: a long function is caught', (t) => {
  const body = Array.from({ length: 160 }, (_, i) => `  const v${i} = ${i};`).join('\n');
  const sizes = functionSizes('x.ts', `export function long(): void {\n${body}\n}\n`);
  t.deepEqual(overgrown(sizes, MAX_FUNCTION_LINES), ['x.ts long: 162 lines (at most 150)']);
  t.deepEqual(overgrown(sizes, 170), []);
});
