/**
 * `kvroute sweep`: every (policy × engine state) cell of one trace, into one directory
 * (layout in sweep-layout.ts and docs/sweep.md).
 *
 * Offline cells run in the simulator on Piscina workers (one cell per task; each worker reads
 * the trace itself, so nothing trace-sized crosses threads), while this thread characterizes
 * the trace (the APC ceiling the B3 table measures against) and runs the B2 interference grid.
 * Live and backends cells run one after another through runLiveCell (sweep-live.ts): each needs
 * the machine to itself. Cost: cells × one simulation, spread over `workers` threads.
 *
 * Order of writes: cells, trace-summary.json, interference.json, tables.md, and sweep.json last
 * (atomically), so an interrupted sweep leaves no sweep.json naming a missing file.
 */
import { accessSync, constants } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';

import { characterizeTrace } from '../analysis/characterize.js';
import { comparePairedRuns, type PairedComparison } from '../analysis/paired-compare.js';
import type { TraceSummary } from '../analysis/trace-summary.js';
import {
  capacityBlocks,
  describeScaling,
  ENGINE_PRESETS,
  isUnscaled,
  scalePreset,
  type EngineScaling,
} from '../sim/engine-preset.js';
import { SIM_FLEET_DEFAULTS } from '../sim/sim-fleet-defaults.js';
import { interferenceTable } from '../sim/interference-bench.js';
import { readTrace, type ReadTraceOptions, type TraceReadStats } from '../trace/read-trace.js';
import { readRecords } from '../trace/record-file.js';
import { ioError } from '../trace/trace-errors.js';
import { scalingRecord } from './engine-options.js';
import { fleetFields, fleetRecord } from './fleet-options.js';
import { fleetPresets, type FleetGroup } from '../sim/fleet-spec.js';
import type { CostMode } from '../core/cost-learning/cost-mode.js';
import { destroyWorkerPool, newWorkerPool } from '../core/worker-pool.js';
import { kvrouteVersion } from '../trace/run-header.js';
import type { FlowFlags } from './flow-flags.js';
import { SIM_WORKER_URL, type CellFailure, type SimCellResult, type SimCellTask } from './sweep-cell.js';
import {
  planCells,
  prepareOutDir,
  writeAtomically,
  writeJson,
  type CellMode,
  type CellSummary,
  type EngineFacts,
  type EngineStateName,
  type SweepCell,
  type SweepManifest,
} from './sweep-layout.js';
import type { LiveOptions, LiveCellRunner } from './sweep-live.js';
import { cellSummary } from './sweep-summary.js';
import { renderTables, type EsPair } from './sweep-tables.js';

export interface SweepOptions {
  trace: string;
  reader: ReadTraceOptions;
  policies: readonly string[];
  engineStates: readonly EngineStateName[];
  out: string;
  force: boolean;
  mode: CellMode;
  /** Engines per cell (sim and live). */
  instances: number;
  preset: string;
  /**
   * Multipliers of the preset's prefill cost, decode cost and KV capacity, for the simulator's
   * engines and the --live fleet (default: none). --backends engines are what they are.
   */
  scaling?: EngineScaling;
  /** A mixed fleet of `instances` engines (--fleet), for the simulator's and the --live fleet; absent: uniform. */
  fleet?: FleetGroup[];
  /** How min_ttft prices each instance in simulated cells (--costs; default learned). */
  costs?: CostMode;
  /** Simulated cells count sessions idle between turns (default true; --no-session-returns). */
  sessionReturns?: boolean;
  /** Flow control in every simulated cell (--max-in-flight, --flow, --queue-timeout); absent: none. */
  flow?: FlowFlags;
  /** Piscina threads for offline cells (default: one per core). */
  workers?: number;
  /** live and backends cells. */
  live?: LiveOptions;
  /** Runs one live or backends cell; default: runLiveCell. Tests substitute it. */
  liveRunner?: LiveCellRunner;
  /** argv after `kvroute`, for sweep.json and the record headers. */
  command: string[];
  /** Called as each cell finishes. */
  onCell?: (cell: SweepCell, wallSeconds: number) => void;
}

export interface SweepOutcome {
  manifest: SweepManifest;
  summaries: Map<string, CellSummary>;
  traceSummary: TraceSummary;
  pairs: EsPair[];
  tables: string;
  readStats: TraceReadStats;
}

