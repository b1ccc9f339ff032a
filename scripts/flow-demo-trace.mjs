#!/usr/bin/env node
// @ts-check
// Writes the flow-control demo trace of docs/flow-control.md: sessionless requests of 2,048 fresh
// tokens (no prefix shared) and 64 output tokens, per tenant in Poisson arrivals at its own rate
// for a minute (seeded: the same arguments write the same trace). Needs the build (npm ci).
//   node scripts/flow-demo-trace.mjs OUT.jsonl [TENANT=RATE[:CLASS][@TOKENS] ...]
// TOKENS: the tenant's prompt length (a multiple of 16; default 2048).
// Default tenants: noisy=20 q1=2 q2=2 q3=2 (req/s; the noisy one sends 10x each quiet one).
// bench/flow-targets.mjs imports demoTraceLines() to measure the targets on the same traces.
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import { SynthRandom } from '../dist/trace/synth-random.js';

const SPEC = /^([A-Za-z0-9_.-]+)=(\d+(?:\.\d+)?)(?::([A-Za-z0-9_.-]+))?(?:@(\d+))?$/;

/**
 * The trace's lines (Mooncake-format objects, by timestamp) for `specs` (TENANT=RATE[:CLASS][@TOKENS]).
 * @param {readonly string[]} specs
 * @param {number} [seconds]
 * @returns {Array<Record<string, unknown>>}
 */
export function demoTraceLines(specs, seconds = 60) {
  const tenants = specs.map((spec) => {
    const match = SPEC.exec(spec);
    const tokens = Number(match?.[4] ?? 2048);
    if (match === null || tokens < 16 || tokens % 16 !== 0)
      throw new RangeError(
        `bad tenant ${JSON.stringify(spec)}: expected TENANT=RATE[:CLASS][@TOKENS], TOKENS a multiple of 16`,
      );
    return { tenant: /** @type {string} */ (match[1]), rate: Number(match[2]), priority: match[3], tokens };
  });
  /** @type {Array<{ session_id: string, timestamp: number } & Record<string, unknown>>} */
  const lines = [];
  let id = 1;
  for (const [index, { tenant, rate, priority, tokens }] of tenants.entries()) {
    const random = new SynthRandom(1 + index);
    let at = -Math.log(1 - random.next()) / rate;
    for (let k = 0; at < seconds; k++, at += -Math.log(1 - random.next()) / rate) {
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
  return lines.sort((a, b) => a.timestamp - b.timestamp || a.session_id.localeCompare(b.session_id));
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [out, ...specs] = process.argv.slice(2);
  if (out === undefined) {
    console.error('usage: node scripts/flow-demo-trace.mjs OUT.jsonl [TENANT=RATE[:CLASS][@TOKENS] ...]');
    process.exit(2);
  }
  try {
    const lines = demoTraceLines(specs.length > 0 ? specs : ['noisy=20', 'q1=2', 'q2=2', 'q3=2']);
    writeFileSync(out, `${lines.map((line) => JSON.stringify(line)).join('\n')}\n`);
    console.log(`wrote ${lines.length} requests of ${new Set(lines.map((l) => l.tenant)).size} tenants to ${out}`);
  } catch (error) {
    console.error(/** @type {Error} */ (error).message);
    process.exit(2);
  }
}
