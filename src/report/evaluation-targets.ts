/**
 * Issue #28's targets in a policy evaluation file (scripts/policy-eval.mjs writes `targets`, one
 * record per regime; `setups`, how each regime's trace and sweep were made per seed): read them,
 * checking every field, and render the targets table. One renderer for both readers: the script
 * prints this table, and `kvroute report DIR` shows it under the set's TTFT table, so the two
 * never disagree.
 *
 * Both fields are optional (files written before issue #28 have neither); a present one is
 * checked in full, naming the file and the field. `pass.existing` is absent where the ≥ 10%
 * target does not apply to the regime.
 */
import type { Fields } from './report-input.js';

/** One policy's means in a regime. */
export interface TargetMean {
  policy: string;
  ttft_p90: number;
  apc: number;
  hotspot: number;
}

/** A regime's check, as the evaluation file records it. */
export interface TargetRecord {
  default: TargetMean;
  rank: number;
  of: number;
  best_other: TargetMean;
  best_existing: TargetMean;
  best_apc: number;
  unified: TargetMean;
  pass: { best: boolean; existing?: boolean; apc: boolean; hotspot: boolean };
}

/** How a regime was run for one seed: the trace (a file, or the command writing it) and the sweep's flags. */
export interface RegimeSetup {
  trace: string;
  sweep: string[];
}

function boolean(f: Fields, value: unknown, field: string): boolean {
  if (typeof value !== 'boolean') f.fail(field, 'true or false', value);
  return value as boolean;
}

function readMean(f: Fields, value: unknown, field: string): TargetMean {
  const m = f.object(value, field);
  return {
    policy: f.string(m.policy, `${field}.policy`),
    ttft_p90: f.number(m.ttft_p90, `${field}.ttft_p90`),
    apc: f.number(m.apc, `${field}.apc`),
    hotspot: f.number(m.hotspot, `${field}.hotspot`),
  };
}

/** The `targets` of an evaluation file by regime, or undefined when it has none. */
export function readTargets(f: Fields, value: unknown): Map<string, TargetRecord> | undefined {
  if (value === undefined) return undefined;
  const records = new Map<string, TargetRecord>();
  for (const [regime, raw] of Object.entries(f.object(value, 'targets'))) {
    const at = `targets.${regime}`;
    const r = f.object(raw, at);
    const pass = f.object(r.pass, `${at}.pass`);
    records.set(regime, {
      default: readMean(f, r.default, `${at}.default`),
      rank: f.number(r.rank, `${at}.rank`),
      of: f.number(r.of, `${at}.of`),
      best_other: readMean(f, r.best_other, `${at}.best_other`),
      best_existing: readMean(f, r.best_existing, `${at}.best_existing`),
      best_apc: f.number(r.best_apc, `${at}.best_apc`),
      unified: readMean(f, r.unified, `${at}.unified`),
      pass: {
        best: boolean(f, pass.best, `${at}.pass.best`),
        ...(pass.existing === undefined ? {} : { existing: boolean(f, pass.existing, `${at}.pass.existing`) }),
        apc: boolean(f, pass.apc, `${at}.pass.apc`),
        hotspot: boolean(f, pass.hotspot, `${at}.pass.hotspot`),
      },
    });
  }
  return records;
}

/** The `setups` of an evaluation file: regime → seed → setup; undefined when it has none. */
export function readSetups(f: Fields, value: unknown): Map<string, Map<string, RegimeSetup>> | undefined {
  if (value === undefined) return undefined;
  const setups = new Map<string, Map<string, RegimeSetup>>();
  for (const [regime, bySeed] of Object.entries(f.object(value, 'setups'))) {
    const seeds = new Map<string, RegimeSetup>();
    for (const [seed, raw] of Object.entries(f.object(bySeed, `setups.${regime}`))) {
      const at = `setups.${regime}.${seed}`;
      const s = f.object(raw, at);
      const sweep = f.array(s.sweep, `${at}.sweep`).map((x, i) => f.string(x, `${at}.sweep[${i}]`));
      seeds.set(seed, { trace: f.string(s.trace, `${at}.trace`), sweep });
    }
    setups.set(regime, seeds);
  }
  return setups;
}

