// Prints which addon build routed, and a digest of every decision it made on a
// fixed generated workload, and of the request scanner's answers on fixed
// generated bodies (scripts/check-gyp-parity.mjs compares builds).
import { createHash } from 'node:crypto';

import { scanBody } from '../dist/core/request-scanner.js';
import { nativePath, POLICY_NAMES, Router } from '../dist/index.js';

const digest = createHash('sha256');
for (const policy of POLICY_NAMES) {
  const router = new Router({ instances: 6, policy, capacityBlocks: 300, clock: 'manual' });
  let state = 12345;
  const rand = (/** @type {number} */ n) => {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    return state % n;
  };
  const sessions = Array.from({ length: 12 }, (_, k) => Array.from({ length: 20 + k * 7 }, (_, i) => k * 10_000 + i));
  /** @type {number[]} */
  const open = [];
  for (let step = 0; step < 3000; step += 1) {
    const k = rand(sessions.length);
    const ids = /** @type {number[]} */ (sessions[k]);
    ids.splice(ids.length - 1, 1, ...Array.from({ length: 1 + rand(30) }, () => 1_000_000 + step * 100 + rand(100)));
    open.push(router.route({ hashIds: ids, session: `s${k}` }));
    digest.update(`${router.decision.index}:${router.decision.reason};`);
    if (open.length > 20) router.complete(/** @type {number} */ (open.shift()));
  }
  digest.update(JSON.stringify(router.stats().instances.map((s) => [s.blocks, s.segments, s.routed])));
}
// The scanner: chat and completions bodies with numbers, escapes and parts, some malformed.
let seed = 777;
const next = (/** @type {number} */ n) => {
  seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
  return seed % n;
};
const values = [
  '"x\\u00e9\\n😀"',
  '1e21',
  '-0',
  '0.1',
  '5e-324',
  '[1,{"2":1,"1":2}]',
  'null',
  '{"type":"text","text":"t"}',
];
for (let k = 0; k < 400; k++) {
  const parts = Array.from({ length: next(5) }, () => values[next(values.length)]).join(',');
  const body =
    k % 2 === 0
      ? `{"model":"m","messages":[{"role":"user","content":[${parts}],"tool_calls":[${parts}]}],"stream":true}`
      : `{"model":"m","prompt":[${parts}],"user":"u${k}"${k % 3 === 0 ? ',"hash_ids":[1,2]' : ''}}`;
  const bytes = Buffer.from(k % 7 === 0 ? body.slice(0, next(body.length)) : body);
  const r = scanBody(k % 2 === 0 ? 'chat' : 'completions', bytes, 1 + next(200), true);
  digest.update(
    JSON.stringify(r, (_key, v) =>
      typeof v === 'bigint'
        ? String(v)
        : ArrayBuffer.isView(v)
          ? Array.from(/** @type {Float64Array} */ (v), String)
          : v,
    ),
  );
}
console.log(JSON.stringify({ addon: nativePath(), digest: digest.digest('hex') }));
