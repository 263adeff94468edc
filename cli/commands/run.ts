/** Runs a client command: prints what it returns, or one error line with the command's exit code. */
import { CliError, EXIT } from '../client.ts';

export async function runClientCommand(fn: () => Promise<string>): Promise<void> {
  try {
    process.stdout.write(await fn());
  } catch (err) {
    if (err instanceof CliError) {
      process.stderr.write(`pds: ${err.message}\n`);
      process.exitCode = err.exitCode;
      return;
    }
    process.stderr.write(`pds: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = EXIT.failed;
  }
}
