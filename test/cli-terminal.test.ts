/**
 * What `pds` prints holds no control character (issue 37, the security review: `pds webhooks
 * test-send` printed the receiver's answer raw, and its terminal escapes, a window title, a screen
 * clear, a clipboard write through OSC 52, reached the operator's terminal). Every table cell and
 * every printed text goes through `cli/terminal.ts`.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import test from 'ava';
import { EXIT, table } from '../cli/client.ts';
import { fitColumns, wrapCell } from '../cli/table.ts';
import { displayWidth, plural, printableLine, printableText, terminalWidth } from '../cli/terminal.ts';
import { createWebhook, seedCatalog } from './support/cart-world.ts';
import { startService, type TestService } from './support/service.ts';
import { startReceiver } from './support/webhook-receiver.ts';

const exec = promisify(execFile);

/** A receiver's answer made to take over a terminal. */
const HOSTILE = [
  '\u001b]0;owned\u0007', // OSC 0: the window title
  '\u001b[2J\u001b[H', // clear the screen, cursor home
  '\u001b]52;c;cm0gLXJmIH4=\u0007', // OSC 52: write the clipboard
  '\u009b31m', // 8-bit CSI (C1): red
  '\u009d0;title\u009c', // 8-bit OSC … ST
  'a\rb\u007fc\u0008', // carriage return, DEL, backspace
].join(' ');

