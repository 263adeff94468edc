/**
 * Who a projector is, as the read store's lease records it, and whether a holder named so is known to
 * be gone (docs/read-side.md, "One projector at a time").
 *
 * The name is `<host>:<boot id>:<pid namespace>:<pid>:<random>`. The boot id tells machines apart
 * where host names repeat: the initial pid namespace has the same number on every Linux host, so two
 * machines of one host name would otherwise each take the other's pids for their own. The random part
 * tells apart two containers that share a pid. A projector thread started again after its last one
 * ended takes its name over, and so takes the lease back at once. A holder on this machine, since
 * this boot, in this pid namespace, whose process no longer runs (a `kill -9`, a crash) is gone: a
 * projector standing by takes the lease over from it at once instead of waiting for the lease to run
 * out. A process that still runs (or a pid used again, or one that cannot be told: a name of another
 * form, a machine whose boot id cannot be read) is never called gone: then the lease runs out first.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync, readlinkSync } from 'node:fs';
import { hostname } from 'node:os';

/** This process's pid namespace (`4026531836`), or `-` where the system cannot tell. */
function pidNamespace(): string {
  try {
    return /\[(\d+)\]/.exec(readlinkSync('/proc/self/ns/pid'))?.[1] ?? '-';
  } catch {
    return '-';
  }
}

/** This boot of this machine (Linux's random boot id, a UUID), or `-` where the system cannot tell. */
function bootId(): string {
  try {
    const id = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    return /^[0-9a-f-]+$/i.test(id) ? id : '-';
  } catch {
    return '-';
  }
}

export function newLeaseOwner(): string {
  return `${hostname()}:${bootId()}:${pidNamespace()}:${process.pid}:${randomBytes(4).toString('hex')}`;
}

/** Whether `holder` (a name from `newLeaseOwner`) is a process of this machine that no longer runs. */
export function holderGone(holder: string): boolean {
  const parts = holder.split(':');
  // Names of another form (those of before the boot id had four parts) cannot be told: never gone.
  if (parts.length !== 5) return false;
  const [host, boot, namespace, pidText] = parts;
  const pid = Number(pidText);
  const here = bootId();
  if (here === '-' || boot !== here || host !== hostname() || namespace !== pidNamespace()) return false;
  if (!Number.isSafeInteger(pid) || pid <= 0 || pid === process.pid) return false;
  try {
    process.kill(pid, 0); // signal 0: only asks whether the process exists
    return false;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ESRCH';
  }
}
