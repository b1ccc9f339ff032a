/**
 * One offline sweep cell: read the trace, simulate it under (policy, engine state), write the
 * cell's records (with the RunHeader `kvroute sim run --records` writes) and summary.json.
 * Runs on a Piscina worker (sweep-worker.ts), each worker reading the trace itself, or inline.
 */
import { join } from 'node:path';

import type { PolicyName } from '../core/types.js';
import type { EngineScaling } from '../sim/engine-preset.js';
import { simulateStream } from '../sim/simulator.js';
import { readTrace, type ReadTraceOptions } from '../trace/read-trace.js';
import { writeRecords } from '../trace/record-file.js';
import { fingerprinted, TraceFingerprint } from '../trace/trace-fingerprint.js';
import { scalingRecord } from './engine-options.js';
import { runHeader } from './run-header.js';
import { writeJson, type CellSummary, type SweepCell } from './sweep-layout.js';
import { cellSummary } from './sweep-summary.js';

export interface SimCellTask {
  cell: SweepCell;
  /** The sweep directory. */
  dir: string;
  trace: string;
  reader: ReadTraceOptions;
  instances: number;
  preset: string;
  scaling: EngineScaling;
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
  const fingerprint = new TraceFingerprint();
  const reader = readTrace(task.trace, task.reader);
  const result = await simulateStream(fingerprinted(reader, fingerprint), {
    policy: cell.policy as PolicyName,
    instances: task.instances,
    engineState: cell.engine_state,
    preset: task.preset,
    scaling: task.scaling,
  });
  const engine = {
    preset: task.preset,
    engine_scaling: scalingRecord(task.scaling),
    capacity_blocks: result.capacityBlocks,
  };
  const header = runHeader(
    {
      source: 'sim',
      trace: { path: task.trace, fingerprint: fingerprint.digest() },
      policy: cell.policy,
      engine_state: cell.engine_state,
      instances: task.instances,
      mode: 'session',
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
