/**
 * Checks an HTTP answer against an OpenAPI 3.1 document: the operation (method and path template,
 * found from a template or a concrete URL), the status (documented, or the answer is an error), the
 * media type, the headers the document marks required (and an `ETag` sent, declared), and the body
 * against the response's JSON Schema (ajv, draft 2020-12, with the document's `components.schemas`).
 * Named record schemas are objects with `additionalProperties: false`, so an undocumented field is a
 * failure, not a pass.
 */
import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import formats from 'ajv-formats';

type Json = Record<string, unknown>;

export interface ResponseCheckOptions {
  /** The answer's `Content-Type`; when given it must be one the response documents. */
  contentType?: string | null;
  /**
   * The answer's headers; when given, every header the response marks `required` must be present, and
   * an `ETag` the answer sends must be one the response declares (a client reads it for `If-Match`).
   */
  headers?: Headers;
}

interface Compiled {
  ajv: Ajv2020;
  validators: Map<string, ValidateFunction>;
}

const compiled = new WeakMap<object, Compiled>();

/** The value a local JSON pointer (`#/components/…`) names in the document, or undefined. */
export function resolvePointer(document: unknown, ref: string): unknown {
  if (!ref.startsWith('#')) return undefined;
  let node: unknown = document;
  for (const raw of ref.slice(1).split('/').slice(1)) {
    const key = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
    if (node === null || typeof node !== 'object' || !Object.hasOwn(node, key)) return undefined;
    node = (node as Json)[key];
  }
  return node;
}

/** Follows `$ref`s (responses, headers, parameters) to the object they name. */
function deref(document: Json, value: unknown): Json {
  const seen = new Set<string>();
  let node = value as Json;
  while (node && typeof node['$ref'] === 'string') {
    const ref = node['$ref'] as string;
    if (seen.has(ref)) throw new Error(`circular reference ${ref}`);
    seen.add(ref);
    const target = resolvePointer(document, ref);
    if (target === undefined) throw new Error(`unresolved reference ${ref}`);
    node = target as Json;
  }
  return node;
}

/** Every `format` used anywhere in `value`. */
function formatsUsed(value: unknown, into = new Set<string>()): Set<string> {
  if (Array.isArray(value)) for (const v of value) formatsUsed(v, into);
  else if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      if (k === 'format' && typeof v === 'string') into.add(v);
      else formatsUsed(v, into);
    }
  }
  return into;
}

/** `#/components/schemas/X` → `#/$defs/X`, so one schema carries the document's components as `$defs`. */
function toDefsRefs(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(toDefsRefs);
  if (value === null || typeof value !== 'object') return value;
  const out: Json = {};
  for (const [k, v] of Object.entries(value)) {
    out[k] =
      k === '$ref' && typeof v === 'string' && v.startsWith('#/components/schemas/')
        ? `#/$defs/${v.slice('#/components/schemas/'.length)}`
        : toDefsRefs(v);
  }
  return out;
}

function compilerFor(document: Json): Compiled {
  let c = compiled.get(document);
  if (c) return c;
  const ajv = new Ajv2020({ allErrors: true, strict: true, strictTypes: false, strictTuples: false });
  formats.default(ajv);
  // OpenAPI's own Schema Object keywords are annotations for a validator.
  ajv.addVocabulary(['discriminator', 'xml', 'externalDocs', 'example']);
  // Formats zod emits beside a `pattern` that does the checking (cuid, nanoid, e164, …): annotations.
  for (const name of formatsUsed(document)) if (!ajv.formats[name]) ajv.addFormat(name, true);
  c = { ajv, validators: new Map() };
  compiled.set(document, c);
  return c;
}

/** A validator of `schema` (a Schema Object of `document`), compiled once per document and schema. */
export function schemaValidator(document: Json, schema: Json, cacheKey: string): ValidateFunction {
  const c = compilerFor(document);
  let validate = c.validators.get(cacheKey);
  if (!validate) {
    const components = ((document['components'] as Json | undefined)?.['schemas'] ?? {}) as Json;
    validate = c.ajv.compile({ ...(toDefsRefs(schema) as Json), $defs: toDefsRefs(components) as Json });
    c.validators.set(cacheKey, validate);
  }
  return validate;
}

