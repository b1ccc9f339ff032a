#!/usr/bin/env node
// Writes the flow-control demo trace of docs/flow-control.md: sessionless requests of 2,048 fresh
// tokens (no prefix shared) and 64 output tokens, per tenant in Poisson arrivals at its own rate
// for a minute (seeded: the same arguments write the same trace). Needs the build (npm ci).
//   node scripts/flow-demo-trace.mjs OUT.jsonl [TENANT=RATE[:CLASS][@TOKENS] ...]
// TOKENS: the tenant's prompt length (a multiple of 16; default 2048).
// Default tenants: noisy=20 q1=2 q2=2 q3=2 (req/s; the noisy one sends 10x each quiet one).
import { writeFileSync } from 'node:fs';

import { SynthRandom } from '../dist/trace/synth-random.js';

const [out, ...specs] = process.argv.slice(2);
if (out === undefined) {
  console.error('usage: node scripts/flow-demo-trace.mjs OUT.jsonl [TENANT=RATE[:CLASS] ...]');
  process.exit(2);
}
const tenants = (specs.length > 0 ? specs : ['noisy=20', 'q1=2', 'q2=2', 'q3=2']).map((spec) => {
  const match = /^([A-Za-z0-9_.-]+)=(\d+(?:\.\d+)?)(?::([A-Za-z0-9_.-]+))?(?:@(\d+))?$/.exec(spec);
  const tokens = Number(match?.[4] ?? 2048);
  if (match === null || tokens < 16 || tokens % 16 !== 0) {
    console.error(`bad tenant ${JSON.stringify(spec)}: expected TENANT=RATE[:CLASS][@TOKENS], TOKENS a multiple of 16`);
    process.exit(2);
  }
  return { tenant: match[1], rate: Number(match[2]), priority: match[3], tokens };
});
const lines = [];
let id = 1;
for (const [index, { tenant, rate, priority, tokens }] of tenants.entries()) {
  const random = new SynthRandom(1 + index);
  let at = -Math.log(1 - random.next()) / rate;
  for (let k = 0; at < 60; k++, at += -Math.log(1 - random.next()) / rate) {
    const hashIds = Array.from({ length: tokens / 16 }, () => id++);
    lines.push({
      session_id: `${tenant}-${k}`,
      turn: 1,
      tenant,
      ...(priority === undefined ? {} : { priority }),
      timestamp: Math.round(at * 1e6) / 1e6,
      input_length: tokens,
      output_length: 64,
      block_size: 16,
      hash_ids: hashIds,
    });
  }
}
lines.sort((a, b) => a.timestamp - b.timestamp || a.session_id.localeCompare(b.session_id));
writeFileSync(out, `${lines.map((line) => JSON.stringify(line)).join('\n')}\n`);
console.log(`wrote ${lines.length} requests of ${tenants.length} tenants to ${out}`);
