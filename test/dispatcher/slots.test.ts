/**
 * The delivery worker's request slots (dispatcher/slots.ts, docs/webhooks.md, "Scale"): a request
 * takes a slot of its subscription and of the worker's total, both or neither; a queue that finds none
 * waits in its subscription's ready list, and freed slots are handed out round-robin over the
 * subscriptions with a waiting queue and a slot of their own.
 */
import test from 'ava';
import { createInFlightBudget, createSlots } from '../../dispatcher/slots.ts';

/** Slots whose handed-out slots are noted as `<key>:<stream>`, in order. */
function slotsNoting(limits: { perKey: number; total: number }) {
  const started: string[] = [];
  const slots = createSlots(limits, (key, stream) => started.push(`${key}:${stream}`));
  return { slots, started };
}

test('a slot is taken of the subscription and of the total, both or neither', (t) => {
  const { slots } = slotsNoting({ perKey: 2, total: 3 });
  t.true(slots.tryAcquire('a'));
  t.true(slots.tryAcquire('a'));
  t.false(slots.tryAcquire('a'), 'the subscription’s two are taken');
  t.true(slots.tryAcquire('b'));
  t.false(slots.tryAcquire('c'), 'the total of three is taken, though c has slots of its own');
  t.is(slots.inFlight(), 3);
  slots.release('a');
  t.true(slots.tryAcquire('c'));
  t.false(slots.tryAcquire('a'));
  t.is(slots.inFlight(), 3);
});

test('a waiting queue costs a ready-list entry and is started when a slot frees, in the order it waited', (t) => {
  const { slots, started } = slotsNoting({ perKey: 1, total: 10 });
  t.true(slots.tryAcquire('a'));
  for (const stream of ['q1', 'q2', 'q3']) slots.wait('a', stream);
  slots.wait('a', 'q1'); // waiting already: keeps its place
  t.is(slots.waiting(), 3);
  t.deepEqual(started, []);
  slots.release('a');
  t.deepEqual(started, ['a:q1'], 'the freed slot goes to the first waiting queue, taken for it');
  t.is(slots.inFlight(), 1);
  t.is(slots.waiting(), 2);
  slots.forget('a', 'q2');
  t.false(slots.has('a', 'q2'));
  slots.release('a');
  t.deepEqual(started, ['a:q1', 'a:q3']);
  t.is(slots.waiting(), 0);
});

test('the total is handed out round-robin: a subscription with one due queue is served within one round of one with 500', (t) => {
  const { slots, started } = slotsNoting({ perKey: 8, total: 2 });
  t.true(slots.tryAcquire('busy'));
  t.true(slots.tryAcquire('busy'));
  for (let i = 0; i < 500; i++) slots.wait('busy', `b${i}`);
  slots.wait('lone', 'l0');
  t.is(slots.waiting(), 501);
  slots.release('busy');
  slots.release('busy');
  t.deepEqual(started, ['busy:b0', 'lone:l0'], 'one turn each, not the 500 first');
  for (let i = 0; i < 3; i++) slots.release(started[i].split(':')[0]);
  t.deepEqual(started.slice(2), ['busy:b1', 'busy:b2', 'busy:b3']);
});

test('a subscription whose receiver does not answer holds its own slots only; the others take the rest in turn', (t) => {
  const { slots, started } = slotsNoting({ perKey: 2, total: 4 });
  for (let i = 0; i < 10; i++) slots.wait('dead', `d${i}`);
  for (let i = 0; i < 10; i++) slots.wait('live', `l${i}`);
  t.deepEqual(started, ['dead:d0', 'dead:d1', 'live:l0', 'live:l1']);
  // The live receiver answers; the dead one never does: its two slots stay taken, the live one gets the other two.
  for (let i = 0; i < 8; i++) slots.release('live');
  t.is(started.filter((s) => s.startsWith('dead')).length, 2);
  t.deepEqual(started.slice(4), [
    'live:l2',
    'live:l3',
    'live:l4',
    'live:l5',
    'live:l6',
    'live:l7',
    'live:l8',
    'live:l9',
  ]);
  t.is(slots.inFlight(), 4);
});

