/**
 * A fleet of simulated vLLM engines in one process: `kvroute sim serve`, and the engines behind
 * the proxy's embedded demo. Engine i listens on `port + i`; with port 0 each engine gets its own
 * free port (tests). Either every engine starts or none stays up.
 */
import { invalidValue } from '../core/errors.js';
import { capacityBlocks, ENGINE_PRESETS, scalePreset, type EngineScaling } from './engine-preset.js';
import { EngineServer } from './engine-server.js';
import { SIM_FLEET_DEFAULTS } from './sim-fleet-defaults.js';

export interface SimFleetOptions {
  /** Engines (default 8). */
  instances?: number;
  /** First port (default 8100); 0 gives every engine a free port. */
  port?: number;
  /** Default 127.0.0.1. */
  host?: string;
  /** Virtual seconds per wall second (default 1). */
  speed?: number;
  /** ENGINE_PRESETS key (default h20-qwen3-coder-30b-a3b). */
  preset?: string;
  /** Multipliers of the preset's prefill cost, decode cost and KV capacity (scalePreset). */
  scaling?: EngineScaling;
  /** Tokens per KV block (default 16, vLLM's). */
  blockSize?: number;
  /** Served model name (default the preset's model). */
  model?: string;
  /** Request bodies above this get 413 (default 64 MiB). */
  maxBodyBytes?: number;
}

export interface SimFleet {
  /** `http://host:port` of each engine, in order. */
  readonly urls: string[];
  readonly engines: EngineServer[];
  /** Stops every engine: running requests are aborted and their connections closed. */
  close(): Promise<void>;
}

export async function startSimFleet(options: SimFleetOptions = {}): Promise<SimFleet> {
  // `??`, not a spread: an option given as undefined takes its default.
  const o = {
    instances: options.instances ?? SIM_FLEET_DEFAULTS.instances,
    port: options.port ?? SIM_FLEET_DEFAULTS.port,
    host: options.host ?? SIM_FLEET_DEFAULTS.host,
    speed: options.speed ?? SIM_FLEET_DEFAULTS.speed,
    preset: options.preset ?? SIM_FLEET_DEFAULTS.preset,
    blockSize: options.blockSize ?? SIM_FLEET_DEFAULTS.blockSize,
  };
  const named = ENGINE_PRESETS[o.preset];
  if (named === undefined)
    throw new RangeError(`unknown engine preset ${o.preset}; known: ${Object.keys(ENGINE_PRESETS).join(', ')}`);
  const preset = scalePreset(named, options.scaling);
  if (o.blockSize > 0 && capacityBlocks(preset, o.blockSize) < 1)
    throw invalidValue(
      'scaling.kvCapacity',
      `large enough for one ${o.blockSize}-token KV block per engine`,
      options.scaling?.kvCapacity,
    );
  if (!(Number.isSafeInteger(o.instances) && o.instances > 0))
    throw new RangeError(`instances must be a positive integer, got ${o.instances}`);
  if (!(Number.isSafeInteger(o.port) && o.port >= 0 && (o.port === 0 || o.port + o.instances - 1 <= 65535)))
    throw new RangeError(`ports ${o.port}..${o.port + o.instances - 1} are not all valid TCP ports`);
  const engines: EngineServer[] = [];
  try {
    for (let index = 0; index < o.instances; index++) {
      engines.push(
        await EngineServer.start({
          index,
          host: o.host,
          port: o.port === 0 ? 0 : o.port + index,
          preset,
          blockSize: o.blockSize,
          speed: o.speed,
          model: options.model ?? preset.model,
          maxBodyBytes: options.maxBodyBytes,
        }),
      );
    }
  } catch (error) {
    await Promise.all(engines.map((engine) => engine.close()));
    throw error;
  }
  return {
    urls: engines.map((engine) => engine.url),
    engines,
    close: async () => {
      await Promise.all(engines.map((engine) => engine.close()));
    },
  };
}
