/**
 * `pds import <file.ndjson> [--resume] [--json]`: sends a file of platform commands to the platform
 * API (`PDS_URL`, operator token), one request per line, in file order.
 *
 * Line format (NDJSON: one JSON object per line):
 *
 *   {"method":"PUT","path":"/stores/7","body":{"name":"Green Leaf","address":"1 Main St",…}}
 *   {"method":"POST","path":"/platform/v1/carts","body":{"store_id":7,"source":{"channel":"embedded"}}}
 *   {"method":"POST","path":"/carts/<uuid>/items","body":{…},"idempotency_key":"order-17-line-1"}
 *   {"method":"DELETE","path":"/stores/7/menu_products/12"}
 *
 * - `method`: PUT, POST, PATCH or DELETE; `path`: a platform route (docs/write-side.md),
 *   with or without the `/platform/v1` prefix; `body`: the route's JSON body (left out for DELETE);
 *   `idempotency_key` (optional, POST only): sent as `Idempotency-Key`.
 * - A POST without one is sent with a key derived from its line number and text, so a line sent twice
 *   (after a crash, or by a resumed import) is applied once. PUT, PATCH and DELETE are idempotent by
 *   themselves. (Importing the same file again therefore replays its POSTs instead of repeating them;
 *   give lines keys of your own to change that.)
 * - Blank lines and lines starting with `#` are skipped.
 *
 * Progress is kept in `<file>.progress` (byte offset and counts, written as lines complete); `--resume`
 * continues after the last line done, provided the file's beginning is unchanged. A bad line (not JSON,
 * not a command, refused by the API) is reported with its line number and the import goes on; the exit
 * code is then 1. An unreachable service or a refused operator token stops the import (exit 5 or 6)
 * with the progress saved, ready for `--resume`.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { open, readFile, rename, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { SingleBar } from 'cli-progress';
import type { Command } from 'commander';
import { z } from 'zod';
import { CliError, EXIT, operatorToken } from '../client.ts';
import { plural, printableLine } from '../terminal.ts';
import { runClientCommand } from './run.ts';

const PLATFORM_BASE = '/platform/v1';
/** How much of the file's beginning the progress file fingerprints, to notice a different file. */
const FINGERPRINT_BYTES = 64 * 1024;
const SAVE_EVERY_MS = 250;

const lineSchema = z.strictObject({
  method: z.enum(['PUT', 'POST', 'PATCH', 'DELETE']),
  path: z
    .string()
    .max(2048)
    .regex(/^\/[A-Za-z0-9._~%/-]*$/, 'expected a platform route such as /stores/7'),
  body: z.unknown().optional(),
  idempotency_key: z
    .string()
    .regex(/^[\x20-\x7e]{1,255}$/, 'expected 1 to 255 printable ASCII characters')
    .optional(),
});
type ImportLine = z.infer<typeof lineSchema>;

export interface LineFailure {
  line: number;
  status: number | null;
  code: string;
  detail: string;
  errors?: unknown;
}

interface Progress {
  file: string;
  size: number;
  fingerprint: string;
  /** Bytes of the file done: the next line starts here. */
  offset: number;
  /** Lines done (the last line number handled). */
  line: number;
  ok: number;
  failed: number;
  updated_at: string;
}

export interface ImportSummary {
  file: string;
  resumed_from_line: number;
  /** Lines with a command handled by this run. */
  sent: number;
  ok: number;
  failed: number;
  /** Totals over every run of this import (resumed ones included). */
  total_ok: number;
  total_failed: number;
  lines: number;
  seconds: number;
  failures: LineFailure[];
}

async function fingerprint(file: string, upTo: number): Promise<string> {
  const handle = await open(file, 'r');
  try {
    const buffer = Buffer.alloc(Math.min(upTo, FINGERPRINT_BYTES));
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
    return createHash('sha256').update(buffer.subarray(0, bytesRead)).digest('hex');
  } finally {
    await handle.close();
  }
}

async function saveProgress(file: string, progress: Progress): Promise<void> {
  const temp = `${file}.${process.pid}.tmp`;
  // Its failures quote the lines' answers: private to the operator, as the data dir's files are.
  await writeFile(temp, `${JSON.stringify(progress)}\n`, { mode: 0o600 });
  await rename(temp, file);
}

/** The file's lines with the byte offset just after each (line breaks `\n` or `\r\n`). */
async function* linesFrom(file: string, start: number): AsyncGenerator<{ text: string; end: number }> {
  let pending: Buffer = Buffer.alloc(0);
  let offset = start;
  for await (const chunk of createReadStream(file, { start })) {
    pending = pending.length === 0 ? (chunk as Buffer) : Buffer.concat([pending, chunk as Buffer]);
    let newline = pending.indexOf(0x0a);
    while (newline !== -1) {
      offset += newline + 1;
      yield { text: pending.subarray(0, newline).toString('utf8').replace(/\r$/, ''), end: offset };
      pending = pending.subarray(newline + 1);
      newline = pending.indexOf(0x0a);
    }
  }
  if (pending.length > 0)
    yield { text: pending.toString('utf8').replace(/\r$/, ''), end: offset + pending.length };
}

