/** Durations as configuration spells them (`500ms`, `45s`, `30m`, `6h`), and bad values quoted for messages. */

const DURATION = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h)$/;
const UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 } as const;

/** Parses `500ms`, `45s`, `30m`, `6h` (decimals allowed: `1.5h`) into milliseconds; throws a RangeError. */
export function parseDuration(text: string): number {
  const match = DURATION.exec(text.trim());
  const ms = match ? Math.round(Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS]) : Number.NaN;
  if (!Number.isSafeInteger(ms)) {
    throw new RangeError(`expected a duration like 6h, 30m, 45s or 500ms, got ${quote(text)}`);
  }
  return ms;
}

/** The shortest exact spelling of a duration in `parseDuration` syntax: 21600000 → `6h`. */
export function formatDuration(ms: number): string {
  for (const unit of ['h', 'm', 's'] as const) {
    if (ms !== 0 && ms % UNIT_MS[unit] === 0) return `${ms / UNIT_MS[unit]}${unit}`;
  }
  return ms === 0 ? '0s' : `${ms}ms`;
}

/** Quotes a bad value for an error message, shortened so that one line stays one readable line. */
export function quote(value: string): string {
  return JSON.stringify(value.length > 80 ? `${value.slice(0, 77)}...` : value);
}
