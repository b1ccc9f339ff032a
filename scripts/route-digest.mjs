// Prints which addon build routed, and a digest of every decision it made on a
// fixed generated workload (scripts/check-gyp-parity.mjs compares builds).
import { createHash } from 'node:crypto';

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
console.log(JSON.stringify({ addon: nativePath(), digest: digest.digest('hex') }));
