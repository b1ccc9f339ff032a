/**
 * The human-readable form of a TraceSummary, laid out like the B1′ tables. Counts scale
 * (SI), sizes are IEC and every table names its unit in a header or row label (format-units.ts);
 * the --json form is the TraceSummary itself and never goes through here.
 */
import { bytesScale, formatBytes, formatCount, formatDuration, formatIn, formatTotal } from './format-units.js';
import type { Ceiling, TraceSummary } from './trace-summary.js';

const percent = (ratio: number): string => (Number.isFinite(ratio) ? `${(ratio * 100).toFixed(1)}%` : '-');
const cells = (values: readonly string[], width: number): string => values.map((v) => v.padStart(width)).join('');

function headline(s: TraceSummary): string[] {
  return [
    `${formatTotal(s.requests, 'requests')} · ${formatTotal(s.sessions, 'sessions')} · input ${formatCount(s.input_tokens, 'tokens')} · output ${formatCount(s.output_tokens, 'tokens')}`,
    `block size ${s.block_size === null ? 'mixed' : `${s.block_size} tokens`} · ${formatTotal(s.blocks, 'blocks')}, ${formatTotal(s.distinct_blocks)} distinct · span ${formatDuration(s.duration_s)}`,
  ];
}

function shape(s: TraceSummary): string[] {
  const spread = (x: TraceSummary['input_length']) => [x.p50, x.p90, x.p99, x.max, x.mean];
  return [
    `${''.padEnd(24)}${cells(['p50', 'p90', 'p99', 'max', 'mean'], 10)}`,
    `  ${'turns per session'.padEnd(22)}${cells(
      spread(s.turns_per_session).map((v) => v.toFixed(1)),
      10,
    )}`,
    `  ${'input length (tokens)'.padEnd(22)}${cells(
      spread(s.input_length).map((v) => formatCount(Math.round(v))),
      10,
    )}`,
  ];
}

function ceilings(s: TraceSummary): string[] {
  const row = (name: string, c: Ceiling): string =>
    `  ${name.padEnd(36)}${cells([percent(c.token_ratio), percent(c.block_ratio)], 9)}   ${formatTotal(c.hit_requests)} (${percent(c.hit_requests / s.requests)})`;
  return [
    `${'theoretical APC ceilings'.padEnd(38)}${cells(['tokens', 'blocks'], 9)}   hit requests`,
    row('any-session (perfect global cache)', s.apc_ceiling.any_session),
    row('intra-session only', s.apc_ceiling.intra_session),
    row(`shared-prefix only (≥${s.shared_prefix_min_sessions} sessions)`, s.apc_ceiling.shared_prefix),
  ];
}

function reuse(s: TraceSummary): string[] {
  const row = (name: string, blocks: number, fraction: number): string =>
    `  ${name.padEnd(36)}${cells([formatTotal(blocks), percent(fraction)], 9)}`;
  return [
    `${'reuse of the any-session match'.padEnd(38)}${cells(['blocks', 'share'], 9)}`,
    row('intra-session', s.reuse_blocks.intra_session, s.reuse.intra_session),
    row('cross-session', s.reuse_blocks.cross_session, s.reuse.cross_session),
    row('shared / system prefix', s.reuse_blocks.shared_prefix, s.reuse.shared_prefix),
    row('unclassified (no session)', s.reuse_blocks.unclassified, s.reuse.unclassified),
  ];
}

function footprint(s: TraceSummary): string[] {
  const k = s.kv_footprint_bytes;
  const values = [k.p50, k.p90, k.p95, k.p99, k.max];
  const scale = bytesScale(values);
  return [
    `KV footprint per request (${s.model.name}, ${formatBytes(s.model.kv_bytes_per_token)}/token, input + output)`,
    `${''.padEnd(24)}${cells(['p50', 'p90', 'p95', 'p99', 'max'], 10)}`,
    `  ${`KV (${scale.unit})`.padEnd(22)}${cells(
      values.map((v) => formatIn(v, scale, 2)),
      10,
    )}`,
  ];
}

export function renderSummary(summary: TraceSummary): string {
  return [
    ...headline(summary),
    '',
    ...shape(summary),
    '',
    ...ceilings(summary),
    '',
    ...reuse(summary),
    '',
    ...footprint(summary),
  ].join('\n');
}