/** The path template of the document matching `pathOrUrl` (a template itself, or a concrete URL). */
export function matchPath(document: Json, pathOrUrl: string): string | undefined {
  const paths = Object.keys((document['paths'] ?? {}) as Json);
  let path = new URL(pathOrUrl, 'http://localhost').pathname;
  if (paths.includes(pathOrUrl)) return pathOrUrl;
  const servers = (document['servers'] as { url: string }[] | undefined) ?? [];
  for (const { url } of servers) {
    const base = new URL(url, 'http://localhost').pathname.replace(/\/$/, '');
    if (base && (path === base || path.startsWith(`${base}/`))) {
      path = path.slice(base.length) || '/';
      break;
    }
  }
  if (paths.includes(path)) return path;
  const segments = path.split('/');
  const candidates = paths.filter((template) => {
    const parts = template.split('/');
    return (
      parts.length === segments.length &&
      parts.every((p, i) =>
        /^\{[^}]+\}$/.test(p) ? segments[i] !== '' : p === decodeURIComponent(segments[i]),
      )
    );
  });
  // The most literal template wins: `/menu_products/export` before `/menu_products/{id}`.
  const params = (t: string) => (t.match(/\{/g) ?? []).length;
  return candidates.sort((a, b) => params(a) - params(b))[0];
}

const mediaType = (contentType: string) => contentType.split(';')[0].trim().toLowerCase();

function describeErrors(errors: ErrorObject[] | null | undefined): string[] {
  return (errors ?? []).map((e) => {
    const extra =
      e.keyword === 'additionalProperties'
        ? ` (${(e.params as { additionalProperty: string }).additionalProperty})`
        : e.keyword === 'enum'
          ? ` (${JSON.stringify((e.params as { allowedValues: unknown[] }).allowedValues)})`
          : '';
    return `${e.instancePath || '(body)'} ${e.message}${extra}`;
  });
}

/** What is wrong with the answer, as readable lines; empty when it matches the document. */
export function responseErrors(
  document: object,
  method: string,
  pathOrUrl: string,
  status: number,
  body: unknown,
  options: ResponseCheckOptions = {},
): string[] {
  const doc = document as Json;
  const template = matchPath(doc, pathOrUrl);
  if (!template) return [`no path of the document matches ${pathOrUrl}`];
  const item = (doc['paths'] as Json)[template] as Json;
  const operation = item[method.toLowerCase()] as Json | undefined;
  if (!operation) return [`${method.toUpperCase()} ${template} is not documented`];
  const where = `${method.toUpperCase()} ${template} ${status}`;
  const responses = operation['responses'] as Json;
  const documented = responses[String(status)] ?? responses[`${String(status)[0]}XX`] ?? responses['default'];
  if (!documented) {
    return [`${where}: status not documented (documented: ${Object.keys(responses).join(', ')})`];
  }
  const response = deref(doc, documented);
  const errors: string[] = [];

  if (options.headers) {
    for (const [name, header] of Object.entries((response['headers'] ?? {}) as Json)) {
      if (deref(doc, header)['required'] === true && !options.headers.has(name)) {
        errors.push(`${where}: required header ${name} is missing`);
      }
    }
    const declared = Object.keys((response['headers'] ?? {}) as Json).map((name) => name.toLowerCase());
    if (options.headers.has('etag') && !declared.includes('etag'))
      errors.push(`${where}: sends an ETag the document does not declare`);
  }

  const content = response['content'] as Record<string, Json> | undefined;
  if (!content) {
    if (body !== null && body !== undefined && body !== '')
      errors.push(`${where}: documented without a body`);
    return errors;
  }
  const types = Object.keys(content);
  let type: string;
  if (options.contentType !== undefined) {
    const actual = options.contentType ? mediaType(options.contentType) : '(none)';
    const found = types.find((t) => mediaType(t) === actual);
    if (!found) return [...errors, `${where}: content type ${actual}, documented: ${types.join(', ')}`];
    type = found;
  } else if (types.length === 1) {
    type = types[0];
  } else {
    return [...errors, `${where}: several content types documented; pass the answer's contentType`];
  }
  const schema = content[type]['schema'] as Json | undefined;
  if (!schema) return errors;
  const validate = schemaValidator(doc, schema, `${method.toLowerCase()} ${template} ${status} ${type}`);
  if (!validate(body)) {
    for (const line of describeErrors(validate.errors)) errors.push(`${where}: ${line}`);
  }
  return errors;
}

/** Throws, listing what is wrong, unless the answer matches the document. */
export function validateResponse(
  document: object,
  method: string,
  pathOrUrl: string,
  status: number,
  body: unknown,
  options: ResponseCheckOptions = {},
): void {
  const errors = responseErrors(document, method, pathOrUrl, status, body, options);
  if (errors.length > 0) {
    const shown = JSON.stringify(body);
    throw new Error(
      `the answer to ${method.toUpperCase()} ${pathOrUrl} does not match the OpenAPI document:\n  ` +
        `${errors.join('\n  ')}\nbody: ${shown && shown.length > 2000 ? `${shown.slice(0, 2000)}…` : shown}`,
    );
  }
}
