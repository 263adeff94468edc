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

/** The terminal's width in columns when stdout is a terminal; none when it is a pipe or a file. */
export function terminalWidth(): number | undefined {
  return process.stdout.isTTY ? process.stdout.columns : undefined;
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
