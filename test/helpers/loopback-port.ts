/**
 * Loopback ports for servers a test starts as child processes (nats-server, haproxy): a free
 * port, and waiting until the child accepts connections on it.
 *
 * Hazard: a port freePort() returns is free only when it returns; another process may take it
 * before the child binds it. The child then fails to listen, and waitListening() says so.
 */
import type { ChildProcess } from 'node:child_process';
import { createConnection, createServer } from 'node:net';

/** A TCP port on 127.0.0.1 that was free a moment ago. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** Resolves once something accepts TCP connections on the port; rejects after `timeoutMs` or when `child` exits. */
export async function waitListening(port: number, child: ChildProcess, name: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${name} exited with code ${child.exitCode} before listening`);
    const ok = await new Promise<boolean>((resolve) => {
      const socket = createConnection({ host: '127.0.0.1', port });
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`${name} did not listen on 127.0.0.1:${port} within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
