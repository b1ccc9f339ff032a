/**
 * What a simulated fleet (`kvroute sim serve`, startSimFleet) uses for each option not given.
 * Apart from sim-fleet.ts so that the command line can show them in its help without loading
 * the engine servers.
 */
import { DEFAULT_ENGINE_PRESET } from './engine-preset.js';

export const SIM_FLEET_DEFAULTS = {
  instances: 8,
  port: 8100,
  host: '127.0.0.1',
  speed: 1,
  preset: DEFAULT_ENGINE_PRESET,
  blockSize: 16,
} as const;
