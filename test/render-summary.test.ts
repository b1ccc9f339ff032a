/** renderSummary: scaled counts, IEC sizes, a unit on every table. */
import { describe, expect, it } from 'vitest';

import { renderSummary } from '../src/analysis/render-summary.js';
import type { TraceSummary } from '../src/analysis/trace-summary.js';

const GIB = 1024 ** 3;

/** A million-request trace's figures (made up, at the sizes a real one reaches). */
function bigSummary(): TraceSummary {
  const ceiling = { token_ratio: 0.651, block_ratio: 0.64, hit_requests: 445_600 };
  return {
    requests: 1_000_000,
    sessions: 123_456,
    input_tokens: 41_643_100_000,
    output_tokens: 595_400_000,
    blocks: 81_300_000,
    distinct_blocks: 29_000_000,
    block_size: 512,
    duration_s: 86_400,
    turns_per_session: { p50: 2, p90: 5, p99: 65.3, max: 142, mean: 8.1 },
    input_length: { p50: 11_587, p90: 38_611, p99: 66_456, max: 191_378, mean: 15_325.4 },
    apc_ceiling: { any_session: ceiling, intra_session: ceiling, shared_prefix: ceiling },
    shared_prefix_min_sessions: 8,
    reuse: { intra_session: 0.029, cross_session: 0.592, shared_prefix: 0.38, unclassified: 0 },
    reuse_blocks: { intra_session: 2_236_000, cross_session: 46_121_000, shared_prefix: 29_596_000, unclassified: 0 },
    model: { preset: 'qwen3-coder-30b-a3b', name: 'Qwen/Qwen3-Coder-30B-A3B-Instruct', kv_bytes_per_token: 98_304 },
    kv_footprint_bytes: { p50: 1.07 * GIB, p90: 3.54 * GIB, p95: 4.48 * GIB, p99: 6.09 * GIB, max: 17.52 * GIB },
    kv_footprint_cdf: [],
  };
}

describe('renderSummary', () => {
  it('scales large counts with SI prefixes and names their units', () => {
    const text = renderSummary(bigSummary());
    expect(text).toContain('1.0 M requests · 123,456 sessions · input 41.6 G tokens · output 595.4 M tokens');
    expect(text).toContain('block size 512 tokens · 81.3 M blocks, 29.0 M distinct · span 24.0 h');
    expect(text).not.toMatch(/\d{4,}(\.\d)? M/); // never "41643.1 M"
  });

  it('puts a unit on every table: in the header, the row label or each cell', () => {
    const lines = renderSummary(bigSummary()).split('\n');
    const row = (start: string) => lines.find((l) => l.trimStart().startsWith(start))!;
    expect(row('input length (tokens)')).toMatch(/11\.6 k\s+38\.6 k\s+66\.5 k\s+191\.4 k\s+15\.3 k$/);
    expect(row('theoretical APC ceilings')).toMatch(/tokens\s+blocks\s+hit requests$/);
    expect(row('any-session')).toMatch(/65\.1%\s+64\.0%\s+445,600 \(44\.6%\)$/);
    expect(row('reuse of the any-session match')).toMatch(/blocks\s+share$/);
    expect(row('cross-session')).toMatch(/46\.1 M\s+59\.2%$/);
    expect(row('KV footprint per request')).toContain('96.0 KiB/token');
    expect(row('KV (GiB)')).toMatch(/1\.07\s+3\.54\s+4\.48\s+6\.09\s+17\.52$/);
  });

  it('keeps small counts exact, and an empty trace readable', () => {
    const small = { ...bigSummary(), requests: 12, sessions: 3, input_tokens: 999, output_tokens: 0 };
    expect(renderSummary(small)).toContain('12 requests · 3 sessions · input 999 tokens · output 0 tokens');
    const empty = {
      ...bigSummary(),
      requests: 0,
      block_size: null,
      apc_ceiling: {
        any_session: { token_ratio: 0, block_ratio: 0, hit_requests: 0 },
        intra_session: { token_ratio: 0, block_ratio: 0, hit_requests: 0 },
        shared_prefix: { token_ratio: 0, block_ratio: 0, hit_requests: 0 },
      },
      kv_footprint_bytes: { p50: 0, p90: 0, p95: 0, p99: 0, max: 0 },
    };
    const text = renderSummary(empty);
    expect(text).toContain('block size mixed');
    expect(text).toMatch(/any-session.*0 \(-\)$/m);
    expect(text).toMatch(/KV \(B\)\s+0\.00/);
  });
});
