/**
 * What `kvroute report` reads: a sweep directory (DIR/sweep.json and the files it names, layout
 * in docs/report.md) or one record file (a single run), loaded into one ReportInput.
 *
 * Why one shape: the figures (report-figures.ts) ask the input what it has and draw or omit;
 * they never care where it came from. A single run gets its summary from `runMetrics` over its
 * records, and its per-instance TTFT p90 from the same records.
 *
 * Invariants:
 * - Every failure names the file: a missing or unreadable file, JSON that does not parse, a
 *   field of the wrong type (`sweep.json: cells[2].summary: must be a string`). Each is a
 *   ReportError (ERR_KVROUTE_REPORT, a data error: exit 1); a bad record file keeps its own
 *   RecordFileError (ERR_KVROUTE_RECORDS, also exit 1).
 * - Optional parts (trace summary, interference, a summary's `slow`/`per_instance`/`reuse`)
 *   are undefined when absent, never defaulted to zeros.
 *
 * Cost: reads each cell's summary.json; a cell's records file is read only when its summary
 * lacks `per_instance` (to compute it), so O(records) for such cells.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

import type { KvrouteError } from '../core/errors.js';
import { describe } from '../core/errors.js';
import { analyzeRun } from '../analysis/run-analysis.js';
import { runMetrics, type RunMetrics } from '../analysis/run-metrics.js';
import { describeScaling } from '../sim/engine-preset.js';
import { readRecordFile } from '../trace/record-file.js';
import type { RunHeader } from '../trace/records.js';
import { esAblation, type EsPair } from './es-ablation.js';

/** The newest sweep.json version this reader knows (docs/report.md). */
export const SWEEP_VERSION = 1;

/** Bad report input: names the file and, when it is JSON, the field. */
export class ReportError extends Error implements KvrouteError {
  readonly code = 'ERR_KVROUTE_REPORT' as const;
  constructor(message: string) {
    super(message);
    this.name = 'ReportError';
  }
}

export interface SlowCauses {
  n_slow: number;
  causes: Record<string, number>;
}

/**
 * One run's summary: `kvroute analyze run --json` (or `sim run --json`, a subset), as read from
 * disk: RunMetrics' figures, with what older summaries may lack made optional.
 */
export type CellSummary = Pick<
  RunMetrics,
  'requests' | 'ttft_s' | 'tpot_ms' | 'e2e_s' | 'apc' | 'interference_index' | 'hotspot_index'
> &
  Partial<Pick<RunMetrics, 'per_instance' | 'failed'>> & {
    slow?: SlowCauses;
    /** Fractions of the run's cached tokens by where they came from. */
    reuse?: { intra_session: number; cross_session: number; shared_prefix: number; unclassified?: number };
  };

export interface ReportCell {
  id: string;
  policy: string;
  engine_state?: string;
  mode?: string;
  summary: CellSummary;
  /** The record file's header, when the cell's records were read (a single run always). */
  header?: RunHeader;
  /** The cell's record file, when the sweep names one. */
  records?: string;
}

/** The fields of `kvroute analyze trace --json` the figures use. */
export interface TraceSummary {
  requests: number;
  sessions: number;
  apc_ceiling: Record<'any_session' | 'intra_session' | 'shared_prefix', { token_ratio: number }>;
  reuse?: Record<string, number>;
  kv_footprint_bytes?: Record<string, number>;
  kv_footprint_cdf?: [number, number][];
  model?: { preset?: string; name?: string };
}

export interface InterferencePoint {
  variant: string;
  prefill_tokens: number;
  tpot_index: number | null;
  ttft_index: number | null;
}

export interface ReportInput {
  kind: 'sweep' | 'run';
  /** The directory or record file given. */
  source: string;
  trace: { path: string; fingerprint: string };
  /** Each command that produced the data, as `kvroute …` argv lists. */
  commands: string[][];
  /** The simulated engines' preset and multipliers, when recorded: `h20-… · prefill cost ×1.3`. */
  engine?: string;
  /** A mixed fleet's spec, when recorded (`--fleet`, docs/engine-model.md#mixed-fleets). */
  fleet?: string;
  kvroute_version: string;
  started_at: string;
  cells: ReportCell[];
  traceSummary?: TraceSummary;
  interference?: InterferencePoint[];
  /** Shadow → shm per policy that ran under both (es-ablation.ts); empty when none did. */
  esPairs: EsPair[];
}

export function readJson(path: string): unknown {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'missing' : String(error);
    throw new ReportError(`${path}: ${reason}`);
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new ReportError(`${path}: not JSON (${(error as Error).message})`);
  }
}

