// @ts-check
/**
 * What one request body costs the proxy's event loop before anything is sent upstream, by body
 * size: `parseRequest()` (JSON.parse and the routing inputs) and the router call (hashing the
 * prompt into block ids, then the decision), in-process on dist/, no I/O. Agentic prompts run to
 * hundreds of kB, and this work runs on the one event loop that also relays every open stream,
 * so it is time those streams wait.
 *
 *   node bench/proxy-body-size.mjs          (needs `npm run build`)
 *
 * A diagnostic, not a workload of `npm run bench`: it prints and records nothing. Chat requests
 * without `hash_ids`, one long user message of code-like lines (escaped newlines, as agents send),
 * 16 sessions, policy unified over 4 instances; the median of the timed repetitions after a
 * warm-up quarter.
 */
import { Router } from '../dist/index.js';
import { parseRequest } from '../dist/proxy/request-inputs.js';

import { machineInfo, printMachine } from './lib/machine.mjs';

const SIZES_KB = [2, 50, 200, 800];
const LINE = 'def handler(request):\n    return compute(request.body)  # agentic context line\n';

/** @param {number[]} xs */
const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1] ?? NaN;

printMachine(machineInfo());
const router = new Router({ instances: ['a', 'b', 'c', 'd'], policy: 'unified' });
for (const kb of SIZES_KB) {
  const text = LINE.repeat(Math.ceil((kb * 1024) / LINE.length));
  const body = Buffer.from(
    JSON.stringify({
      model: 'm',
      messages: [
        { role: 'system', content: 'You are a coding agent.' },
        { role: 'user', content: text },
      ],
      stream: true,
    }),
  );
  const reps = Math.max(20, Math.floor(4000 / kb));
  /** @type {number[]} */
  const parse = [];
  /** @type {number[]} */
  const route = [];
  for (let i = 0; i < reps; i++) {
    const t0 = performance.now();
    const parsed = parseRequest('chat', body, `session-${i % 16}`, false);
    const t1 = performance.now();
    router.complete(router.route(parsed.route));
    const t2 = performance.now();
    if (i < reps / 4) continue; // warm-up
    parse.push((t1 - t0) * 1000);
    route.push((t2 - t1) * 1000);
  }
  const p = median(parse);
  const r = median(route);
  console.log(
    `  ${(body.length / 1024).toFixed(0).padStart(5)} KiB body: parse ${p.toFixed(0).padStart(5)} µs` +
      `  route (hash the prompt, decide) ${r.toFixed(0).padStart(5)} µs  together ${((p + r) / 1000).toFixed(2)} ms`,
  );
}
