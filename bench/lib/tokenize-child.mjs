// @ts-check
// One leg of the tokenize workload, in its own process so its memory is its own:
//   node tokenize-child.mjs library NAME [--quick]   load + encode 1k/20k/200k tokens, corpus digest
//   node tokenize-child.mjs session [--quick]        a 100k-token session's next turn: full vs reuse,
//                                                     in-thread and through the TokenizerPool
// Prints one JSON object.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { bundledTokenizerDir, loadTokenizer, TokenizerPool } from '../../dist/entries/tokenize.js';
import { corpus, rng, session, variedText } from './tokenize-corpus.mjs';

const [mode, name] = process.argv.slice(2);
const quick = process.argv.includes('--quick');
const dir = bundledTokenizerDir('qwen3');

/** @param {number[]} xs */
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;

/** @param {() => unknown} fn @param {number} runs */
async function timeMs(fn, runs) {
  await fn(); // warm
  const samples = [];
  for (let k = 0; k < runs; k += 1) {
    const t0 = performance.now();
    await fn();
    samples.push(performance.now() - t0);
  }
  return median(samples);
}

/** @returns {Promise<{ encode: (text: string) => Promise<ArrayLike<number>>, loopMs: (text: string) => Promise<number> }>} */
async function loadLibrary() {
  if (name === '@huggingface/tokenizers') {
    const { Tokenizer } = await import('@huggingface/tokenizers');
    const tok = new Tokenizer(
      JSON.parse(readFileSync(join(dir, 'tokenizer.json'), 'utf8')),
      JSON.parse(readFileSync(join(dir, 'tokenizer_config.json'), 'utf8')),
    );
    const encode = async (/** @type {string} */ text) => tok.encode(text, { add_special_tokens: false }).ids;
    // Synchronous: the whole encode holds the calling thread.
    const loopMs = async (/** @type {string} */ text) => timeMs(() => encode(text), 1);
    return { encode, loopMs };
  }
  if (name === '@anush008/tokenizers') {
    const { Tokenizer } = await import('@anush008/tokenizers');
    const tok = Tokenizer.fromFile(join(dir, 'tokenizer.json'));
    const encode = async (/** @type {string} */ text) =>
      (await tok.encode(text, null, { addSpecialTokens: false })).getIds();
    // Asynchronous (libuv's thread pool), but the call and the ids' conversion to a JS array
    // run on the calling thread.
    const loopMs = async (/** @type {string} */ text) => {
      const t0 = performance.now();
      const pending = tok.encode(text, null, { addSpecialTokens: false });
      const call = performance.now() - t0;
      const encoding = await pending;
      const t1 = performance.now();
      encoding.getIds();
      return call + (performance.now() - t1);
    };
    return { encode, loopMs };
  }
  throw new Error(`unknown library ${name}`);
}

async function library() {
  const rss0 = process.memoryUsage().rss;
  const t0 = performance.now();
  const { encode, loopMs } = await loadLibrary();
  const loadMs = performance.now() - t0;
  globalThis.gc?.();
  const loadRss = process.memoryUsage().rss - rss0;
  const base = variedText(rng(7), 800_000);
  const sample = (await encode(base.slice(0, 200_000))).length;
  const charsPerToken = 200_000 / sample;
  const sizes = [];
  for (const target of quick ? [1000, 20000] : [1000, 20000, 200000]) {
    const text = base.slice(0, Math.round(target * charsPerToken));
    const tokens = (await encode(text)).length;
    const ms = await timeMs(() => encode(text), target >= 200000 ? 3 : 7);
    sizes.push({ tokens, ms });
  }
  // Calling-thread time of the largest encode (median of 3).
  const big = base.slice(0, Math.round((quick ? 20000 : 200000) * charsPerToken));
  const loop = median([await loopMs(big), await loopMs(big), await loopMs(big)]);
  const digest = createHash('sha256');
  let corpusTokens = 0;
  for (const text of corpus()) {
    const ids = Uint32Array.from(await encode(text));
    corpusTokens += ids.length;
    digest.update(new Uint8Array(ids.buffer));
  }
  return {
    library: name,
    load_ms: loadMs,
    load_rss_mib: loadRss / 2 ** 20,
    peak_rss_mib: process.resourceUsage().maxRSS / 1024,
    sizes,
    loop_ms: loop,
    corpus_texts: 300,
    corpus_tokens: corpusTokens,
    corpus_digest: digest.digest('hex'),
  };
}

async function sessionLeg() {
  const targetTokens = quick ? 20000 : 100000;
  const messages = session(targetTokens);
  const next = [
    ...messages,
    { role: 'assistant', content: 'Running them now.' },
    { role: 'user', content: 'And lint.' },
  ];
  const tok = loadTokenizer(dir);
  const first = tok.tokenizeChat(messages, undefined);
  const runs = quick ? 3 : 7;
  const renderMs = await timeMs(() => tok.renderChat(next), runs);
  const fullMs = await timeMs(() => tok.tokenizeChat(next, undefined), runs);
  const reuseMs = await timeMs(() => tok.tokenizeChat(next, undefined, first.encoded), runs);
  const reused = tok.tokenizeChat(next, undefined, first.encoded);
  const full = tok.tokenizeChat(next, undefined);
  const exact =
    reused.encoded.tokens.length === full.encoded.tokens.length &&
    reused.encoded.tokens.every((v, i) => v === full.encoded.tokens[i]);
  const pool = await TokenizerPool.open({ tokenizers: { m: dir }, threads: 1 });
  try {
    const poolFullMs = await timeMs(() => pool.tokenizeChat('m', next), runs);
    // Each timed call is a next turn after `messages`: the session entry is reset to that turn first.
    const poolReuseMs = await (async () => {
      const samples = [];
      for (let k = 0; k <= runs; k += 1) {
        pool.forgetSession('m', 's');
        await pool.tokenizeChat('m', messages, undefined, 's');
        const t0 = performance.now();
        await pool.tokenizeChat('m', next, undefined, 's');
        if (k > 0) samples.push(performance.now() - t0);
      }
      return median(samples);
    })();
    return {
      session_tokens: first.encoded.tokens.length,
      next_tokens: full.encoded.tokens.length,
      reused_tokens: reused.reusedTokens,
      exact,
      render_ms: renderMs,
      full_ms: fullMs,
      reuse_ms: reuseMs,
      pool_full_ms: poolFullMs,
      pool_reuse_ms: poolReuseMs,
    };
  } finally {
    await pool.close();
  }
}

const result = mode === 'library' ? await library() : await sessionLeg();
process.stdout.write(JSON.stringify(result));
