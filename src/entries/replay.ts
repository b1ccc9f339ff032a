/**
 * kvroute/replay: live replay (src/replay/): drive an OpenAI-compatible endpoint with a trace,
 * recording each request. Loads undici.
 */
export {
  replay,
  loadTrace,
  REPLAY_DEFAULTS,
  type ReplayOptions,
  type ReplayResult,
  type StopCause,
} from '../replay/replay.js';
export { findSrr, parseSlo, type SloTerm, type SrrOptions, type SrrResult, type Trial } from '../replay/find-srr.js';
export type { DispatchMode } from '../replay/dispatcher.js';
export type { ReplayTally } from '../replay/replay-tally.js';
export { ReplayError } from '../replay/target-check.js';
