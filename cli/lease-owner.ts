/**
 * Who a projector is, as the read store's lease records it: the machine, the process and a random
 * part (two containers can share a pid). A projector thread started again after its last one ended
 * takes the name over, so it takes the lease back at once instead of standing by until it runs out
 * (docs/read-side.md, "One projector at a time").
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';

export function newLeaseOwner(): string {
  return `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
}
