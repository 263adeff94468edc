/** Who a projector is in the read store's lease, and when a holder is known to have ended (cli/lease-owner.ts). */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { hostname } from 'node:os';
import test from 'ava';
import { holderGone, newLeaseOwner } from '../cli/lease-owner.ts';

test('a holder is gone only when it is a process of this machine and pid namespace that no longer runs', async (t) => {
  const mine = newLeaseOwner();
  const [host, namespace, pid, random] = mine.split(':');
  t.is(host, hostname());
  t.is(Number(pid), process.pid);
  t.regex(random, /^[0-9a-f]{8}$/);
  t.not(newLeaseOwner(), mine, 'two projectors of one process are two holders');
  t.false(holderGone(mine), 'this process runs');

  const child = spawn(process.execPath, ['-e', '']);
  await once(child, 'exit');
  const dead = [host, namespace, child.pid, 'abcd0123'].join(':');
  t.true(holderGone(dead), 'a process that ended');
  t.false(holderGone([`${host}-elsewhere`, namespace, child.pid, 'abcd0123'].join(':')), 'another machine');
  t.false(holderGone([host, `${namespace}0`, child.pid, 'abcd0123'].join(':')), 'another pid namespace');
  t.false(holderGone([host, namespace, 1, 'abcd0123'].join(':')), 'a process that runs');
  for (const name of ['crashed', '', `${host}:${namespace}:x:abcd0123`, `${host}:${namespace}:-5:abcd0123`]) {
    t.false(holderGone(name), `not a name it can tell: ${JSON.stringify(name)}`);
  }
});
