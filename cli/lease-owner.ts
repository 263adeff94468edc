/**
 * Who a projector is, as the read store's lease records it, and whether a holder named so is known to
 * be gone (docs/read-side.md, "One projector at a time").
 *
 * The name is `<host>:<pid namespace>:<pid>:<random>`: the random part tells apart two containers that
 * share a pid. A projector thread started again after its last one ended takes its name over, and so
 * takes the lease back at once. A holder on this machine, in this pid namespace, whose process no
 * longer runs (a `kill -9`, a crash) is gone: a projector standing by takes the lease over from it at
 * once instead of waiting for the lease to run out. A process that still runs (or a pid used again,
 * or one that cannot be told) is never called gone: then the lease runs out first.
 */
import { randomBytes } from 'node:crypto';
import { readlinkSync } from 'node:fs';
import { hostname } from 'node:os';

/** This process's pid namespace (`4026531836`), or `-` where the system cannot tell. */
function pidNamespace(): string {
  try {
    return /\[(\d+)\]/.exec(readlinkSync('/proc/self/ns/pid'))?.[1] ?? '-';
  } catch {
    return '-';
  }
}

export function newLeaseOwner(): string {
  return `${hostname()}:${pidNamespace()}:${process.pid}:${randomBytes(4).toString('hex')}`;
}

/** Whether `holder` (a name from `newLeaseOwner`) is a process of this machine that no longer runs. */
export function holderGone(holder: string): boolean {
  const parts = holder.split(':');
  if (parts.length !== 4) return false;
  const [host, namespace, pidText] = parts;
  const pid = Number(pidText);
  if (host !== hostname() || namespace !== pidNamespace() || !Number.isSafeInteger(pid) || pid <= 0) {
    return false;
  }
  if (pid === process.pid) return false;
  try {
    process.kill(pid, 0); // signal 0: only asks whether the process exists
    return false;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ESRCH';
  }
}
