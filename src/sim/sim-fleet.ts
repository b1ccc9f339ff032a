/**
 * A fleet of simulated vLLM engines in one process: `kvroute sim serve`, and the engines behind
 * the proxy's embedded demo. Engine i listens on `port + i`; with port 0 each engine gets its own
 * free port (tests). Either every engine starts or none stays up.
 *
 * KV cache events (docs/kv-events.md): with `kvEvents`, engine i publishes on `kvEvents.port + i`
 * and, with `replayPort`, answers replay requests on `replayPort + i` (port 0: free ports).
 *
 * Disaggregated prefill (docs/sim-serve.md): the engines are each other's KV transfer peers
 * (KvTransferPeers), over one link timed by `transferCost` (the offload cost model's defaults).
 */
import { invalidValue } from '../core/errors.js';
import type { OffloadCostModel } from '../core/offload-cost.js';
import { capacityBlocks, ENGINE_PRESETS, scalePreset, type EngineScaling } from './engine-preset.js';
import type { PromptTokenizer } from './completion-request.js';
import { EngineServer } from './engine-server.js';
import { checkFleetOf, fleetPresets, fleetSize, uniformFleet, type FleetGroup } from './fleet-spec.js';
import { KvTransferPeers } from './kv-peers.js';
import type { EngineFlavor } from './engine-flavor.js';
import type { KvEventEncoding } from './kv-event-encoding.js';
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
  /**
   * A mixed fleet (fleet-spec.ts): engine i runs its group's factors on top of `scaling`; the
   * groups' counts give the engines (an `instances` beside it must agree).
   */
  fleet?: FleetGroup[];
  /** Tokens per KV block (default 16, vLLM's). */
  blockSize?: number;
  /** Served model name (default the preset's model). */
  model?: string;
  /** Request bodies above this get 413 (default 64 MiB). */
  maxBodyBytes?: number;
  /** Publish KV cache events; none when absent. */
  kvEvents?: SimFleetKvEvents;
  /** Every engine tokenizes text prompts with it and caches them by token blocks. */
  tokenizer?: PromptTokenizer;
  /** The P→D KV link of disaggregated prefill (linkGbps, warmOverheadMs, coldPenaltyMs, layerwise, …). */
  transferCost?: Partial<OffloadCostModel>;
  /** Engine seconds prefilled KV waits for its decode engine before it is freed (default 480, vLLM's). */
  kvHoldTimeoutS?: number;
  /** What every engine speaks as (engine-flavor.ts; default vllm). */
  flavor?: EngineFlavor;
}

export interface SimFleetKvEvents {
  /** Engine i's PUB socket binds `tcp://HOST:(port + i)`; 0 gives each a free port. */
  port: number;
  /** Engine i's replay ROUTER binds `tcp://HOST:(replayPort + i)`; none when absent. */
  replayPort?: number;
  /** Default `map` for vLLM engines; SGLang engines always use `sglang`. */
  encoding?: KvEventEncoding;
  /** Messages each engine keeps for replay (default 10,000). */
  bufferSteps?: number;
}

/** `tcp://host:port`, a free port for 0, IPv6 hosts in brackets. */
function zmqEndpoint(host: string, port: number): string {
  return `tcp://${host.includes(':') ? `[${host}]` : host}:${port === 0 ? '*' : port}`;
}

function checkPortRange(name: string, port: number, instances: number): void {
  if (!(Number.isSafeInteger(port) && port >= 0 && (port === 0 || port + instances - 1 <= 65535)))
    throw new RangeError(`${name} ${port}..${port + instances - 1} are not all valid TCP ports`);
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
    instances:
      options.instances ?? (options.fleet === undefined ? SIM_FLEET_DEFAULTS.instances : fleetSize(options.fleet)),
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
  if (options.fleet !== undefined) checkFleetOf(options.fleet, o.instances);
  const groupPresets = fleetPresets(
    preset,
    (options.fleet ?? uniformFleet(1)).map((g) => ({ ...g, count: 1 })),
  );
  if (o.blockSize > 0 && groupPresets.some((p) => capacityBlocks(p, o.blockSize) < 1))
    throw invalidValue(
      'scaling.kvCapacity',
      `large enough for one ${o.blockSize}-token KV block per engine`,
      options.scaling?.kvCapacity,
    );
  if (!(Number.isSafeInteger(o.instances) && o.instances > 0))
    throw new RangeError(`instances must be a positive integer, got ${o.instances}`);
  checkPortRange('ports', o.port, o.instances);
  const presets = fleetPresets(preset, options.fleet ?? uniformFleet(o.instances));
  const kv = options.kvEvents;
  if (kv !== undefined) {
    checkPortRange('kv event ports', kv.port, o.instances);
    if (kv.replayPort !== undefined) checkPortRange('kv event replay ports', kv.replayPort, o.instances);
  }
  const offset = (port: number, index: number) => (port === 0 ? 0 : port + index);
  const peers = new KvTransferPeers(options.transferCost);
  const holdTimeout = options.kvHoldTimeoutS;
  if (holdTimeout !== undefined && !(Number.isFinite(holdTimeout) && holdTimeout > 0))
    throw invalidValue('kvHoldTimeoutS', 'a finite number > 0', holdTimeout);
  const engines: EngineServer[] = [];
  try {
    for (let index = 0; index < o.instances; index++) {
      engines.push(
        await EngineServer.start({
          index,
          host: o.host,
          port: o.port === 0 ? 0 : o.port + index,
          preset: presets[index]!,
          blockSize: o.blockSize,
          speed: o.speed,
          model: options.model ?? preset.model,
          maxBodyBytes: options.maxBodyBytes,
          peers,
          ...(holdTimeout === undefined ? {} : { kvHoldTimeoutS: holdTimeout }),
          ...(options.flavor === undefined ? {} : { flavor: options.flavor }),
          ...(options.tokenizer === undefined ? {} : { tokenizer: options.tokenizer }),
          ...(kv === undefined
            ? {}
            : {
                kvEvents: {
                  endpoint: zmqEndpoint(o.host, offset(kv.port, index)),
                  ...(kv.replayPort === undefined
                    ? {}
                    : { replayEndpoint: zmqEndpoint(o.host, offset(kv.replayPort, index)) }),
                  encoding: options.flavor === 'sglang' ? 'sglang' : (kv.encoding ?? 'map'),
                  ...(kv.bufferSteps === undefined ? {} : { bufferSteps: kv.bufferSteps }),
                },
              }),
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