function parseLine(text: string): { command: ImportLine } | { failure: Omit<LineFailure, 'line'> } {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return { failure: { status: null, code: 'malformed_json', detail: 'the line is not valid JSON' } };
  }
  const parsed = lineSchema.safeParse(json);
  if (!parsed.success) {
    const errors = parsed.error.issues.map((i) => ({
      field: i.path.join('.') || '(line)',
      message: i.message,
    }));
    return {
      failure: {
        status: null,
        code: 'invalid_line',
        detail: errors.map((e) => `${e.field}: ${e.message}`).join('; '),
        errors,
      },
    };
  }
  const command = parsed.data;
  if (command.method === 'DELETE' && command.body !== undefined) {
    return { failure: { status: null, code: 'invalid_line', detail: 'body: a DELETE takes no body' } };
  }
  if (command.idempotency_key !== undefined && command.method !== 'POST') {
    return {
      failure: { status: null, code: 'invalid_line', detail: 'idempotency_key: only a POST takes one' },
    };
  }
  return { command };
}

interface Sender {
  base: string;
  send(command: ImportLine, lineNo: number, text: string): Promise<Omit<LineFailure, 'line'> | null>;
}

async function createSender(): Promise<Sender> {
  const base = (process.env.PDS_URL?.trim() || 'http://localhost:8080').replace(/\/+$/, '');
  const token = await operatorToken(process.env);
  return {
    base,
    /** Sends one line; null when it was applied. Retries a busy service (503) a few times. */
    async send(command, lineNo, text) {
      const route = command.path.startsWith(`${PLATFORM_BASE}/`)
        ? command.path
        : `${PLATFORM_BASE}${command.path}`;
      const key =
        command.method === 'POST'
          ? (command.idempotency_key ??
            `pds-import-${createHash('sha256').update(`${lineNo}\n${text}`).digest('hex').slice(0, 40)}`)
          : undefined;
      for (let attempt = 1; ; attempt++) {
        let response: Response;
        try {
          response = await fetch(`${base}${route}`, {
            method: command.method,
            headers: {
              authorization: `Bearer ${token}`,
              accept: 'application/json',
              ...(command.body === undefined ? {} : { 'content-type': 'application/json' }),
              ...(key ? { 'idempotency-key': key } : {}),
            },
            body: command.body === undefined ? undefined : JSON.stringify(command.body),
          });
        } catch (err) {
          const reason = (err as { cause?: { code?: string } }).cause?.code ?? (err as Error).message;
          throw new CliError(`cannot reach ${base}: ${reason}`, EXIT.unreachable);
        }
        const bodyText = await response.text();
        if (response.ok) return null;
        let problem: { code?: string; detail?: string; errors?: unknown } = {};
        try {
          problem = JSON.parse(bodyText) as typeof problem;
        } catch {
          problem = { detail: bodyText.slice(0, 200) };
        }
        if (response.status === 401 || response.status === 403) {
          throw new CliError(`${response.status}: the operator token was refused`, EXIT.unauthorized);
        }
        // Contention, a lagging read model, a first request with the same key still running.
        const retryable =
          response.status === 503 ||
          (response.status === 409 && problem.code === 'idempotency_request_in_progress');
        if (retryable && attempt < 6) {
          const after = Number(response.headers.get('retry-after'));
          await new Promise((r) =>
            setTimeout(
              r,
              Math.min(Number.isFinite(after) && after > 0 ? after * 1000 : 200 * attempt, 10_000),
            ),
          );
          continue;
        }
        return {
          status: response.status,
          code: problem.code ?? `http_${response.status}`,
          detail: problem.detail ?? response.statusText,
          ...(problem.errors ? { errors: problem.errors } : {}),
        };
      }
    },
  };
}