test('a slot given to a queue that has nothing to send comes back at once and goes to the next one waiting', (t) => {
  const started: string[] = [];
  const slots = createSlots({ perKey: 4, total: 1 }, (key, stream) => {
    started.push(stream);
    if (stream === 'settled') slots.release(key); // its head was delivered by another dispatcher meanwhile
  });
  t.true(slots.tryAcquire('a'));
  slots.wait('a', 'settled');
  slots.wait('a', 'due');
  slots.release('a');
  t.deepEqual(started, ['settled', 'due']);
  t.is(slots.inFlight(), 1);
  t.is(slots.waiting(), 0);
});

test('once closed, nothing waits and nothing more is handed out', (t) => {
  const { slots, started } = slotsNoting({ perKey: 1, total: 1 });
  t.true(slots.tryAcquire('a'));
  slots.wait('a', 'q1');
  slots.close();
  t.is(slots.waiting(), 0);
  slots.release('a');
  slots.wait('a', 'q2');
  t.deepEqual(started, []);
  t.false(slots.tryAcquire('a'));
});

test('a release for a subscription that holds no slot changes nothing: the total is not lowered for the others', (t) => {
  const { slots, started } = slotsNoting({ perKey: 2, total: 2 });
  t.true(slots.tryAcquire('a'));
  t.true(slots.tryAcquire('b'));
  slots.wait('c', 'q1');
  slots.release('c'); // holds nothing
  slots.release('d'); // never seen
  t.is(slots.inFlight(), 2);
  t.false(slots.tryAcquire('c'), 'the total of two is still taken');
  t.deepEqual(started, [], 'no slot handed out that nobody gave back');
  slots.release('a');
  t.deepEqual(started, ['c:q1'], 'the slot a gave back');
  slots.release('a'); // a second time: a holds nothing now
  t.is(slots.inFlight(), 2, 'b’s and c’s slots still count');
  t.false(slots.tryAcquire('d'));
});

test('a start that throws gives back the slot it was handed; the other waiting queues get theirs and the error reaches the caller', (t) => {
  const started: string[] = [];
  const slots = createSlots({ perKey: 2, total: 1 }, (key, stream) => {
    if (stream === 'broken') throw new Error('cannot start');
    started.push(`${key}:${stream}`);
  });
  t.true(slots.tryAcquire('a'));
  slots.wait('a', 'broken');
  slots.wait('b', 'q1');
  t.throws(() => slots.release('a'), { message: 'cannot start' });
  t.deepEqual(started, ['b:q1'], 'the slot given back went to the next queue waiting');
  t.is(slots.inFlight(), 1, 'b’s slot only');
  t.is(slots.waiting(), 0, 'the queue that failed to start waits no more');
  slots.release('b');
  t.is(slots.inFlight(), 0);
  t.true(slots.tryAcquire('a'), 'a holds nothing');
});

test('workers sharing a budget have at most its total open together, and the slots freed go to the workers in turn', (t) => {
  const budget = createInFlightBudget(3);
  const started: string[] = [];
  const worker = (name: string) =>
    createSlots({ perKey: 8, total: budget }, (_key, stream) => started.push(`${name}:${stream}`));
  const a = worker('a');
  const b = worker('b');
  for (let i = 0; i < 3; i++) t.true(a.tryAcquire('x'));
  t.false(b.tryAcquire('y'), 'the total is taken, by the other worker');
  for (const stream of ['x0', 'x1', 'x2']) a.wait('x', stream);
  for (const stream of ['y0', 'y1']) b.wait('y', stream);
  t.deepEqual(started, []);
  for (let i = 0; i < 3; i++) a.release('x');
  t.deepEqual(started, ['a:x0', 'b:y0', 'a:x1'], 'the worker that freed them does not keep them all');
  t.is(budget.inFlight(), 3);
  t.is(a.inFlight() + b.inFlight(), 3);
  b.release('y');
  t.deepEqual(started.slice(3), ['b:y1']);
  // A worker that stops leaves the budget; the slots it still held come back to the others.
  b.close();
  b.release('y');
  t.deepEqual(started.slice(4), ['a:x2']);
  t.is(budget.inFlight(), 3);
});
