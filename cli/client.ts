/**
 * The operator CLI is a client of the admin API: `PDS_URL` (default http://localhost:8080) and
 * `PDS_OPERATOR_TOKEN` (default: the token the embedded service keeps in `<PDS_DATA_DIR>/operator-token`).
 * Failures carry an exit code scripts can act on.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';

/** Exit codes of every `pds` client command. */
export const EXIT = {
  ok: 0,
  /** The server failed, or something unexpected happened. */
  failed: 1,
  /** Bad arguments or configuration on the command line. */
  usage: 2,
  /** The thing asked for does not exist (HTTP 404). */
  notFound: 3,
  /** The server refused the request (another 4xx: invalid input, conflict, …). */
  refused: 4,
  /** The service could not be reached. */
  unreachable: 5,
  /** The operator token was refused (401/403). */
  unauthorized: 6,
  /** Done as far as it could go, with a step left (the output says which): run it again. */
  unfinished: 7,
} as const;

export class CliError extends Error {
  override name = 'CliError';
  readonly exitCode: number;
  readonly problem: unknown;
  constructor(message: string, exitCode: number, problem?: unknown) {
    super(message);
    this.exitCode = exitCode;
    this.problem = problem;
  }
}

export interface AdminClient {
  request<T>(method: string, url: string, body?: unknown): Promise<T>;
  readonly baseUrl: string;
}

export async function operatorToken(env: NodeJS.ProcessEnv): Promise<string> {
  if (env.PDS_OPERATOR_TOKEN?.trim()) return env.PDS_OPERATOR_TOKEN.trim();
  const file = path.join(env.PDS_DATA_DIR?.trim() || './data', 'operator-token');
  try {
    return (await readFile(file, 'utf8')).trim();
  } catch {
    throw new CliError(
      `no operator token: set PDS_OPERATOR_TOKEN (or PDS_DATA_DIR to the service's data dir)`,
      EXIT.usage,
    );
  }
}

export async function createAdminClient(env: NodeJS.ProcessEnv = process.env): Promise<AdminClient> {
  const baseUrl = (env.PDS_URL?.trim() || 'http://localhost:8080').replace(/\/+$/, '');
  const token = await operatorToken(env);
  return {
    baseUrl,
    async request<T>(method: string, url: string, body?: unknown): Promise<T> {
      let response: Response;
      try {
        response = await fetch(`${baseUrl}${url}`, {
          method,
          headers: {
            authorization: `Bearer ${token}`,
            accept: 'application/json',
            ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
      } catch (err) {
        const reason = (err as { cause?: { code?: string } }).cause?.code ?? (err as Error).message;
        throw new CliError(`cannot reach ${baseUrl}: ${reason}`, EXIT.unreachable);
      }
      const text = await response.text();
      const parsed = text ? safeJson(text) : null;
      if (response.ok) return parsed as T;
      const problem = parsed as { detail?: string; code?: string } | null;
      const detail = problem?.detail ?? (text.slice(0, 200) || response.statusText);
      const code =
        response.status === 404
          ? EXIT.notFound
          : response.status === 401 || response.status === 403
            ? EXIT.unauthorized
            : response.status < 500
              ? EXIT.refused
              : EXIT.failed;
      throw new CliError(
        `${response.status} ${problem?.code ?? ''}: ${detail}`.replace(' :', ':'),
        code,
        parsed,
      );
    },
  };
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

export { table } from './table.ts';

/** Every item of a paged admin list: pages of 500, following `next_cursor` to the end. */
export async function fetchAll<T>(
  client: AdminClient,
  base: string,
  field: string,
  query: URLSearchParams = new URLSearchParams(),
): Promise<T[]> {
  const all: T[] = [];
  let cursor: string | null = null;
  do {
    const params = new URLSearchParams(query);
    params.set('limit', '500');
    if (cursor) params.set('cursor', cursor);
    const page: Record<string, unknown> & { next_cursor: string | null } = await client.request(
      'GET',
      `${base}?${params}`,
    );
    all.push(...(page[field] as T[]));
    cursor = page.next_cursor;
  } while (cursor);
  return all;
}