export async function importFile(
  file: string,
  options: {
    resume?: boolean;
    onLine?: (done: number, line: number) => void;
    onFailure?: (f: LineFailure) => void;
  },
): Promise<ImportSummary> {
  const absolute = path.resolve(file);
  let size: number;
  try {
    size = (await stat(absolute)).size;
  } catch (err) {
    throw new CliError(
      `cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
      EXIT.usage,
    );
  }
  const progressFile = `${absolute}.progress`;
  let progress: Progress = {
    file: absolute,
    size,
    fingerprint: '',
    offset: 0,
    line: 0,
    ok: 0,
    failed: 0,
    updated_at: new Date().toISOString(),
  };
  if (options.resume) {
    let saved: Progress | undefined;
    try {
      saved = JSON.parse(await readFile(progressFile, 'utf8')) as Progress;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') {
        throw new CliError(`cannot read ${progressFile}: ${(err as Error).message}`, EXIT.usage);
      }
    }
    if (saved) {
      if (saved.offset > size || (await fingerprint(absolute, saved.offset)) !== saved.fingerprint) {
        throw new CliError(
          `${file} is not the file ${progressFile} was recorded for (it changed before line ${saved.line + 1}); delete the progress file to start over`,
          EXIT.usage,
        );
      }
      progress = { ...saved, size };
    }
  }
  const sender = await createSender();
  const began = performance.now();
  const resumedFrom = progress.line;
  const failures: LineFailure[] = [];
  let sent = 0;
  let ok = 0;
  let lastSave = 0;
  let lineNo = progress.line;

  const save = async (force = false) => {
    const now = performance.now();
    if (!force && now - lastSave < SAVE_EVERY_MS) return;
    lastSave = now;
    progress.fingerprint = await fingerprint(absolute, progress.offset);
    progress.updated_at = new Date().toISOString();
    await saveProgress(progressFile, progress);
  };

  try {
    for await (const { text, end } of linesFrom(absolute, progress.offset)) {
      lineNo += 1;
      const trimmed = text.trim();
      if (trimmed !== '' && !trimmed.startsWith('#')) {
        sent += 1;
        const parsed = parseLine(trimmed);
        // A failure to reach the service throws before the line counts as done.
        const failure =
          'failure' in parsed ? parsed.failure : await sender.send(parsed.command, lineNo, trimmed);
        if (failure) {
          const f = { line: lineNo, ...failure };
          failures.push(f);
          progress.failed += 1;
          options.onFailure?.(f);
        } else {
          ok += 1;
          progress.ok += 1;
        }
      }
      progress.offset = end;
      progress.line = lineNo;
      options.onLine?.(end, lineNo);
      await save();
    }
  } finally {
    await save(true);
  }
  return {
    file: absolute,
    resumed_from_line: resumedFrom,
    sent,
    ok,
    failed: failures.length,
    total_ok: progress.ok,
    total_failed: progress.failed,
    lines: progress.line,
    seconds: Math.round(performance.now() - began) / 1000,
    failures,
  };
}

const describeFailure = (f: LineFailure) =>
  `line ${f.line}: ${f.status === null ? '' : `${f.status} `}${f.code}: ${f.detail}` +
  (Array.isArray(f.errors) && f.errors.length > 0 && f.status !== null
    ? ` (${(f.errors as { field?: string; message?: string }[]).map((e) => `${e.field}: ${e.message}`).join('; ')})`
    : '');

export function registerImport(program: Command): void {
  program
    .command('import')
    .description(
      'send a file of platform commands (NDJSON, one per line: {"method","path","body","idempotency_key"?}) to the platform API',
    )
    .argument('<file>', 'the NDJSON file')
    .option('--resume', 'continue after the last line done (kept in <file>.progress)')
    .option('--json', 'print the summary and every failed line as JSON')
    .addHelpText(
      'after',
      `
Each line: {"method":"PUT|POST|PATCH|DELETE","path":"/stores/7","body":{...}} (path with or without
/platform/v1; "idempotency_key" optional on a POST). Blank lines and lines starting with # are skipped.
Bad lines are reported with their line number and skipped; the exit code is then 1.`,
    )
    .action((file: string, options: { resume?: boolean; json?: boolean }) =>
      runClientCommand(async () => {
        const size = await stat(file).then(
          (s) => s.size,
          () => 0,
        );
        const bar =
          !options.json && process.stderr.isTTY && size > 0
            ? new SingleBar({
                format: 'import [{bar}] {percentage}% | line {line} | {failed} failed',
                hideCursor: true,
                stream: process.stderr,
              })
            : undefined;
        let failed = 0;
        // Under a progress bar the failed lines wait until it is gone, so both stay readable.
        const held: string[] = [];
        bar?.start(size, 0, { line: 0, failed });
        let summary: ImportSummary;
        try {
          summary = await importFile(file, {
            resume: options.resume,
            onLine: (done, line) => bar?.update(done, { line, failed }),
            onFailure(f) {
              failed += 1;
              if (options.json) return;
              const text = `pds: ${printableLine(describeFailure(f))}\n`;
              if (bar) held.push(text);
              else process.stderr.write(text);
            },
          });
        } finally {
          bar?.stop();
          process.stderr.write(held.join(''));
        }
        if (summary.failed > 0) process.exitCode = EXIT.failed;
        if (options.json) return `${JSON.stringify(summary, null, 2)}\n`;
        const resumed =
          summary.resumed_from_line > 0 ? `, resumed after line ${summary.resumed_from_line}` : '';
        return (
          `imported ${summary.ok} of ${plural(summary.sent, 'command')} from ${file} in ${summary.seconds} s` +
          `${resumed}; ${summary.failed} failed` +
          (summary.resumed_from_line > 0
            ? ` (all runs: ${summary.total_ok} ok, ${summary.total_failed} failed)`
            : '') +
          '\n'
        );
      }),
    );
}