/** C0 (but the line feed), DEL, C1. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it finds
const CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/;

async function pds(s: TestService, args: string[]) {
  try {
    const { stdout, stderr } = await exec(process.execPath, ['cli/pds.ts', ...args], {
      env: { PATH: process.env.PATH ?? '', PDS_URL: s.base, PDS_OPERATOR_TOKEN: s.token },
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

test('a control character is shown as its escape: C0, DEL, C1 (U+009B CSI), line breaks in a line', (t) => {
  t.is(printableLine('\u001b]52;c;eA==\u0007'), '\\u001b]52;c;eA==\\u0007');
  t.is(printableLine('\u009b2J'), '\\u009b2J');
  t.is(printableLine('a\u007fb\u0000c\u0085d'), 'a\\u007fb\\u0000c\\u0085d');
  t.is(printableLine('one\ntwo\r\tthree'), 'one\\u000atwo\\u000d\\u0009three');
  t.is(printableText('one\ntwo\u001b[2J\r'), 'one\ntwo\\u001b[2J\\u000d', 'lines stay lines');
  // Printable text, any script, is left alone (U+00A0 and above are not controls).
  const fine = 'Café 🌿 — ñandú 大麻 \u00a0 «ok» ~!@#$%^&*()';
  t.is(printableLine(fine), fine);
  // JSON whose strings hold DEL and C1 characters (JSON.stringify leaves them raw) stays the same JSON.
  const json = JSON.stringify({ excerpt: HOSTILE }, null, 2);
  t.regex(json, CONTROL, 'JSON.stringify alone lets C1 and DEL through');
  t.false(CONTROL.test(printableText(json)));
  t.deepEqual(JSON.parse(printableText(json)), { excerpt: HOSTILE });
});

test('a table cell is one printable line, and the columns stay aligned', (t) => {
  const out = table(
    ['field', 'value'],
    [
      ['name\u001b[2J', HOSTILE],
      ['next', 'line one\nline two'],
    ],
  );
  t.false(CONTROL.test(out), out);
  const lines = out.split('\n');
  t.is(lines.length, 4, 'a line break in a cell does not break the row');
  t.true(lines[2].startsWith('name\\u001b[2J  '));
  t.true(
    lines[3].startsWith(
      `next${' '.repeat('name\\u001b[2J'.length - 'next'.length)}  line one\\u000aline two`,
    ),
  );
});

test('a table fits the width it is given: the widest columns wrap, the narrow ones keep theirs, nothing is lost', (t) => {
  const data = JSON.stringify({
    store_id: 1,
    source: { channel: 'headless', partner_id: null },
    note: 'x'.repeat(70),
  });
  const changes = 'status: "pending" → "verification"; amount: 0 → 20; items: 1 → 2';
  const rows = [
    [0, 'CartCreated', 'platform:bootstrap', data, changes],
    [12, 'CartStatusChanged', 'operator:op_1 (Ada Lovelace)', '{}', 'status: "verification" → "ready"'],
  ];
  const headers = ['rev', 'type', 'actor', 'data', 'changes'];
  const wide = table(headers, rows, undefined);
  t.true(
    wide.split('\n').some((line) => line.length > 150),
    'off a terminal: one line a row, at full width',
  );
  t.is(wide.split('\n').length, 4);

  const out = table(headers, rows, 120);
  const lines = out.split('\n');
  t.true(
    lines.every((line) => line.length <= 120),
    lines.map((l) => l.length).join(','),
  );
  t.true(lines.length > 4, 'the long cells wrapped');
  t.regex(lines[0], /^rev {2}type\s+actor\s+data\s+changes$/, 'the header on one line');
  // The narrow columns keep their width: each type whole, where the header says.
  const typeAt = lines[0].indexOf('type');
  for (const type of ['CartCreated', 'CartStatusChanged'])
    t.true(
      lines.some((line) => line.slice(typeAt).startsWith(`${type} `)),
      type,
    );
  // Every character of every cell is there, in order, in its column.
  const dataAt = lines[0].indexOf('data');
  const changesAt = lines[0].indexOf('changes');
  const column = (from: number, to?: number) =>
    lines
      .slice(2)
      .map((line) => line.slice(from, to).trim())
      .join('')
      .replace(/\s+/g, '');
  t.true(column(dataAt, changesAt).includes(data.replace(/\s+/g, '')), column(dataAt, changesAt));
  t.true(column(changesAt).includes(changes.replace(/\s+/g, '')), column(changesAt));
});

test('a table too wide to stay readable as columns shows each row as a block of column and value', (t) => {
  const data = JSON.stringify({ cart_uuid: '0b2fdf6d-9a9a-41da-8ebe-7495911a09d1', note: 'y'.repeat(90) });
  const rows = [
    [0, 'CartCreated', 'platform:bootstrap (bootstrap token)', data],
    [1, 'CartItemAdded', 'platform:bootstrap (bootstrap token)', '{}'],
  ];
  for (const width of [50, 40]) {
    const out = table(['rev', 'type', 'actor', 'data'], rows, width);
    const lines = out.split('\n');
    t.true(
      lines.every((line) => line.length <= width),
      `${width}: ${lines.map((l) => l.length).join(',')}`,
    );
    const [first, second] = out.split('\n\n');
    t.regex(first, /^rev {4}0\ntype {3}CartCreated\nactor {2}platform:bootstrap/);
    t.regex(second, /^rev {4}1\ntype {3}CartItemAdded\n/);
    const value = first
      .split('\n')
      .slice(first.split('\n').findIndex((line) => line.startsWith('data')))
      .map((line) => line.slice(7))
      .join('');
    t.is(value, data, `${width}: the data whole, wrapped under its label`);
  }
});

test('columns are as wide as a terminal shows them: a CJK name or an emoji takes two, an accent none', (t) => {
  t.is(displayWidth('Ada'), 3);
  t.is(displayWidth('大麻ショップ'), 12);
  t.is(displayWidth('🌿 Green'), 8);
  t.is(displayWidth('👩‍👩‍👧'), 2, 'a family joined by zero-width joiners is one picture');
  t.is(displayWidth('🇺🇸'), 2);
  t.is(displayWidth('Cafe\u0301'), 4, 'e and its combining accent');
  const out = table(
    ['name', 'store'],
    [
      ['大麻ショップ', 1],
      ['🌿 Green', 2],
      ['Plain', 3],
    ],
  );
  const lines = out.split('\n');
  const storeAt = displayWidth(lines[0].slice(0, lines[0].indexOf('store')));
  for (const line of lines.slice(2)) {
    const value = line.trimEnd().split(' ').pop() ?? '';
    t.is(displayWidth(line.slice(0, line.lastIndexOf(value))), storeAt, line);
  }
  t.is(displayWidth(lines[1].split('  ')[0]), 12, 'the rule as wide as the widest name');
  const wrapped = wrapCell('大麻ショップ大麻ショップ', 7);
  t.deepEqual(wrapped, ['大麻シ', 'ョップ', '大麻シ', 'ョップ']);
  t.true(wrapped.every((line) => displayWidth(line) <= 7));
  t.deepEqual(wrapCell('👩‍👩‍👧👩‍👩‍👧👩‍👩‍👧', 4), ['👩‍👩‍👧👩‍👩‍👧', '👩‍👩‍👧'], 'never inside a picture');
});

test('a terminal that reports 0 columns has no known width: tables stay one line a row', (t) => {
  const { stdout } = process;
  const saved = { isTTY: stdout.isTTY, columns: stdout.columns };
  t.teardown(() => Object.assign(stdout, saved));
  Object.assign(stdout, { isTTY: true, columns: 0 });
  t.is(terminalWidth(), undefined);
  Object.assign(stdout, { isTTY: true, columns: 100 });
  t.is(terminalWidth(), 100);
  Object.assign(stdout, { isTTY: false, columns: 100 });
  t.is(terminalWidth(), undefined);
});

test('a count says its noun in the right number: 1 delivery, 0 and 2 deliveries', (t) => {
  t.is(plural(1, 'delivery', 'deliveries'), '1 delivery');
  t.is(plural(0, 'delivery', 'deliveries'), '0 deliveries');
  t.is(plural(2, 'event'), '2 events');
  t.is(plural(1, 'event'), '1 event');
  t.is(
    plural(12_001, 'request', 'requests', (n) => n.toLocaleString('en-US')),
    '12,001 requests',
  );
});

test('columns give way widest first, within the width; a cell wraps at a space or after a comma', (t) => {
  t.deepEqual(fitColumns([3, 20, 100], 200), [3, 20, 100], 'room enough: unchanged');
  t.deepEqual(fitColumns([3, 20, 100], 60), [3, 20, 37]);
  t.deepEqual(fitColumns([3, 50, 100], 60), [3, 29, 28]);
  t.deepEqual(fitColumns([3, 50, 100], 10), [3, 8, 8], 'no narrower than 8, or its own width');
  t.deepEqual(wrapCell('status: "pending" → "verification"', 20), ['status: "pending" →', '"verification"']);
  t.deepEqual(wrapCell('{"a":1,"bb":22,"ccc":333}', 10), ['{"a":1,', '"bb":22,', '"ccc":333}']);
  t.deepEqual(wrapCell('0123456789abcdef', 6), ['012345', '6789ab', 'cdef']);
  t.deepEqual(wrapCell('short', 6), ['short']);
});

test('pds webhooks test-send prints a receiver’s terminal escapes inert, as a table and as JSON', async (t) => {
  const s = await startService(t);
  await seedCatalog(s);
  const receiver = await startReceiver(t);
  receiver.setDefault({ status: 200, headers: { 'content-type': 'text/plain' }, body: HOSTILE });
  const hook = await createWebhook(s, receiver.url, [1]);

  const asTable = await pds(s, ['webhooks', 'test-send', hook.id]);
  t.is(asTable.code, 0, asTable.stderr);
  t.false(CONTROL.test(asTable.stdout), JSON.stringify(asTable.stdout));
  t.regex(asTable.stdout, /^response_excerpt\s+\\u001b]0;owned\\u0007 \\u001b\[2J/m);
  t.true(asTable.stdout.includes('\\u001b]52;c;cm0gLXJmIH4=\\u0007'), 'OSC 52 shown, not run');
  t.true(asTable.stdout.includes('\\u009b31m'), 'the C1 CSI shown, not run');

  const asJson = await pds(s, ['webhooks', 'test-send', hook.id, '--json']);
  t.is(asJson.code, 0, asJson.stderr);
  t.false(CONTROL.test(asJson.stdout), JSON.stringify(asJson.stdout));
  t.is(JSON.parse(asJson.stdout).result.response_excerpt, HOSTILE, 'the JSON still says what was answered');

  // Not delivered: the error line on stderr is printable too, whatever the receiver answered.
  const down = await startReceiver(t);
  down.setDefault({ status: 500, body: HOSTILE });
  const downHook = await createWebhook(s, down.url, [1]);
  const refused = await pds(s, ['webhooks', 'test-send', downHook.id]);
  t.is(refused.code, EXIT.failed);
  t.false(CONTROL.test(refused.stdout + refused.stderr), JSON.stringify(refused));
  t.true(refused.stdout.includes('\\u009d0;title\\u009c'));
});
