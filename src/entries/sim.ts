/**
 * kvroute/sim: simulated vLLM engines over HTTP (src/sim/), for demos and tests of anything
 * OpenAI-shaped. Loads the HTTP server stack.
 */
export { startSimFleet, type SimFleet, type SimFleetOptions } from '../sim/sim-fleet.js';
export type { EngineScaling } from '../sim/engine-preset.js';
export { parseFleet, formatFleet, FleetSpecError, type FleetGroup } from '../sim/fleet-spec.js';
