/** The human-readable form of a TraceSummary, laid out like the seeds' B1' tables. */
import type { Ceiling, TraceSummary } from './trace-summary.js';

const GIB = 1024 ** 3;

const percent = (ratio: number): string => `${(ratio * 100).toFixed(1)}%`;
const tokens = (count: number): string =>
  count >= 1e6 ? `${(count / 1e6).toFixed(1)} M` : count >= 1e3 ? `${(count / 1e3).toFixed(1)} k` : String(count);
const whole = (value: number): string => Math.round(value).toLocaleString('en-US');
const gib = (bytes: number): string => `${(bytes / GIB).toFixed(2)} GiB`;

export function renderSummary(summary: TraceSummary): string {
  const s = summary;
  const ceiling = (name: string, c: Ceiling): string =>
    `  ${name.padEnd(34)}${percent(c.token_ratio).padStart(8)}${percent(c.block_ratio).padStart(9)}   ${whole(c.hit_requests)} / ${whole(s.requests)}`;
  const reuseLine = (name: string, blocks: number, fraction: number): string =>
    `  ${name.padEnd(26)}${whole(blocks).padStart(12)}${percent(fraction).padStart(9)}`;
  const k = s.kv_footprint_bytes;
  return [
    `requests ${whole(s.requests)} · sessions ${whole(s.sessions)} · input ${tokens(s.input_tokens)} tokens · output ${tokens(s.output_tokens)} tokens`,
    `block size ${s.block_size ?? 'mixed'} · ${whole(s.blocks)} blocks, ${whole(s.distinct_blocks)} distinct · span ${s.duration_s.toFixed(1)} s`,
    '',
    `                          p50        p90        p99        max       mean`,
    `  turns per session${[s.turns_per_session.p50, s.turns_per_session.p90, s.turns_per_session.p99, s.turns_per_session.max, s.turns_per_session.mean].map((v) => v.toFixed(1).padStart(11)).join('')}`,
    `  input length     ${[s.input_length.p50, s.input_length.p90, s.input_length.p99, s.input_length.max, s.input_length.mean].map((v) => whole(v).padStart(11)).join('')}`,
    '',
    'theoretical APC ceilings                 tokens   blocks   hit requests',
    ceiling('any-session (perfect global cache)', s.apc_ceiling.any_session),
    ceiling('intra-session only', s.apc_ceiling.intra_session),
    ceiling(`shared-prefix only (≥${s.shared_prefix_min_sessions} sessions)`, s.apc_ceiling.shared_prefix),
    '',
    'reuse decomposition (blocks of the any-session match)',
    reuseLine('intra-session', s.reuse_blocks.intra_session, s.reuse.intra_session),
    reuseLine('cross-session', s.reuse_blocks.cross_session, s.reuse.cross_session),
    reuseLine('shared / system prefix', s.reuse_blocks.shared_prefix, s.reuse.shared_prefix),
    reuseLine('unclassified (no session)', s.reuse_blocks.unclassified, s.reuse.unclassified),
    '',
    `KV footprint per request (${s.model.name}, ${whole(s.model.kv_bytes_per_token)} B/token, input + output)`,
    `        p50        p90        p95        p99        max`,
    `  ${[k.p50, k.p90, k.p95, k.p99, k.max].map((v) => gib(v).padStart(11)).join('')}`,
  ].join('\n');
}
