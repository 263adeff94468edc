/**
 * Runs a client command: prints what it returns, or one error line with the command's exit code, both
 * without control characters (`terminal.ts`).
 */
import { CliError, EXIT } from '../client.ts';
import { print, printError } from '../terminal.ts';

export async function runClientCommand(fn: () => Promise<string>): Promise<void> {
  try {
    print(await fn());
  } catch (err) {
    if (err instanceof CliError) {
      printError(err.message);
      process.exitCode = err.exitCode;
      return;
    }
    printError(err instanceof Error ? err.message : String(err));
    process.exitCode = EXIT.failed;
  }
}
