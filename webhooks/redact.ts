/**
 * Striking a subscription's secrets (its auth token and signing secret) from what a receiver answered,
 * before anything records or shows it (docs/webhooks.md, "Outcomes and retries"). A receiver may echo
 * what it was sent, and not only as it was sent: a JSON body escapes it, a query string or a form
 * percent-encodes it, a debugging page shows it in base64, base64url or hex. Each of those forms is
 * struck, wherever it stands:
 *
 * - the secret with any of its characters escaped the JSON way (`\"`, `\/`, `\u0041`), the URL way
 *   (`%41`, `%c3%a9`, `+` for a space), either of them twice (`\\\"`, `%2541`), or the HTML way
 *   (`&quot;`, `&#34;`, `&#x22;`), in either letter case, and as it is;
 * - its hex, in either letter case;
 * - its base64 and base64url, at each of the three alignments it can have inside a longer encoded text
 *   (`Bearer <token>` encoded whole): the characters that depend on the secret's bytes alone;
 * - a tail that starts any of these forms (the excerpt is cut at 1 KB, possibly inside an echo), also
 *   when cut inside an escape (`%2`, `\u00`).
 *
 * A derived form (hex, base64, a tail) shorter than 8 characters is left alone: ordinary text would
 * match it. The secret itself and its escaped forms are struck whatever their length.
 */
const REDACTED = '[redacted]';
const MIN_FORM_LENGTH = 8;

const regexLiteral = (s: string) => s.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&');

/** Hex digits in either letter case, as a regex. */
const anyCaseHex = (digits: string) =>
  [...digits].map((d) => (/[a-f]/i.test(d) ? `[${d.toLowerCase()}${d.toUpperCase()}]` : d)).join('');

const JSON_SHORT_ESCAPES: Readonly<Record<string, string>> = {
  '"': '\\"',
  '\\': '\\\\',
  '/': '\\/',
  '\b': '\\b',
  '\f': '\\f',
  '\n': '\\n',
  '\r': '\\r',
  '\t': '\\t',
};

const HTML_ENTITIES: Readonly<Record<string, string>> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&apos;',
};

/** Compiled forms by character, shared by every redactor (secrets draw on few characters). */
const compiledForms = new Map<string, readonly RegExp[]>();

/**
 * Every way one character of a secret may be written, each a sticky regex: itself, its JSON escapes
 * (`\"`, `\u0022`), its percent-encoding (`%22`, bytes of UTF-8), `+` for a space.
 */
function characterForms(c: string): readonly RegExp[] {
  let compiled = compiledForms.get(c);
  if (compiled) return compiled;
  const forms = [regexLiteral(c)];
  const short = JSON_SHORT_ESCAPES[c];
  if (short) forms.push(regexLiteral(short));
  let units = '';
  for (let i = 0; i < c.length; i++) {
    units += `\\\\u${anyCaseHex(c.charCodeAt(i).toString(16).padStart(4, '0'))}`;
  }
  forms.push(units);
  const bytes = [...Buffer.from(c, 'utf8')].map((b) => anyCaseHex(b.toString(16).padStart(2, '0')));
  forms.push(bytes.map((b) => `%${b}`).join(''));
  // Encoded twice: a percent-encoded query echoed in another query, a JSON string in a JSON string.
  forms.push(bytes.map((b) => `%25${b}`).join(''));
  if (short) forms.push(regexLiteral(JSON.stringify(short).slice(1, -1)));
  // An HTML page: the named entities of markup's own characters, and numeric references.
  const entity = HTML_ENTITIES[c];
  if (entity) forms.push(regexLiteral(entity));
  const code = c.codePointAt(0) ?? 0;
  forms.push(`&#0*${code};`, `&#[xX]0*${anyCaseHex(code.toString(16))};`);
  if (c === ' ') forms.push('\\+');
  compiled = forms.map((f) => new RegExp(f, 'y'));
  compiledForms.set(c, compiled);
  return compiled;
}

