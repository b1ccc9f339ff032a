/**
 * The haproxy test helper (test/helpers/haproxy.ts): round robin request by request over its
 * servers, a dead server taken out by the health check with no request lost (redispatch), and
 * stopped by pid. Skipped, saying so, when haproxy is absent.
 */
import { createServer, type Server } from 'node:http';

import { describe, expect, it } from 'vitest';

import { HAPROXY_SKIP_REASON, haproxyPath, startHaproxy } from './helpers/haproxy.js';

const binary = haproxyPath();
if (binary === undefined) console.warn(`test/haproxy-helper.test.ts: ${HAPROXY_SKIP_REASON}`);

async function namedServer(name: string): Promise<{ server: Server; address: string }> {
  const server = createServer((req, res) => res.end(req.url === '/health' ? 'ok' : name));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  return { server, address: `127.0.0.1:${typeof address === 'object' && address !== null ? address.port : 0}` };
}

describe.skipIf(binary === undefined)('the haproxy test helper', () => {
  it('balances request by request, routes around a dead server, and stops by pid', async () => {
    const a = await namedServer('a');
    const b = await namedServer('b');
    const proxy = await startHaproxy([a.address, b.address]);
    try {
      const names: string[] = [];
      for (let k = 0; k < 6; k += 1) names.push(await (await fetch(`${proxy.url}/who`)).text());
      expect(names.filter((n) => n === 'a')).toHaveLength(3);
      expect(names.filter((n) => n === 'b')).toHaveLength(3);
      a.server.closeAllConnections();
      await new Promise<void>((resolve) => a.server.close(() => resolve()));
      for (let k = 0; k < 6; k += 1) expect(await (await fetch(`${proxy.url}/who`)).text()).toBe('b');
    } finally {
      await proxy.stop();
      b.server.closeAllConnections();
      b.server.close();
    }
    expect(() => process.kill(proxy.pid, 0)).toThrow();
  });
});
