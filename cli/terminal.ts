/**
 * What `pds` prints reaches an operator's terminal, and much of it is text the CLI did not write: a
 * webhook receiver's answer, a partner's or a subscription's name, a server's problem detail, a line
 * of an import file. A control character in it is an instruction to the terminal (ESC and the 8-bit
 * CSI U+009B start sequences that set the window title, clear the screen, move the cursor or, with
 * OSC 52, write the clipboard), so every printed text passes here: each C0 control character (a line
 * feed where lines are meant excepted), DEL and each C1 control character (U+0080–U+009F) is shown as
 * its escape, `\u001b`, `\u009b` (docs/operations.md, "The `pds` command").
 *
 * The escape is JSON's: a `--json` answer stays the same JSON (JSON.stringify leaves DEL and the C1
 * characters in its strings as they are; here they become the escapes that stand for them).
 */

/** Every control character, line feed included. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it finds
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/g;
/** Every control character but the line feed. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it finds
const CONTROL_BUT_LINE_FEED = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/g;

const escaped = (c: string) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;

/** One line (a table cell, an error message): every control character, line breaks too, escaped. */
export function printableLine(text: string): string {
  return text.replace(CONTROL, escaped);
}

/** Text of several lines (a command's output): every control character but the line feed escaped. */
export function printableText(text: string): string {
  return text.replace(CONTROL_BUT_LINE_FEED, escaped);
}

/** Writes a command's output to stdout, printable. */
export function print(text: string): void {
  process.stdout.write(printableText(text));
}

/** Writes one `pds: …` line to stderr, printable. */
export function printError(message: string): void {
  process.stderr.write(`pds: ${printableLine(message)}\n`);
}

/**
 * The terminal's width in columns when stdout is a terminal that reports one; none when it is a pipe
 * or a file, or a terminal whose size is unknown (0 columns: a serial console, some CI runners).
 */
export function terminalWidth(): number | undefined {
  const { isTTY, columns } = process.stdout;
  return isTTY && columns > 0 ? columns : undefined;
}

const graphemeSegmenter = new Intl.Segmenter('en', { granularity: 'grapheme' });

/** A text's user-perceived characters (grapheme clusters): a letter with its accents, a flag, a family emoji. */
export function graphemes(text: string): string[] {
  return Array.from(graphemeSegmenter.segment(text), (s) => s.segment);
}

/** Emoji shown as a picture (two columns), by default or asked for with the variation selector U+FE0F. */
const WIDE_EMOJI = /\p{Emoji_Presentation}|\p{Extended_Pictographic}\uFE0F|\p{Regional_Indicator}/u;
/** Characters that take no column: format characters (zero-width space and joiner, bidi marks) and combining marks. */
const ZERO_WIDTH = /^[\p{Cf}\p{Mn}\p{Me}]+$/u;

/**
 * Unicode's East Asian Wide and Fullwidth blocks (UAX #11): Hangul Jamo, CJK radicals and symbols,
 * kana, CJK ideographs, Yi, Hangul syllables, compatibility ideographs and forms, fullwidth forms,
 * and the supplementary ideographic planes.
 */
const WIDE_RANGES: readonly (readonly [number, number])[] = [
  [0x1100, 0x115f],
  [0x2e80, 0x303e],
  [0x3041, 0x33ff],
  [0x3400, 0x4dbf],
  [0x4e00, 0x9fff],
  [0xa000, 0xa4cf],
  [0xac00, 0xd7a3],
  [0xf900, 0xfaff],
  [0xfe30, 0xfe4f],
  [0xff00, 0xff60],
  [0xffe0, 0xffe6],
  [0x20000, 0x2fffd],
  [0x30000, 0x3fffd],
];

/** Text of one column per UTF-16 unit: most of what a table shows. */
const PRINTABLE_ASCII = /^[\x20-\x7e]*$/;

/** The columns one user-perceived character takes on a terminal: 0, 1 or 2. */
function graphemeWidth(grapheme: string): number {
  if (ZERO_WIDTH.test(grapheme)) return 0;
  if (WIDE_EMOJI.test(grapheme)) return 2;
  const code = grapheme.codePointAt(0) ?? 0;
  return WIDE_RANGES.some(([from, to]) => code >= from && code <= to) ? 2 : 1;
}

/**
 * The columns a printable line takes on a terminal: a CJK character or an emoji takes two, an accent
 * or a zero-width joiner none, where `.length` counts UTF-16 units (two for an emoji, one for a
 * character of a CJK name).
 */
export function displayWidth(text: string): number {
  if (PRINTABLE_ASCII.test(text)) return text.length;
  let width = 0;
  for (const g of graphemes(text)) width += graphemeWidth(g);
  return width;
}

/** `text` followed by spaces up to `width` columns (as `padEnd` does by UTF-16 units). */
export function padToWidth(text: string, width: number): string {
  return text + ' '.repeat(Math.max(0, width - displayWidth(text)));
}

/**
 * `1 delivery`, `2 deliveries`, `0 deliveries`: a count with its noun in the right number (`many`:
 * the noun plus `s` unless given); `shown` writes the number (thousands separated, say).
 */
export function plural(
  n: number,
  one: string,
  many = `${one}s`,
  shown: (n: number) => string = String,
): string {
  return `${shown(n)} ${n === 1 ? one : many}`;
}
