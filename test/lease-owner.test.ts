/** Who a projector is in the read store's lease, and when a holder is known to have ended (cli/lease-owner.ts). */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import test from 'ava';
import { holderGone, newLeaseOwner } from '../cli/lease-owner.ts';

test('a holder is gone only when it is a process of this machine, boot and pid namespace that no longer runs', async (t) => {
  const mine = newLeaseOwner();
  const [host, boot, namespace, pid, random] = mine.split(':');
  t.is(host, hostname());
  t.is(boot, readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim());
  t.is(Number(pid), process.pid);
  t.regex(random, /^[0-9a-f]{8}$/);
  t.not(newLeaseOwner(), mine, 'two projectors of one process are two holders');
  t.false(holderGone(mine), 'this process runs');

  const child = spawn(process.execPath, ['-e', '']);
  await once(child, 'exit');
  const name = (parts: { host?: string; boot?: string; namespace?: string; pid?: unknown }) =>
    [
      parts.host ?? host,
      parts.boot ?? boot,
      parts.namespace ?? namespace,
      parts.pid ?? child.pid,
      'abcd0123',
    ].join(':');
  t.true(holderGone(name({})), 'a process that ended');
  t.false(holderGone(name({ host: `${host}-elsewhere` })), 'another machine');
  // Another machine of the same host name: its initial pid namespace has the same number as ours.
  t.false(holderGone(name({ boot: '00000000-0000-4000-8000-000000000000' })), 'another machine or boot');
  t.false(holderGone(name({ namespace: `${namespace}0` })), 'another pid namespace');
  t.false(holderGone(name({ pid: 1 })), 'a process that runs');
  t.false(holderGone([host, namespace, child.pid, 'abcd0123'].join(':')), 'an older name (four parts)');
  for (const bad of ['crashed', '', name({ pid: 'x' }), name({ pid: -5 }), name({ boot: '-' })]) {
    t.false(holderGone(bad), `not a name it can tell: ${JSON.stringify(bad)}`);
  }
});
