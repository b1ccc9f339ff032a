// @ts-check
// The command line every workload file shares: `node bench/X.mjs [--quick]
// [--out FILE]`. The workload prints its lines and writes its results as JSON
// to --out for bench/run.mjs to collect.
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

import { nativePath } from '../../dist/index.js';

/**
 * @param {string} name
 * @param {(options: { quick: boolean, native: boolean }) => unknown[] | Promise<unknown[]>} run
 */
export async function workloadMain(name, run) {
  const { values } = parseArgs({ options: { quick: { type: 'boolean' }, out: { type: 'string' } } });
  const native = nativePath() !== null;
  const started = Date.now();
  const results = await run({ quick: values.quick === true, native });
  console.log(`  ${name}: done in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  if (values.out) writeFileSync(values.out, JSON.stringify(results));
}
