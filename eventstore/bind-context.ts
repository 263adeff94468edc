/**
 * Binds a context (a database handle, a client) as the first argument of each of a module's functions:
 * an adapter's parts are plain functions of their context, and the adapter hands the port bound ones.
 */
// biome-ignore lint/suspicious/noExplicitAny: any function whose first parameter is the context
type Fn<C> = (context: C, ...args: any[]) => unknown;
type Bound<F> = F extends (context: never, ...args: infer A) => infer R ? (...args: A) => R : never;

export function bindContext<C, M extends Record<string, Fn<C>>>(
  context: C,
  functions: M,
): { [K in keyof M]: Bound<M[K]> } {
  const out: Record<string, unknown> = {};
  for (const [name, fn] of Object.entries(functions))
    out[name] = (...args: unknown[]) => fn(context, ...args);
  return out as { [K in keyof M]: Bound<M[K]> };
}