/** A cell's failure rethrown here with its code, so a trace read error still exits 1. */
class CellError extends Error {
  constructor(
    message: string,
    readonly code: string | undefined,
  ) {
    super(message);
  }
}

export async function runSweep(options: SweepOptions): Promise<SweepOutcome> {
  const startedAt = new Date();
  const cells = planCells(options.policies, options.engineStates, options.mode);
  try {
    accessSync(options.trace, constants.R_OK);
  } catch (error) {
    throw ioError(options.trace, error);
  }
  prepareOutDir(options.out, cells, options.force);
  const reader = readTrace(options.trace, options.reader);
  // Characterization runs inline (workers: 0): the cores belong to the cells.
  const traceSummaryTask = characterizeTrace(reader, { workers: 0 });
  traceSummaryTask.catch(() => {});
  const ran =
    options.mode === 'sim'
      ? await runSimCells(cells, options, startedAt)
      : await runLiveCells(cells, options, startedAt);
  const traceSummary = await traceSummaryTask;
  const fingerprints = new Set(ran.map((r) => r.fingerprint));
  if (fingerprints.size > 1) throw new Error(`cells read different traces: ${[...fingerprints].join(', ')}`);
  const summaries = new Map(ran.map((r) => [r.id, r.summary]));

  const preset = scalePreset(ENGINE_PRESETS[options.preset]!, options.scaling);
  const pairs = esPairs(cells, options.out);
  const mixed = fleetRecord(options.fleet).fleet;
  const perturbed =
    options.mode === 'backends' || (isUnscaled(options.scaling) && mixed === undefined)
      ? undefined
      : [
          ...(isUnscaled(options.scaling)
            ? []
            : [
                `${describeScaling(options.scaling)} (preset ${options.preset}; docs/engine-model.md#perturbing-the-model)`,
              ]),
          ...(mixed === undefined ? [] : [`mixed fleet ${mixed} (docs/engine-model.md#mixed-fleets)`]),
        ].join('; ');
  const tables = renderTables(cells, summaries, traceSummary, pairs, perturbed);
  writeJson(join(options.out, 'trace-summary.json'), traceSummary);
  writeJson(join(options.out, 'interference.json'), interferenceTable(preset));
  writeAtomically(join(options.out, 'tables.md'), tables);
  const manifest: SweepManifest = {
    format: 'kvroute-sweep',
    version: 1,
    trace: { path: options.trace, fingerprint: ran[0]?.fingerprint ?? '' },
    ...(options.mode === 'backends'
      ? {}
      : {
          preset: options.preset,
          engine_scaling: scalingRecord(options.scaling ?? {}),
          ...fleetRecord(options.fleet),
          costs: options.costs ?? 'learned',
          session_returns: options.sessionReturns !== false,
          ...(options.flow === undefined ? {} : { flow: options.flow.fields }),
        }),
    command: options.command,
    kvroute_version: kvrouteVersion(),
    started_at: startedAt.toISOString(),
    cells,
    trace_summary: 'trace-summary.json',
    interference: 'interference.json',
    tables: 'tables.md',
  };
  writeJson(join(options.out, 'sweep.json'), manifest);
  return { manifest, summaries, traceSummary, pairs, tables, readStats: reader.stats };
}

async function runSimCells(cells: SweepCell[], options: SweepOptions, startedAt: Date): Promise<SimCellResult[]> {
  const threads = Math.max(1, Math.min(cells.length, options.workers ?? availableParallelism()));
  const pool = newWorkerPool({ filename: SIM_WORKER_URL, minThreads: threads, maxThreads: threads });
  const runs = cells.map(async (cell) => {
    const task: SimCellTask = {
      cell,
      dir: options.out,
      trace: options.trace,
      reader: options.reader,
      instances: options.instances,
      preset: options.preset,
      scaling: options.scaling ?? {},
      ...(options.fleet === undefined ? {} : { fleet: options.fleet }),
      costs: options.costs ?? 'learned',
      sessionReturns: options.sessionReturns !== false,
      ...(options.flow === undefined ? {} : { flow: options.flow }),
      command: options.command,
      startedAt: startedAt.toISOString(),
    };
    const result = (await pool.run(task)) as SimCellResult | CellFailure;
    if ('failed' in result) throw new CellError(result.message, result.code);
    options.onCell?.(cell, result.wall_s);
    return result;
  });
  try {
    return await Promise.all(runs);
  } finally {
    // One failed cell must not stop the others' workers mid-task (a cell's worker writes its
    // records and summary.json: stopped, it could leave them half-written), so every cell settles
    // first. Workers still loading are destroyWorkerPool's to wait for (core/worker-pool.ts).
    await Promise.allSettled(runs);
    await destroyWorkerPool(pool);
  }
}

