/**
 * The exclusive-port check for `kvroute serve --threads N`, whose threads share the port with
 * SO_REUSEPORT. A single-threaded serve binds without SO_REUSEPORT, so the kernel refuses any
 * second listener on its port (EADDRINUSE). Sockets that all set SO_REUSEPORT (and belong to one
 * user) may share a port, so two threaded serves on one port would both start and the kernel
 * would split connections between them. The main thread therefore claims the port before any
 * thread binds:
 *
 * 1. A lock, held until release(): an abstract Unix socket named for host and port (Linux; the
 *    kernel frees it when the process dies, so a killed serve leaves nothing stale). A second
 *    threaded serve on the same host and port fails to bind it: EADDRINUSE.
 * 2. A probe: an exclusive bind of host:port, closed at once. It fails while anything listens
 *    there, a threaded serve's reuseport sockets included, or a listener on an overlapping
 *    address (0.0.0.0 against 127.0.0.1).
 *
 * Both fail with EADDRINUSE, which the caller reports as a single-threaded serve does (same
 * message, exit 2). What stays open: two threaded serves starting in the same instant on
 * overlapping but different addresses (0.0.0.0:P and 127.0.0.1:P) hold different locks and may
 * both pass the probe. Off Linux (no abstract sockets) only the probe runs.
 */
import { createServer, type Server } from 'node:net';

/** The claim of a port: release() once the process stops serving it. */
export interface PortClaim {
  release(): Promise<void>;
}

/** The abstract socket's name: `\0` puts it in Linux's abstract namespace (no file). */
function lockName(host: string, port: number): string {
  return `\0kvroute-serve-port/${host}/${port}`;
}

/** Binds a net server; rejects with the bind's error (its errno in `code`). */
function bind(server: Server, options: Parameters<Server['listen']>[0]): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(options, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => server.close(() => resolve()));
}

/**
 * Claims host:port for this process (port > 0). Rejects with the errno error of the lock or the
 * probe (`code` EADDRINUSE when the port is taken), to be described as a failed listen.
 */
export async function claimPort(host: string, port: number): Promise<PortClaim> {
  const lock = process.platform === 'linux' ? createServer() : undefined;
  if (lock !== undefined) {
    // An abstract socket says EADDRINUSE when held, as a taken TCP port does.
    await bind(lock, { path: lockName(host, port) });
    lock.unref();
  }
  const probe = createServer();
  try {
    await bind(probe, { host, port, exclusive: true });
  } catch (error) {
    if (lock !== undefined) await closeServer(lock);
    throw error;
  }
  await closeServer(probe);
  let released: Promise<void> | undefined;
  return { release: () => (released ??= lock === undefined ? Promise.resolve() : closeServer(lock)) };
}
