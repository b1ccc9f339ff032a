/**
 * One offline sweep cell: read the trace, simulate it under (policy, engine state), write the
 * cell's records (with the RunHeader `kvroute sim run --records` writes) and summary.json.
 * Runs on a Piscina worker (sweep-worker.ts), each worker reading the trace itself, or inline.
 * `simulateFile`, the read-and-simulate half, is also what a `kvroute tune` point runs.
 */
import { join } from 'node:path';

import { parsePolicyArg } from '../core/policy-arg.js';
import type { PolicyName, PolicySpec } from '../core/types.js';
import type { EngineScaling } from '../sim/engine-preset.js';
import type { FleetGroup } from '../sim/fleet-spec.js';
import type { CostMode } from '../core/cost-learning/cost-mode.js';
import type { SimFlowOptions } from '../sim/sim-flow.js';
import { simulateStream, type SimulationResult } from '../sim/simulator.js';
import { readTrace, type ReadTraceOptions, type TraceReadStats } from '../trace/read-trace.js';
import { writeRecords } from '../trace/record-file.js';
import { fingerprinted, TraceFingerprint } from '../trace/trace-fingerprint.js';
import { scalingRecord } from './engine-options.js';
import type { FlowFlags } from './flow-flags.js';
import { fleetFields } from './fleet-options.js';
import { runHeader } from '../trace/run-header.js';
import { writeJson, type CellSummary, type EngineStateName, type SweepCell } from './sweep-layout.js';
import { cellSummary } from './sweep-summary.js';

/** The compiled worker beside this module (from the .ts sources, tests use the build in dist/). */
export const SIM_WORKER_URL = import.meta.url.endsWith('.ts')
  ? new URL('../../dist/cli/sweep-worker.js', import.meta.url).href
  : new URL('./sweep-worker.js', import.meta.url).href;

/** One simulation of a trace file: what a sweep cell and a tune point both run. */
export interface SimFileRun {
  trace: string;
  reader: ReadTraceOptions;
  policy: PolicyName | PolicySpec;
  engineState: EngineStateName;
  instances: number;
  preset: string;
  /** Engine-model multipliers (docs/engine-model.md "Perturbing the model"); absent: none. */
  scaling?: EngineScaling;
  /** A mixed fleet of `instances` engines (--fleet); absent: a uniform one. */
  fleet?: FleetGroup[];
  /** How min_ttft prices each instance (--costs); absent: the simulator's default, learned. */
  costs?: CostMode;
  /** Count sessions idle between turns (default true; --no-session-returns). */
  sessionReturns?: boolean;
  /** Flow control between arrival and route (--max-in-flight, --flow, --queue-timeout); absent: none. */
  flow?: SimFlowOptions;
}

export interface SimFileOutcome {
  result: SimulationResult;
  /** The TraceFingerprint of the requests the run read. */
  fingerprint: string;
  /** The reader's counts, notes and warnings. */
  readStats: TraceReadStats;
}

/** Reads `run.trace` and simulates it; the records stay in memory. */
export async function simulateFile(run: SimFileRun): Promise<SimFileOutcome> {
  const fingerprint = new TraceFingerprint();
  const reader = readTrace(run.trace, run.reader);
  const result = await simulateStream(fingerprinted(reader, fingerprint), {
    policy: run.policy,
    instances: run.instances,
    engineState: run.engineState,
    preset: run.preset,
    ...(run.scaling === undefined ? {} : { scaling: run.scaling }),
    ...(run.fleet === undefined ? {} : { fleet: run.fleet }),
    ...(run.costs === undefined ? {} : { costs: run.costs }),
    ...(run.sessionReturns === undefined ? {} : { sessionReturns: run.sessionReturns }),
    ...(run.flow === undefined ? {} : { flow: run.flow }),
  });
  return { result, fingerprint: fingerprint.digest(), readStats: reader.stats };
}

export interface SimCellTask {
  cell: SweepCell;
  /** The sweep directory. */
  dir: string;
  trace: string;
  reader: ReadTraceOptions;
  instances: number;
  preset: string;
  scaling: EngineScaling;
  fleet?: FleetGroup[];
  costs: CostMode;
  sessionReturns: boolean;
  /** Flow control in the cell, and how its records' header names it; absent: none. */
  flow?: FlowFlags;
  /** The sweep's argv and start, for the record header. */
  command: string[];
  startedAt: string;
}

export interface SimCellResult {
  id: string;
  fingerprint: string;
  summary: CellSummary;
  wall_s: number;
}

/** A failure a worker sends back as a value, so the error's `code` (its exit status) survives. */
export interface CellFailure {
  failed: true;
  message: string;
  code?: string;
}

export async function runSimCell(task: SimCellTask): Promise<SimCellResult> {
  const started = performance.now();
  const { cell } = task;
  const { result, fingerprint } = await simulateFile({
    trace: task.trace,
    reader: task.reader,
    policy: parsePolicyArg(cell.policy, 'policy'),
    engineState: cell.engine_state,
    instances: task.instances,
    preset: task.preset,
    scaling: task.scaling,
    ...(task.fleet === undefined ? {} : { fleet: task.fleet }),
    costs: task.costs,
    sessionReturns: task.sessionReturns,
    ...(task.flow === undefined ? {} : { flow: task.flow.options }),
  });
  const engine = {
    preset: task.preset,
    engine_scaling: scalingRecord(task.scaling),
    capacity_blocks: result.capacityBlocks,
    ...fleetFields(task.fleet, result.engineCapacityBlocks),
  };
  const header = runHeader(
    {
      source: 'sim',
      trace: { path: task.trace, fingerprint },
      policy: cell.policy,
      engine_state: cell.engine_state,
      instances: task.instances,
      mode: 'session',
      costs: task.costs,
      session_returns: task.sessionReturns,
      ...(task.flow === undefined ? {} : { flow: task.flow.fields }),
      ...engine,
    },
    new Date(task.startedAt),
  );
  header.command = task.command;
  writeRecords(join(task.dir, cell.records), result.records, header);
  const summary = cellSummary(result.records, result, task.instances, engine);
  writeJson(join(task.dir, cell.summary), summary);
  return { id: cell.id, fingerprint: header.trace.fingerprint, summary, wall_s: (performance.now() - started) / 1000 };
}
