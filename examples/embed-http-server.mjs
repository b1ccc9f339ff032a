// kvroute inside your own Node http server.
//
//   npm ci && node examples/embed-http-server.mjs                 # two simulated engines
//   node examples/embed-http-server.mjs http://h1:8000,http://h2:8000
//
// Your app keeps its routes; the OpenAI routes (/v1/chat/completions, /v1/completions,
// /v1/models, /health, /ready) go through the cache-aware router. PORT picks the port (0: free).
// In your project, import from 'kvroute/proxy' and 'kvroute/sim' instead of '../dist/entries/*.js'.
import { createServer } from 'node:http';

import { createProxy } from '../dist/entries/proxy.js';
import { startSimFleet } from '../dist/entries/sim.js';

const given = process.argv[2]?.split(',').filter(Boolean);
const fleet = given === undefined ? await startSimFleet({ instances: 2, port: 0 }) : undefined;
const backends = given ?? /** @type {NonNullable<typeof fleet>} */ (fleet).urls;
const proxy = createProxy({ backends, policy: 'unified' });
// The backends' first health checks (and model discovery): until they pass, requests get 503.
await proxy.started();

const server = createServer((req, res) => {
  if (req.url === '/') {
    res.setHeader('content-type', 'text/plain');
    res.end('my app: POST /v1/chat/completions to be routed\n');
    return;
  }
  proxy.handleNode(req, res);
});

server.listen(Number(process.env.PORT ?? 3000), '127.0.0.1', () => {
  const { port } = /** @type {import('node:net').AddressInfo} */ (server.address());
  console.log(`listening on http://127.0.0.1:${port}`);
  console.error(`try: curl -s http://127.0.0.1:${port}/v1/chat/completions -H 'content-type: application/json' \\
  -d '{"model": "qwen3-coder-30b-a3b", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8}' -i`);
});

const stop = async () => {
  server.close();
  server.closeAllConnections();
  await proxy.close({ graceMs: 1_000 });
  await fleet?.close();
};
process.once('SIGINT', stop);
process.once('SIGTERM', stop);
