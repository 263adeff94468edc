/**
 * The CLI's plain-text tables (`pds audit cart`, `pds webhooks list`, …): one header row, columns
 * padded to their widest cell. On a terminal the table fits its width: the widest columns give way
 * first and their cells wrap onto more lines of the row; when that would leave a column too narrow to
 * read, each row is a block of `column  value` lines instead. Elsewhere (a pipe, a file) each row
 * stays one line at full width, for grep and cut. Each cell is one printable line: a control
 * character in it (a receiver's answer, a name) is shown as its escape (`terminal.ts`). Widths are
 * the columns a terminal shows, a CJK character or an emoji two (`displayWidth`).
 */
import { displayWidth, graphemes, padToWidth, printableLine, terminalWidth } from './terminal.ts';

/** Between two columns. */
const GAP = 2;
/** A column no narrower than this (or its own width) when it gives way. */
const MIN_COLUMN = 8;
/** Narrower than this, a column that gave way is hard to read: the rows are then shown as blocks. */
const READABLE_COLUMN = 16;

export type Cell = string | number | null | undefined;

/** `width`: the line's at most (the terminal's by default, on a terminal; none elsewhere). */
export function table(
  headers: string[],
  rows: Cell[][],
  width: number | undefined = terminalWidth(),
): string {
  const cells = rows.map((r) =>
    r.map((c) => (c === null || c === undefined ? '' : printableLine(String(c)))),
  );
  const head = headers.map(printableLine);
  const natural = head.map((h, i) =>
    Math.max(displayWidth(h), ...cells.map((r) => displayWidth(r[i] ?? ''))),
  );
  const widths = width === undefined ? natural : fitColumns(natural, width - GAP * (head.length - 1));
  if (widths.some((w, i) => w < natural[i] && w < READABLE_COLUMN))
    return blocks(head, cells, width ?? Number.POSITIVE_INFINITY);
  const line = (r: string[]) => {
    const wrapped = widths.map((w, i) => wrapCell(r[i] ?? '', w));
    const height = Math.max(...wrapped.map((lines) => lines.length));
    return Array.from({ length: height }, (_, k) =>
      wrapped
        .map((lines, i) => padToWidth(lines[k] ?? '', widths[i]))
        .join(' '.repeat(GAP))
        .trimEnd(),
    ).join('\n');
  };
  return [line(head), line(widths.map((w) => '-'.repeat(w))), ...cells.map(line)].join('\n');
}

/** Each row as lines of `column  value`, the values wrapped to the width, a blank line between rows. */
function blocks(head: string[], cells: string[][], width: number): string {
  const labelWidth = Math.max(...head.map(displayWidth));
  const valueWidth = Math.max(MIN_COLUMN, width - labelWidth - GAP);
  const block = (row: string[]) =>
    head
      .flatMap((h, i) =>
        wrapCell(row[i] ?? '', valueWidth).map((part, k) =>
          `${padToWidth(k === 0 ? h : '', labelWidth)}${' '.repeat(GAP)}${part}`.trimEnd(),
        ),
      )
      .join('\n');
  return cells.map(block).join('\n\n');
}

/**
 * Column widths that add up to `available` at most: each column keeps its own width up to a cap, the
 * largest cap that fits; what the cap leaves over goes to the capped columns, left first. Columns at
 * their narrowest that still do not fit are left so (the line is then longer than asked).
 */
export function fitColumns(natural: readonly number[], available: number): number[] {
  const sum = (ws: readonly number[]) => ws.reduce((a, b) => a + b, 0);
  if (sum(natural) <= available) return [...natural];
  const capped = (cap: number) => natural.map((n) => Math.min(n, Math.max(cap, MIN_COLUMN)));
  let low = 0;
  let high = Math.max(...natural);
  while (low < high) {
    const cap = Math.ceil((low + high) / 2);
    if (sum(capped(cap)) <= available) low = cap;
    else high = cap - 1;
  }
  const widths = capped(low);
  let spare = available - sum(widths);
  for (let i = 0; spare > 0 && i < widths.length; i++) {
    const more = Math.min(spare, natural[i] - widths[i]);
    widths[i] += more;
    spare -= more;
  }
  return widths;
}

/**
 * A cell as lines of `width` columns at most: broken at a space (dropped) or after a `,` or `;` in the
 * line's last two thirds, else at the width; never inside a character (an emoji, a letter and its accent).
 */
export function wrapCell(text: string, width: number): string[] {
  const lines: string[] = [];
  let rest = graphemes(text);
  let restColumns = rest.map(displayWidth);
  const total = (ws: number[]) => ws.reduce((a, b) => a + b, 0);
  while (total(restColumns) > width) {
    // `fit` characters take `width` columns at most (one at least, so that a line always advances);
    // `at[i]`: the column where character i starts.
    const at = [0];
    for (const w of restColumns) at.push(at[at.length - 1] + w);
    let fit = 0;
    while (fit < rest.length && at[fit + 1] <= width) fit++;
    fit = Math.max(1, fit);
    const space = rest.lastIndexOf(' ', fit);
    const punctuation = Math.max(rest.lastIndexOf(',', fit - 1), rest.lastIndexOf(';', fit - 1));
    let end = fit;
    let next = fit;
    if (space >= 0 && at[space] >= width / 3 && space >= punctuation) {
      end = space;
      next = space + 1;
    } else if (punctuation >= 0 && at[punctuation] >= width / 3) {
      end = punctuation + 1;
      next = punctuation + 1;
    }
    lines.push(rest.slice(0, end).join(''));
    rest = rest.slice(next);
    restColumns = restColumns.slice(next);
  }
  lines.push(rest.join(''));
  return lines;
}