/** Field checks that name `file` and the field path. */
export class Fields {
  constructor(readonly file: string) {}
  fail(field: string, expected: string, got: unknown): never {
    throw new ReportError(`${this.file}: ${field}: must be ${expected}, got ${describe(got)}`);
  }
  object(value: unknown, field: string): Record<string, unknown> {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) this.fail(field, 'an object', value);
    return value as Record<string, unknown>;
  }
  string(value: unknown, field: string): string {
    if (typeof value !== 'string' || value === '') this.fail(field, 'a non-empty string', value);
    return value as string;
  }
  number(value: unknown, field: string): number {
    if (typeof value !== 'number' || !Number.isFinite(value)) this.fail(field, 'a finite number', value);
    return value as number;
  }
  array(value: unknown, field: string): unknown[] {
    if (!Array.isArray(value)) this.fail(field, 'an array', value);
    return value as unknown[];
  }
}

/**
 * A run's reuse split as fractions: `analyze run --json` gives `{fractions, tokens, …}` (or null
 * without the trace); a flat `{intra_session, cross_session, shared_prefix}` is taken as is.
 */
function reuseFractions(f: Fields, value: unknown): CellSummary['reuse'] {
  if (value === undefined || value === null) return undefined;
  const reuse = f.object(value, 'reuse');
  const split = reuse.fractions === undefined ? reuse : f.object(reuse.fractions, 'reuse.fractions');
  for (const key of ['intra_session', 'cross_session', 'shared_prefix'])
    f.number(split[key], `reuse${split === reuse ? '' : '.fractions'}.${key}`);
  return split as CellSummary['reuse'];
}

function checkSummary(file: string, value: unknown): CellSummary {
  const f = new Fields(file);
  const s = f.object(value, '(top level)');
  f.number(s.requests, 'requests');
  for (const key of ['ttft_s', 'tpot_ms', 'e2e_s'])
    for (const q of ['p50', 'p90', 'p99']) f.number(f.object(s[key], key)[q], `${key}.${q}`);
  f.number(s.apc, 'apc');
  // Optional parts: absent or null means "not measured".
  if (s.slow === null) delete s.slow;
  else if (s.slow !== undefined) f.object(f.object(s.slow, 'slow').causes, 'slow.causes');
  if (s.per_instance === null) delete s.per_instance;
  else if (s.per_instance !== undefined) f.array(s.per_instance, 'per_instance');
  const reuse = reuseFractions(f, s.reuse);
  if (reuse === undefined) delete s.reuse;
  else s.reuse = reuse;
  return s as unknown as CellSummary;
}

/**
 * The engine model line of a sweep.json or a run header (`preset`, `engine_scaling`), or
 * undefined when neither is recorded (older files, --backends sweeps).
 */
function engineModel(f: Fields, preset: unknown, scaling: unknown): string | undefined {
  if (preset === undefined) return undefined;
  const name = f.string(preset, 'preset');
  if (scaling === undefined) return name;
  const s = f.object(scaling, 'engine_scaling');
  const factor = (key: string): number => f.number(s[key], `engine_scaling.${key}`);
  const described = describeScaling({
    prefillCost: factor('prefill_cost'),
    decodeCost: factor('decode_cost'),
    kvCapacity: factor('kv_capacity'),
  });
  return `${name} · ${described}`;
}

/**
 * A single run: one record file, summarised as `kvroute analyze run` does (its default SLO,
 * the header's fleet size), so the slow count and causes agree with it.
 */
export function loadRun(path: string): ReportInput {
  const file = readRecordFile(path);
  if (file.records.length === 0) throw new ReportError(`${path}: holds no request records`);
  const { reuse: _noTrace, ...analysis } = analyzeRun(file);
  const summary: CellSummary = analysis;
  const h = file.header;
  const engine = h === undefined ? undefined : engineModel(new Fields(`${path}: header`), h.preset, h.engine_scaling);
  return {
    kind: 'run',
    source: path,
    trace: h?.trace ?? { path: '(not recorded)', fingerprint: '(not recorded)' },
    commands: h === undefined ? [] : [h.command],
    ...(engine === undefined ? {} : { engine }),
    ...(h?.fleet === undefined ? {} : { fleet: new Fields(`${path}: header`).string(h.fleet, 'fleet') }),
    kvroute_version: h?.kvroute_version ?? '(not recorded)',
    started_at: h?.started_at ?? '(not recorded)',
    cells: [{ id: h?.policy ?? 'run', policy: h?.policy ?? '(not recorded)', summary, header: h }],
    esPairs: [],
  };
}

