/**
 * What `kvroute tune` is asked to do (TuneOptions) and what it reports as it goes (TuneCounter,
 * EvaluationNote): the types tune-run.ts runs on and tune-result.ts records, in a file of their
 * own so that neither imports the other.
 */
import type { PolicyName } from '../core/types.js';
import type { FleetGroup } from '../sim/fleet-spec.js';
import type { ReadTraceOptions } from '../trace/read-trace.js';
import type { FlowFlags } from './flow-flags.js';
import type { EngineStateName } from './sweep-layout.js';
import type { Aggregate, ObjectiveName } from './tune-objectives.js';
import type { ParamRange } from './tune-params.js';

export interface TuneOptions {
  traces: readonly string[];
  /** Traces the best point and the defaults are reported on, never chosen by. */
  holdout: readonly string[];
  reader: ReadTraceOptions;
  policy: PolicyName;
  params: readonly ParamRange[];
  /** Points in all (round 1 is samples − refine, or the whole grid). */
  samples: number;
  /** Points of round 2; ignored when round 1 is the grid. */
  refine: number;
  seed: number;
  objective: ObjectiveName;
  aggregate: Aggregate;
  instances: number;
  /** A mixed fleet of `instances` engines (--fleet); absent: uniform. */
  fleet?: FleetGroup[];
  preset: string;
  engineState: EngineStateName;
  /** Flow control in every simulation (--max-in-flight, --flow, --queue-timeout); absent: none. */
  flow?: FlowFlags;
  /** Piscina threads (default: one per core). */
  workers?: number;
  /** argv after `kvroute`, for the result. */
  command: string[];
  /** Kept up to date as simulations are planned and end (a progress line polls it). */
  counter?: TuneCounter;
  /** Called as each simulation ends. */
  onEvaluation?: (counter: Readonly<TuneCounter>, what: EvaluationNote) => void;
}

export interface TuneCounter {
  /** Simulations that ended. */
  done: number;
  /** Simulations planned so far: grows once round 2 and the holdout are known. */
  planned: number;
}

export interface EvaluationNote {
  /** A point's id, or 'defaults'. */
  point: number | 'defaults';
  trace: string;
  value: number;
  wall_s: number;
}