/** What may be left of one escaped character where the text was cut. */
const CUT_ESCAPE = /^(?:%(?:25?)?[0-9a-fA-F]?|\\{1,3}(?:u[0-9a-fA-F]{0,3})?|&#?[xX]?[0-9a-zA-Z]*)$/;

/**
 * Character forms a scan of one text may try: past them (a text made to be costly to read) the text
 * is struck from where the scan stands to its end, as a tail would be.
 */
const SCAN_BUDGET = 100_000;

/**
 * What the text holds from `start`: the whole secret (each character in any of its forms) ending at
 * `end`, a tail of it (8 characters or more) reaching the text's end, or nothing. Forms of one
 * character can start alike (`\` and `\\`), so every reading is tried, each (place, character) once.
 */
function readFrom(
  text: string,
  start: number,
  secret: readonly (readonly RegExp[])[],
  budget: { left: number },
): { end: number } | 'tail' | undefined {
  const seen = new Set<number>();
  const open: Array<[at: number, read: number]> = [[start, 0]];
  for (let next = open.pop(); next !== undefined; next = open.pop()) {
    const [at, read] = next;
    if (read === secret.length) return { end: at };
    const reachesEnd = at === text.length || CUT_ESCAPE.test(text.slice(at));
    if (read >= MIN_FORM_LENGTH && reachesEnd) return 'tail';
    if (at === text.length) continue;
    for (const form of secret[read]) {
      if (--budget.left < 0) return 'tail';
      form.lastIndex = at;
      const length = form.exec(text)?.[0].length;
      if (length === undefined) continue;
      const state = (at + length) * (secret.length + 1) + read + 1;
      if (seen.has(state)) continue;
      seen.add(state);
      open.push([at + length, read + 1]);
    }
  }
  return undefined;
}

/** `text` without the secret written with its characters in any of their forms, whole or as a tail. */
function strikeEscaped(text: string, secret: readonly (readonly RegExp[])[]): string {
  const budget = { left: SCAN_BUDGET };
  let out = '';
  let kept = 0;
  for (let start = 0; start < text.length; start++) {
    const found = readFrom(text, start, secret, budget);
    if (found === undefined) continue;
    out += `${text.slice(kept, start)}${REDACTED}`;
    if (found === 'tail') return out;
    kept = found.end;
    start = found.end - 1;
  }
  return out + text.slice(kept);
}

/**
 * The characters of the secret's base64 that its own bytes decide, when it starts 0, 1 or 2 bytes
 * into the encoded text: the first and last characters of an encoding mix in the bytes around it.
 */
function base64Cores(bytes: Buffer): string[] {
  const cores: string[] = [];
  for (let offset = 0; offset < 3; offset++) {
    const encoded = Buffer.concat([Buffer.alloc(offset), bytes]).toString('base64');
    const first = Math.ceil((8 * offset) / 6);
    const end = Math.floor((8 * (offset + bytes.length)) / 6);
    const core = encoded.slice(first, end);
    cores.push(core, core.replaceAll('+', '-').replaceAll('/', '_'));
  }
  return cores;
}

/** `text` with a tail that starts `form` (at least 8 of its characters) struck. */
function withoutTail(text: string, form: string): string {
  for (let k = Math.min(form.length - 1, text.length); k >= MIN_FORM_LENGTH; k--) {
    if (text.endsWith(form.slice(0, k))) return `${text.slice(0, text.length - k)}${REDACTED}`;
  }
  return text;
}

/** The secrets' forms, made once (a channel redacts every answer of its subscription). */
export function createRedactor(secrets: readonly string[]): (text: string) => string {
  const escaped: (readonly RegExp[])[][] = [];
  const hexPatterns: RegExp[] = [];
  const encoded = new Set<string>();
  for (const secret of secrets) {
    if (secret.length === 0) continue;
    escaped.push([...secret].map(characterForms));
    const bytes = Buffer.from(secret, 'utf8');
    const hex = bytes.toString('hex');
    if (hex.length >= MIN_FORM_LENGTH) hexPatterns.push(new RegExp(anyCaseHex(hex), 'g'));
    // The secret encoded alone first (its last characters and padding too), then its cores.
    const alone = [bytes.toString('base64'), bytes.toString('base64url')];
    for (const form of [...alone, ...base64Cores(bytes), hex, hex.toUpperCase()]) {
      if (form.length >= MIN_FORM_LENGTH) encoded.add(form);
    }
  }
  return (text) => {
    let out = text;
    for (const secret of escaped) out = strikeEscaped(out, secret);
    for (const pattern of hexPatterns) out = out.replace(pattern, REDACTED);
    for (const form of encoded) out = out.replaceAll(form, REDACTED);
    for (const form of encoded) {
      const cut = withoutTail(out, form);
      if (cut !== out) return cut;
    }
    return out;
  };
}

/** `text` without `secret` in any of the forms above. */
export function redactSecret(text: string, secret: string): string {
  return createRedactor([secret])(text);
}