function loadCell(dir: string, value: unknown, i: number): ReportCell {
  const f = new Fields(join(dir, 'sweep.json'));
  const c = f.object(value, `cells[${i}]`);
  const id = f.string(c.id, `cells[${i}].id`);
  const summaryPath = join(dir, f.string(c.summary, `cells[${i}].summary`));
  const recordsPath = c.records === undefined ? undefined : join(dir, f.string(c.records, `cells[${i}].records`));
  const summary = checkSummary(summaryPath, readJson(summaryPath));
  let header: RunHeader | undefined;
  if (summary.per_instance === undefined && recordsPath !== undefined) {
    if (!existsSync(recordsPath)) throw new ReportError(`${recordsPath}: missing (cells[${i}].records in sweep.json)`);
    const file = readRecordFile(recordsPath);
    header = file.header;
    summary.per_instance = runMetrics(file.records).per_instance;
  }
  const cell: ReportCell = { id, policy: f.string(c.policy, `cells[${i}].policy`), summary };
  if (typeof c.engine_state === 'string') cell.engine_state = c.engine_state;
  if (typeof c.mode === 'string') cell.mode = c.mode;
  if (header !== undefined) cell.header = header;
  if (recordsPath !== undefined) cell.records = recordsPath;
  return cell;
}

function optionalJson(dir: string, name: unknown, field: string): unknown {
  if (name === undefined || name === null) return undefined;
  return readJson(join(dir, new Fields(join(dir, 'sweep.json')).string(name, field)));
}

function checkTraceSummary(file: string, value: unknown): TraceSummary {
  const f = new Fields(file);
  const t = f.object(value, '(top level)');
  const ceiling = f.object(t.apc_ceiling, 'apc_ceiling');
  for (const key of ['any_session', 'intra_session'])
    f.number(f.object(ceiling[key], `apc_ceiling.${key}`).token_ratio, `apc_ceiling.${key}.token_ratio`);
  return t as unknown as TraceSummary;
}

function checkInterference(file: string, value: unknown): InterferencePoint[] {
  const f = new Fields(file);
  return f.array(value, '(top level)').map((v, i) => {
    const p = f.object(v, `[${i}]`);
    f.string(p.variant, `[${i}].variant`);
    f.number(p.prefill_tokens, `[${i}].prefill_tokens`);
    return p as unknown as InterferencePoint;
  });
}

/** A sweep directory: DIR/sweep.json and the files it names (docs/report.md). */
export function loadSweep(dir: string): ReportInput {
  const sweepPath = join(dir, 'sweep.json');
  if (!existsSync(sweepPath))
    throw new ReportError(`${sweepPath}: missing: ${dir} is not a sweep directory (kvroute sweep writes sweep.json)`);
  const f = new Fields(sweepPath);
  const s = f.object(readJson(sweepPath), '(top level)');
  if (s.format !== undefined && s.format !== 'kvroute-sweep') f.fail('format', '"kvroute-sweep"', s.format);
  if (typeof s.version === 'number' && s.version > SWEEP_VERSION)
    throw new ReportError(
      `${sweepPath}: sweep version ${s.version} is newer than this kvroute reads (${SWEEP_VERSION})`,
    );
  const trace = f.object(s.trace, 'trace');
  const cells = f.array(s.cells, 'cells');
  if (cells.length === 0) throw new ReportError(`${sweepPath}: cells: empty: the sweep ran no cell`);
  const command = f.array(s.command, 'command').map((a, i) => f.string(a, `command[${i}]`));
  const input: ReportInput = {
    kind: 'sweep',
    source: dir,
    trace: { path: f.string(trace.path, 'trace.path'), fingerprint: f.string(trace.fingerprint, 'trace.fingerprint') },
    commands: [command],
    ...(s.preset === undefined ? {} : { engine: engineModel(f, s.preset, s.engine_scaling) }),
    ...(s.fleet === undefined ? {} : { fleet: f.string(s.fleet, 'fleet') }),
    kvroute_version: f.string(s.kvroute_version, 'kvroute_version'),
    started_at: f.string(s.started_at, 'started_at'),
    cells: cells.map((c, i) => loadCell(dir, c, i)),
    esPairs: [],
  };
  const traceSummary = optionalJson(dir, s.trace_summary, 'trace_summary');
  if (traceSummary !== undefined)
    input.traceSummary = checkTraceSummary(join(dir, s.trace_summary as string), traceSummary);
  const interference = optionalJson(dir, s.interference, 'interference');
  if (interference !== undefined)
    input.interference = checkInterference(join(dir, s.interference as string), interference);
  for (const cell of input.cells) if (cell.records !== undefined && !existsSync(cell.records)) delete cell.records; // no pair to compare
  input.esPairs = esAblation(input.cells);
  return input;
}

/** A sweep directory or a record file, by what `path` is. */
export function loadReportInput(path: string): ReportInput {
  let isDirectory: boolean;
  try {
    isDirectory = statSync(path).isDirectory();
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'missing' : String(error);
    throw new ReportError(`${path}: ${reason}`);
  }
  return isDirectory ? loadSweep(path) : loadRun(path);
}