const fmt = (x: number, digits = 2): string => x.toFixed(digits);
const pct = (x: number): string => `${x > 0 ? '+' : x < 0 ? '−' : ''}${fmt(Math.abs(100 * x), 1)}%`;
/** ✓ or ✗ after a cell; nothing when the target does not apply. */
const mark = (ok: boolean | undefined): string => (ok === undefined ? '' : ok ? ' ✓' : ' ✗');

/** The targets table: its header, a row of cells per regime, and a line per target. */
export interface TargetsTable {
  header: string[];
  rows: string[][];
  /** In how many regimes each target is met. */
  summary: string[];
}

/** The targets table of `records`; `label` heads the regime column. */
export function targetsTable(records: ReadonlyMap<string, TargetRecord>, label: string): TargetsTable {
  const first = records.values().next().value;
  const d = first?.default.policy ?? 'default';
  const header = [
    label,
    `${d} TTFT p90 s`,
    'rank',
    'best other',
    'vs best other (≤ +1%)',
    'best existing',
    'vs best existing (≤ −10% where marked)',
    `APC ${d} / best (≤ 1 pp behind)`,
    `hotspot ${d} / unified (≤)`,
  ];
  const rows = [...records].map(([regime, r]) => {
    const vs = (other: TargetMean): number => (r.default.ttft_p90 - other.ttft_p90) / other.ttft_p90;
    return [
      regime,
      fmt(r.default.ttft_p90),
      `${r.rank} of ${r.of}`,
      `${r.best_other.policy} ${fmt(r.best_other.ttft_p90)}`,
      `${pct(vs(r.best_other))}${mark(r.pass.best)}`,
      `${r.best_existing.policy} ${fmt(r.best_existing.ttft_p90)}`,
      `${pct(vs(r.best_existing))}${mark(r.pass.existing)}`,
      `${fmt(100 * r.default.apc, 1)}% / ${fmt(100 * r.best_apc, 1)}%${mark(r.pass.apc)}`,
      `${fmt(r.default.hotspot)} / ${fmt(r.unified.hotspot)}${mark(r.pass.hotspot)}`,
    ];
  });
  const all = [...records.values()];
  const count = (pick: (r: TargetRecord) => boolean | undefined): string => {
    const applicable = all.filter((r) => pick(r) !== undefined);
    return `${applicable.filter((r) => pick(r) === true).length} of ${applicable.length}`;
  };
  const summary = [
    `best TTFT p90 (within 1% of every other policy): met in ${count((r) => r.pass.best)} regimes`,
    `≥ 10% below the best existing policy (mixed fleets, misstated costs): met in ${count((r) => r.pass.existing)} regimes`,
    `APC within 1 pp of the best: met in ${count((r) => r.pass.apc)} regimes`,
    `hotspot index ≤ unified's: met in ${count((r) => r.pass.hotspot)} regimes`,
  ];
  return { header, rows, summary };
}

/** The targets table as Markdown lines: the table, a blank line, a bullet per target. */
export function targetsMarkdown(records: ReadonlyMap<string, TargetRecord>, label: string): string[] {
  const { header, rows, summary } = targetsTable(records, label);
  return [
    `| ${header.join(' | ')} |`,
    `| --- | ${header
      .slice(1)
      .map((_, i) => ([2, 4].includes(i) ? '---' : '---:'))
      .join(' | ')} |`,
    ...rows.map((cells) => `| ${cells.join(' | ')} |`),
    '',
    ...summary.map((line) => `- ${line}`),
  ];
}

/** One Markdown bullet per regime and seed: how its trace was made and the sweep's own flags. */
export function setupsMarkdown(setups: ReadonlyMap<string, ReadonlyMap<string, RegimeSetup>>): string[] {
  const lines: string[] = [];
  for (const [regime, seeds] of setups)
    for (const [seed, s] of seeds)
      lines.push(
        `- ${regime}${seed === '0' ? '' : `, seed ${seed}`}: \`${s.trace}\`${s.sweep.length === 0 ? '' : `; sweep \`${s.sweep.join(' ')}\``}`,
      );
  return lines;
}
