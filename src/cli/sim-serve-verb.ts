/**
 * `kvroute sim serve` (declared in sim-command.ts): N simulated vLLM (or SGLang) engines over HTTP until SIGINT
 * or SIGTERM (docs/sim-serve.md).
 */
import { describeScaling, ENGINE_PRESETS, isUnscaled } from '../sim/engine-preset.js';
import type { PromptTokenizer } from '../sim/completion-request.js';
import { ENGINE_FLAVORS, type EngineFlavor } from '../sim/engine-flavor.js';
import { KV_EVENT_ENCODINGS } from '../sim/kv-event-encoding.js';
import type { TokenizerPool } from '../tokenize/tokenizer-pool.js';
import { startSimFleet, type SimFleet, type SimFleetKvEvents } from '../sim/sim-fleet.js';
import { SIM_FLEET_DEFAULTS } from '../sim/sim-fleet-defaults.js';
import {
  choiceFlag,
  integerFlag,
  numberFlag,
  stringFlag,
  untilStopped,
  UsageError,
  type OptionValues,
} from './common.js';
import { counted } from './counted.js';
import { engineScalingFlags } from './engine-options.js';
import { fleetFlags, fleetRecord } from './fleet-options.js';
import { describeLink, linkFlags } from './link-options.js';
import { SIM_SERVE_DEFAULTS } from './defaults/sim-defaults.js';
import { publishFleetState } from './fleet-feed.js';

export interface SimServeHooks {
  /** Stops the fleet when aborted, besides SIGINT and SIGTERM. */
  signal?: AbortSignal;
}

export async function simServeVerb(values: OptionValues, hooks: SimServeHooks = {}): Promise<void> {
  const given = fleetFlags(values, SIM_FLEET_DEFAULTS.instances);
  const instances = given.fleet === undefined ? integerFlag(values, 'instances', 1) : given.instances;
  const port = integerFlag(values, 'port', 0);
  if (port !== undefined && port !== 0 && port + (instances ?? SIM_FLEET_DEFAULTS.instances) - 1 > 65535)
    throw new UsageError(
      `--port ${port} leaves no room for ${instances ?? SIM_FLEET_DEFAULTS.instances} engines below 65536`,
    );
  const model = stringFlag(values, 'model');
  if (model === '') throw new UsageError('--model must not be empty');
  const scaling = engineScalingFlags(values);
  const link = linkFlags(values);
  const flavor = choiceFlag(values, 'flavor', ENGINE_FLAVORS) ?? 'vllm';
  const kvEvents = kvEventFlags(values, instances ?? SIM_FLEET_DEFAULTS.instances, flavor);
  const tokenizerDir = stringFlag(values, 'tokenizer');
  const pool = tokenizerDir === undefined ? undefined : await openTokenizer(tokenizerDir);
  const fleet = await startSimFleet({
    instances,
    port,
    host: stringFlag(values, 'host'),
    speed: numberFlag(values, 'speed'),
    preset: choiceFlag(values, 'preset', Object.keys(ENGINE_PRESETS)),
    blockSize: integerFlag(values, 'block-size', 1),
    model,
    scaling,
    ...(given.fleet === undefined ? {} : { fleet: given.fleet }),
    transferCost: link,
    ...(kvEvents === undefined ? {} : { kvEvents }),
    flavor,
    ...(pool === undefined ? {} : { tokenizer: poolTokenizer(pool) }),
  }).catch(async (error: NodeJS.ErrnoException) => {
    await pool?.close();
    if (['EADDRINUSE', 'EACCES', 'EADDRNOTAVAIL', 'ENOTFOUND'].includes(error.code ?? ''))
      throw new UsageError(`cannot listen: ${error.message}`);
    throw error;
  });
  if (pool !== undefined)
    process.stderr.write(`kvroute sim serve: tokenizing with ${tokenizerDir}; caching by token blocks\n`);
  const engine = fleet.engines[0]!;
  const scaled = isUnscaled(scaling) ? '' : ` · ${describeScaling(scaling)}`;
  const mixed = fleetRecord(given.fleet).fleet;
  const fleetText = mixed === undefined ? '' : ` (fleet ${mixed})`;
  const maxModelLen = Math.min(...fleet.engines.map((e) => e.maxModelLen));
  const linked = Object.keys(link).length === 0 ? '' : ` · KV link ${describeLink(link)}`;
  process.stderr.write(
    `kvroute sim serve: ${counted(fleet.urls.length, flavor === 'sglang' ? 'SGLang engine' : 'engine')}${fleetText} · model ${engine.model} · speed ${engine.realtime.speed}×${scaled}${linked} · max_model_len ${maxModelLen} · Ctrl-C stops\n`,
  );
  process.stdout.write(`${fleet.urls.join('\n')}\n`);
  if (kvEvents !== undefined) printKvEndpoints(fleet, kvEvents);
  const shm = stringFlag(values, 'shm');
  const publishMs = integerFlag(values, 'publish-ms', 1) ?? SIM_SERVE_DEFAULTS.publishMs;
  const feed = shm === undefined ? undefined : publishFleetState(fleet, shm, publishMs);
  if (feed !== undefined) process.stderr.write(`kvroute sim serve: publishing engine state to ${feed.path}\n`);
  await untilStopped(hooks.signal);
  feed?.stop();
  await fleet.close();
  await pool?.close();
}

