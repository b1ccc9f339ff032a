/**
 * `--max-in-flight N [--flow FILE] [--queue-timeout MS]` (declared in flow-options.ts) read back
 * for `sim run`, `sweep` and `tune`: the simulator's flow options and the fields a run header,
 * sweep.json or a tune result records them by. Every refusal is a UsageError naming its flag
 * (a bad flow file also names the file and the key), made before any simulation runs.
 */
import type { SimFlowOptions } from '../sim/sim-flow.js';
import { integerFlag, stringFlag, UsageError, type OptionValues } from './common.js';
import { flowConfigFrom } from './flow-file.js';

/** How a run records its flow control (run headers, `sim run --json`, sweep.json, tune results). */
export interface FlowFields {
  max_in_flight: number;
  /** The --flow file as given. */
  file?: string;
  queue_timeout_ms?: number;
}

export interface FlowFlags {
  /**
   * What SimulationOptions.flow takes. Plain data (the resolved FlowConfig holds numbers,
   * strings, arrays and Infinity), so it crosses into a Piscina worker by structured clone
   * intact; the simulator resolves the config again there, which accepts a resolved one.
   */
  options: SimFlowOptions;
  fields: FlowFields;
}

/** The flags as flow options; undefined without --max-in-flight (then --flow and --queue-timeout are refused). */
export function flowFlags(values: OptionValues): FlowFlags | undefined {
  const maxInFlight = integerFlag(values, 'max-in-flight', 1);
  const file = stringFlag(values, 'flow');
  const queueTimeoutMs = integerFlag(values, 'queue-timeout', 1);
  if (maxInFlight === undefined) {
    if (file !== undefined || queueTimeoutMs !== undefined)
      throw new UsageError('--flow and --queue-timeout need --max-in-flight N: flow control queues only past a limit');
    return undefined;
  }
  const config = file === undefined ? undefined : flowConfigFrom(file, '--flow', (message) => new UsageError(message));
  return {
    options: {
      maxInFlight,
      ...(config === undefined ? {} : { config }),
      ...(queueTimeoutMs === undefined ? {} : { queueTimeoutMs }),
    },
    fields: {
      max_in_flight: maxInFlight,
      ...(file === undefined ? {} : { file }),
      ...(queueTimeoutMs === undefined ? {} : { queue_timeout_ms: queueTimeoutMs }),
    },
  };
}
