/**
 * A peer that accepts TCP connections and never answers, closed after the test: a client's call to it
 * waits for a handshake that never comes, as with a server that hangs or a network that drops packets.
 */
import net from 'node:net';
import type { ExecutionContext } from 'ava';

/** Listens on loopback; resolves with its port. */
export async function silentPeer(t: ExecutionContext): Promise<number> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    for (const socket of sockets) socket.destroy();
    server.close();
  });
  return (server.address() as net.AddressInfo).port;
}
