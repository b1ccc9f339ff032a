/**
 * `kvroute serve --threads N` takes its port as exclusively as a single-threaded serve
 * (threads/port-claim.ts): its threads share the port with SO_REUSEPORT, which a second threaded
 * serve could otherwise join, the kernel then splitting connections between the two processes.
 * Every pairing of a threaded and a single-threaded serve on one port: the second fails at once
 * with the same message and exit code (2), and the first keeps serving.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startStub, type StubUpstream } from './helpers/proxy-harness.js';
import { serveFailure, startServe, type ServeChild } from './helpers/proxy-serve-child.js';

let upstream: StubUpstream;
beforeAll(async () => {
  upstream = await startStub((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
});
afterAll(async () => {
  await upstream?.close();
});

const inUse = (port: string) =>
  `address in use: 127.0.0.1:${port} is taken by another process (another kvroute serve?)`;

const THREADS = ['--threads', '2'];

describe.each([
  { first: 'a serve with --threads 2', firstArgs: THREADS, seconds: [THREADS, [], ['--http', 'node']] },
  // Single against single: proxy-http.test.ts.
  { first: 'a single-threaded serve', firstArgs: [], seconds: [THREADS] },
])('$first on the port', ({ firstArgs, seconds }) => {
  let first: ServeChild;
  let port: string;
  beforeAll(async () => {
    first = await startServe(['--port', '0', '--backends', upstream.url, ...firstArgs]);
    port = new URL(first.base).port;
  });
  afterAll(async () => {
    expect(await first?.stop()).toBe(0);
  });

  it.each(seconds.map((args) => [args.join(' ') || 'one thread', args] as const))(
    'a second serve with %s fails with "address in use", exit 2',
    async (_name, args) => {
      const second = await serveFailure(['--port', port, '--backends', upstream.url, ...args]);
      expect(second.code, second.stderr).toBe(2);
      expect(second.stderr).toContain(inUse(port));
      // The first still serves every connection.
      for (let i = 0; i < 4; i++) {
        const health = await fetch(`${first.base}/health`, { headers: { connection: 'close' } });
        expect(health.status).toBe(200);
      }
    },
  );
});