async function runLiveCells(cells: SweepCell[], options: SweepOptions, startedAt: Date): Promise<SimCellResult[]> {
  const given = options.live;
  if (given === undefined) throw new Error(`${options.mode} cells need live options`);
  // A --live fleet runs the sweep's engine model, as the simulator's cells do.
  const live =
    given.mode === 'live'
      ? {
          ...given,
          preset: options.preset,
          scaling: options.scaling ?? {},
          ...(options.fleet === undefined ? {} : { groups: options.fleet }),
        }
      : given;
  const { runLiveCell, startFleet, feedName, registerFeed, removeFeed } = await import('./sweep-live.js');
  const runner = options.liveRunner ?? runLiveCell;
  // --hot: one fleet for all cells, publishing the feed whether or not a cell reads it.
  const hot = live.mode === 'live' && live.hot === true && options.liveRunner === undefined;
  const feed = feedName('hot');
  const fleet = hot ? await startFleet(live.instances, registerFeed(feed), live.speed, live.onSpawn, live) : undefined;
  try {
    return await runEachLive(cells, options, startedAt, runner, fleet === undefined ? live : { ...live, fleet });
  } finally {
    await fleet?.stop();
    if (fleet !== undefined) removeFeed(feed);
  }
}

async function runEachLive(
  cells: SweepCell[],
  options: SweepOptions,
  startedAt: Date,
  runner: LiveCellRunner,
  live: LiveOptions,
): Promise<SimCellResult[]> {
  const results: SimCellResult[] = [];
  for (const cell of cells) {
    const started = performance.now();
    const records = join(options.out, cell.records);
    const { fingerprint } = await runner(cell, { ...live, records, trace: options.trace, startedAt });
    const read = readRecords(records);
    let first = Infinity;
    let last = -Infinity;
    for (const r of read) {
      first = Math.min(first, r.dispatch);
      last = Math.max(last, r.finish);
    }
    const totals = { makespan: read.length === 0 ? 0 : last - first, preemptions: 0, evictions: 0 };
    const summary = cellSummary(read, totals, live.instances, liveEngine(options, live));
    writeJson(join(options.out, cell.summary), summary);
    const wall = (performance.now() - started) / 1000;
    options.onCell?.(cell, wall);
    results.push({ id: cell.id, fingerprint, summary, wall_s: wall });
  }
  return results;
}

/** The engine model of a --live fleet (`sim serve` at its default block size); none for --backends. */
function liveEngine(options: SweepOptions, live: LiveOptions): EngineFacts | undefined {
  if (live.mode !== 'live') return undefined;
  const preset = scalePreset(ENGINE_PRESETS[options.preset]!, options.scaling);
  return {
    preset: options.preset,
    engine_scaling: scalingRecord(options.scaling ?? {}),
    capacity_blocks: capacityBlocks(preset, SIM_FLEET_DEFAULTS.blockSize),
    ...fleetFields(
      options.fleet,
      fleetPresets(preset, options.fleet ?? []).map((p) => capacityBlocks(p, SIM_FLEET_DEFAULTS.blockSize)),
    ),
  };
}

/** For each policy with both a shadow and an shm cell: the paired comparison shadow → shm. */
function esPairs(cells: readonly SweepCell[], dir: string): EsPair[] {
  const pairs: EsPair[] = [];
  for (const shadow of cells) {
    if (shadow.engine_state !== 'shadow') continue;
    const shm = cells.find((c) => c.policy === shadow.policy && c.engine_state === 'shm');
    if (shm === undefined) continue;
    const comparison: PairedComparison = comparePairedRuns(
      readRecords(join(dir, shadow.records)),
      readRecords(join(dir, shm.records)),
    );
    pairs.push({ policy: shadow.policy, comparison });
  }
  return pairs;
}
