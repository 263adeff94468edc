/**
 * Request validation with zod: every refusal is a problem document naming the offending field.
 * Bodies and parameters are parsed by the same schemas the domain and the OpenAPI documents use.
 */
import { z } from 'zod';
import { type AppContext, HttpProblem, type ProblemFieldError } from './http.ts';

function fieldPath(path: ReadonlyArray<PropertyKey>, root: string): string {
  let out = root;
  for (const p of path) out += typeof p === 'number' ? `[${p}]` : out ? `.${String(p)}` : String(p);
  return out || '(body)';
}

/** Turns a zod error into problem field errors (`items[0].count: expected …`). */
export function fieldErrors(error: z.ZodError, root = ''): ProblemFieldError[] {
  const errors: ProblemFieldError[] = [];
  for (const issue of error.issues) {
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys)
        errors.push({ field: fieldPath([...issue.path, key], root), message: 'unknown field' });
    } else if (issue.code === 'invalid_type' && issue.input === undefined) {
      errors.push({ field: fieldPath(issue.path, root), message: 'required' });
    } else {
      errors.push({ field: fieldPath(issue.path, root), message: issue.message });
    }
  }
  return errors;
}

/**
 * A request refused for its own form (path, query, body, headers) before the route ran anything: an
 * `Idempotency-Key` it carried is left free (docs/write-side.md, "Idempotency").
 */
export class InvalidRequestProblem extends HttpProblem {
  override name = 'InvalidRequestProblem';
}

function refuse(status: number, code: string, what: string, errors: ProblemFieldError[]): HttpProblem {
  const summary = errors
    .slice(0, 3)
    .map((e) => `${e.field}: ${e.message}`)
    .join('; ');
  return new InvalidRequestProblem(status, {
    code,
    detail: `${what}: ${summary}${errors.length > 3 ? '; …' : ''}`,
    errors,
  });
}

/** The JSON body, validated (422 naming each bad field; unknown fields are refused by strict schemas). */
export function parseBody<S extends z.ZodType>(ctx: AppContext, schema: S): z.output<S> {
  const body = (ctx.request as { body?: unknown }).body;
  if (ctx.request.length && !ctx.is('application/json')) {
    throw new InvalidRequestProblem(415, {
      code: 'unsupported_media_type',
      detail: 'send the body as application/json',
    });
  }
  // reportInput: without it zod leaves `input` out of issues, and fieldErrors calls every wrong type "required".
  const parsed = schema.safeParse(body === undefined ? {} : body, { reportInput: true });
  if (!parsed.success)
    throw refuse(422, 'validation_failed', 'The request body is invalid', fieldErrors(parsed.error));
  return parsed.data;
}

/** Path or query parameters, validated (404 for a path id that cannot exist, 400 for a bad query). */
export function parseParams<S extends z.ZodType>(value: unknown, schema: S, status = 400): z.output<S> {
  const parsed = schema.safeParse(value, { reportInput: true });
  if (!parsed.success) {
    throw refuse(
      status,
      status === 404 ? 'not_found' : 'invalid_parameter',
      'Invalid parameters',
      fieldErrors(parsed.error),
    );
  }
  return parsed.data;
}

/**
 * A positive integer id in a path (`/stores/{id}`), written in decimal without a sign, leading zeros,
 * spaces or exponent: `0x10`, `1e1`, ` 7`, `+5` or `07` would otherwise name ids 16, 10, 7, 5 and 7
 * (one record under several URLs, and writes landing on an id the client never wrote).
 */
export const pathId = z
  .string()
  .regex(/^[1-9][0-9]{0,15}$/, 'expected a positive integer id in decimal')
  .transform(Number)
  .pipe(z.number().int().positive().max(Number.MAX_SAFE_INTEGER));
/** A uuid in a path, lower-cased: `ABC…` and `abc…` name the same resource. */
export const pathUuid = z.uuid().transform((s) => s.toLowerCase());

/** `If-Match: 3` or `If-Match: "3"` → 3; absent → undefined; anything else is a 400. */
export function ifMatch(ctx: AppContext): number | undefined {
  const raw = ctx.get('If-Match');
  if (raw === '') return undefined;
  const m = /^(?:W\/)?(?:"(-?\d{1,15})"|(-?\d{1,15}))$/.exec(raw.trim());
  if (!m) {
    throw new InvalidRequestProblem(400, {
      code: 'invalid_if_match',
      detail: 'If-Match must be a stream revision, e.g. If-Match: "3"',
      errors: [{ field: 'If-Match', message: 'expected a revision number' }],
    });
  }
  return Number(m[1] ?? m[2]);
}
