/**
 * Parsing of the operator commands' option values and of the configuration the commands that open the
 * data dir's files read: each bad value exits with the usage code and one line naming the option (or
 * the variable) and what it expected (docs/operations.md).
 */
import { CliError, EXIT } from './client.ts';
import { type Config, ConfigError, parseConfig } from './config.ts';

/** The configuration the environment gives, for a command that opens the data dir's files itself. */
export function commandConfig(env: NodeJS.ProcessEnv): Config {
  try {
    return parseConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) throw new CliError(error.message, EXIT.usage);
    throw error;
  }
}

/** An answer printed as indented JSON (`--json`). */
export const printJson = (value: unknown): string => `${JSON.stringify(value, null, 2)}\n`;

/** The values of a repeatable option: `--x 1 2`, `--x 1,2` and `--x 1 --x 2` all give 1 and 2. */
function listValues(option: string, values: string[]): string[] {
  const list = values.flatMap((v) => v.split(',')).filter((v) => v.trim() !== '');
  if (list.length === 0) throw new CliError(`${option} needs at least one value`, EXIT.usage);
  return list;
}

/** Ids (positive integers) of a repeatable option; undefined when the option was not given. */
export function idList(option: string, values: string[] | undefined): number[] | undefined {
  if (values === undefined) return undefined;
  return listValues(option, values).map((v) => {
    if (!/^\d{1,15}$/.test(v.trim()) || Number(v) < 1) {
      throw new CliError(`${option}: ${JSON.stringify(v)} is not an id (a positive integer)`, EXIT.usage);
    }
    return Number(v);
  });
}

/** Values of a repeatable option that must each be one of `allowed`. */
export function oneOrMoreOf<T extends string>(
  option: string,
  values: string[] | undefined,
  allowed: readonly T[],
): T[] | undefined {
  if (values === undefined) return undefined;
  const list = listValues(option, values);
  if (list.some((v) => !(allowed as readonly string[]).includes(v))) {
    throw new CliError(`${option}: expected one or more of ${allowed.join(', ')}`, EXIT.usage);
  }
  return list as T[];
}

/** A whole number from 1 to `max`. */
export function positiveInteger(option: string, raw: string, max: number): number {
  if (!/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > max) {
    throw new CliError(
      `${option}: expected a whole number from 1 to ${max}, got ${JSON.stringify(raw)}`,
      EXIT.usage,
    );
  }
  return Number(raw);
}