/** The engines' tokenizer (one pool for the fleet, `*` for its model); a load failure names the file. */
async function openTokenizer(dir: string): Promise<TokenizerPool> {
  if (dir === '') throw new UsageError('--tokenizer must be a directory or qwen3');
  try {
    // Loaded only with --tokenizer: the pool brings worker threads and the tokenizer libraries.
    const { TokenizerPool } = await import('../tokenize/tokenizer-pool.js');
    return await TokenizerPool.open({ tokenizers: { [ANY_MODEL]: dir } });
  } catch (error) {
    throw new UsageError(`--tokenizer: ${(error as Error).message}`);
  }
}

const ANY_MODEL = '*';

function poolTokenizer(pool: TokenizerPool): PromptTokenizer {
  return (input) =>
    input.kind === 'chat'
      ? pool.tokenizeChat(ANY_MODEL, input.messages, input.body, input.session)
      : pool.tokenizeText(ANY_MODEL, input.text);
}

/** `--kv-events PORT [--kv-events-encoding E] [--kv-events-replay PORT]`, checked; undefined without `--kv-events`. */
function kvEventFlags(values: OptionValues, instances: number, flavor: EngineFlavor): SimFleetKvEvents | undefined {
  const port = portBaseFlag(values, 'kv-events', instances);
  const replayPort = portBaseFlag(values, 'kv-events-replay', instances);
  const encoding = choiceFlag(values, 'kv-events-encoding', KV_EVENT_ENCODINGS);
  if (encoding !== undefined && flavor === 'sglang')
    throw new UsageError("--kv-events-encoding is a vLLM choice; --flavor sglang publishes SGLang's one shape");
  if (port === undefined) {
    for (const [flag, given] of [
      ['kv-events-encoding', encoding],
      ['kv-events-replay', replayPort],
    ] as const)
      if (given !== undefined) throw new UsageError(`--${flag} needs --kv-events PORT`);
    return undefined;
  }
  return {
    port,
    encoding: flavor === 'sglang' ? 'sglang' : (encoding ?? SIM_SERVE_DEFAULTS.kvEventsEncoding),
    ...(replayPort === undefined ? {} : { replayPort }),
  };
}

/** A first port for `instances` consecutive ones (0: free ports). */
function portBaseFlag(values: OptionValues, name: string, instances: number): number | undefined {
  const port = integerFlag(values, name, 0);
  if (port !== undefined && port > 0 && port + instances - 1 > 65535)
    throw new UsageError(`--${name} ${port} leaves no room for ${instances} engines below 65536`);
  return port;
}

/** One stderr line per engine: where its events are published, and replayed. */
function printKvEndpoints(fleet: SimFleet, kv: SimFleetKvEvents): void {
  fleet.engines.forEach((engine, index) => {
    const publisher = engine.kvEventPublisher!;
    const replay = publisher.replayEndpoint === undefined ? '' : ` · replay ${publisher.replayEndpoint}`;
    process.stderr.write(
      `kvroute sim serve: engine ${index} kv events ${publisher.endpoint} (${kv.encoding ?? 'map'})${replay}\n`,
    );
  });
}
