/**
 * kvroute/trace: traces: read, write, transform and generate them (src/trace/), and characterize
 * them (src/analysis/). Loads no server.
 */
export { readTrace, type ReadTraceOptions, type TraceReadStats, type TraceReader } from '../trace/read-trace.js';
export { writeTrace, formatTraceLine } from '../trace/write-trace.js';
export { transformTrace, type TransformOptions } from '../trace/transforms.js';
export { synthesizeTrace, SYNTH_DEFAULTS, type SynthOptions, type SynthProgress } from '../trace/synth.js';
export type { ArrivalProcess } from '../trace/synth-arrivals.js';
export { MODEL_PRESETS, kvBytesPerToken, type ModelPreset } from '../trace/model-presets.js';
export type { TraceRequest, TraceFormat } from '../trace/types.js';
export { characterizeTrace, type CharacterizeOptions } from '../analysis/characterize.js';
export type { TraceSummary } from '../analysis/trace-summary.js';
