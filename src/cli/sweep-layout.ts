/**
 * What `kvroute sweep` writes into its --out directory (docs/sweep.md; `kvroute report` reads
 * exactly this): the cells of a (policy × engine state) sweep, their ids and file names, and the
 * directory checks. sweep.json is written last, atomically, so it never names a missing file.
 */
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';

import type { RunMetrics } from '../analysis/run-metrics.js';
import type { EngineScalingRecord } from '../trace/records.js';
import { UsageError } from './common.js';
import type { FlowFields } from './flow-flags.js';

export const ENGINE_STATES = ['shadow', 'shm'] as const;
export type EngineStateName = (typeof ENGINE_STATES)[number];
export type CellMode = 'sim' | 'live' | 'backends';

export interface SweepCell {
  /** Filesystem-safe: `unified+A+B` on shm is `unified_A_B-shm`. */
  id: string;
  policy: string;
  engine_state: EngineStateName;
  mode: CellMode;
  /** Paths relative to the sweep directory. */
  records: string;
  summary: string;
}

/**
 * The engine model a cell ran on: the preset, its multipliers (all 1 when unperturbed) and,
 * for simulated engines, each engine's KV capacity in blocks. Not recorded for --backends.
 */
export interface EngineFacts {
  preset: string;
  engine_scaling: EngineScalingRecord;
  capacity_blocks?: number;
  /** A mixed fleet's spec (docs/engine-model.md#mixed-fleets); absent for a uniform one. */
  fleet?: string;
  /** With `fleet`: each group's KV blocks per engine (capacity_blocks is the router's). */
  fleet_capacity_blocks?: number[];
}

/** DIR/sweep.json. */
export interface SweepManifest {
  format: 'kvroute-sweep';
  version: 1;
  trace: { path: string; fingerprint: string };
  /** The simulated engines' preset and multipliers (absent for --backends, and in older sweeps). */
  preset?: string;
  engine_scaling?: EngineScalingRecord;
  /** A mixed fleet's spec (--fleet; absent for a uniform fleet, and in older sweeps). */
  fleet?: string;
  /** How min_ttft priced each instance in simulated cells (--costs; absent in older sweeps: fixed). */
  costs?: string;
  /** Whether simulated cells counted sessions idle between turns (--no-session-returns: false); absent in older sweeps: false. */
  session_returns?: boolean;
  /** Flow control in simulated cells (--max-in-flight, --flow, --queue-timeout); absent: none. */
  flow?: FlowFields;
  /** argv after `kvroute`. */
  command: string[];
  kvroute_version: string;
  /** ISO 8601. */
  started_at: string;
  cells: SweepCell[];
  trace_summary: 'trace-summary.json';
  interference: 'interference.json';
  tables: 'tables.md';
}

/** DIR/cells/<id>/summary.json: what `kvroute sim run --json` prints (extended by sweep-summary.ts). */
export interface CellSummary extends RunMetrics, Partial<EngineFacts> {
  makespan_s: number;
  preemptions: number;
  evictions: number;
  [extension: string]: unknown;
}

/** The cell id of (policy, engine state): every character outside [A-Za-z0-9_.] becomes `_`. */
export function cellId(policy: string, engineState: string): string {
  return `${policy.replace(/[^A-Za-z0-9_.]/g, '_')}-${engineState}`;
}

/** Every (policy × engine state) cell, policy-major, in the order given. */
export function planCells(policies: readonly string[], engineStates: readonly EngineStateName[], mode: CellMode) {
  const cells: SweepCell[] = [];
  for (const policy of policies)
    for (const engineState of engineStates) {
      const id = cellId(policy, engineState);
      cells.push({
        id,
        policy,
        engine_state: engineState,
        mode,
        records: `cells/${id}/records.msgpack`,
        summary: `cells/${id}/summary.json`,
      });
    }
  return cells;
}

/**
 * Makes `dir` ready for a sweep: refuses one that exists and holds anything unless `force`
 * (then removes the previous sweep.json first, so an interrupted sweep never leaves an old
 * manifest over new cells), and creates each cell's directory. A directory that cannot be
 * created (its parent must exist) is a UsageError naming it.
 */
export function prepareOutDir(dir: string, cells: readonly SweepCell[], force: boolean): void {
  if (existsSync(dir)) {
    if (!statSync(dir).isDirectory()) throw new UsageError(`--out ${dir} exists and is not a directory`);
    if (readdirSync(dir).length > 0) {
      if (!force) throw new UsageError(refusal(dir));
      rmSync(join(dir, 'sweep.json'), { force: true });
      rmSync(join(dir, 'cells'), { recursive: true, force: true });
    }
  }
  // Non-recursive on purpose: Node's recursive mkdirSync spins forever under /proc.
  try {
    if (!existsSync(dir)) mkdirSync(dir);
    mkdirSync(join(dir, 'cells'));
    for (const cell of cells) mkdirSync(join(dir, 'cells', cell.id));
  } catch (error) {
    throw new UsageError(`--out ${dir} is not writable: ${(error as NodeJS.ErrnoException).code ?? String(error)}`);
  }
}

/** Why `dir` is refused without --force: an interrupted sweep (cells, no manifest) says so. */
function refusal(dir: string): string {
  if (existsSync(join(dir, 'cells')) && !existsSync(join(dir, 'sweep.json')))
    return `--out ${dir} holds an interrupted sweep (cells/ but no sweep.json): add --force to remove it and run the sweep again, or remove ${dir}`;
  return `--out ${dir} exists and is not empty (--force removes its previous sweep and reuses it)`;
}

/** Writes `text` to `path` through a temporary name beside it, so readers never see half a file. */
export function writeAtomically(path: string, text: string): void {
  const temporary = join(dirname(path), `.${basename(path)}.${process.pid}.tmp`);
  try {
    writeFileSync(temporary, text);
    renameSync(temporary, path);
  } catch (error) {
    rmSync(temporary, { force: true });
    throw error;
  }
}

export const writeJson = (path: string, value: unknown): void => writeAtomically(path, `${JSON.stringify(value)}\n`);
