/**
 * How loud a request's access line is (docs/operations.md, "Logs"): the reads that come every few
 * seconds whoever is looking, the probes' and the console's, at `debug`, so that the `info` log shows
 * what people and partners did.
 */
/** Probes and Prometheus's scrapes hit these every few seconds. */
const OPS_PATHS = new Set(['/healthz', '/readyz', '/metrics']);
const READS = new Set(['GET', 'HEAD']);

/**
 * `debug` for a probe that did not fail, and for a read of the admin API that the console's session
 * authenticated and that succeeded (the console refreshes its panels every 1 to 10 s); `info` for the
 * rest: a console's write, a failed read, and every call with a bearer token.
 */
export function accessLogLevel(request: {
  method: string;
  path: string;
  status: number;
  state: { consoleSession?: boolean };
}): 'debug' | 'info' {
  const { method, path, status, state } = request;
  if (OPS_PATHS.has(path)) return status < 500 ? 'debug' : 'info';
  if (state.consoleSession === true && READS.has(method) && status < 400) return 'debug';
  return 'info';
}
