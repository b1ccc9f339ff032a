/** `kvroute sim serve`: N simulated vLLM engines over HTTP until SIGINT or SIGTERM (docs/sim-serve.md). */
import { parseArgs } from 'node:util';

import { ENGINE_PRESETS } from '../sim/engine-preset.js';
import { startSimFleet } from '../sim/sim-fleet.js';
import { SIM_FLEET_DEFAULTS } from '../sim/sim-fleet-defaults.js';
import { choiceFlag, integerFlag, numberFlag, untilStopped, UsageError } from './common.js';
import { publishFleetState } from './fleet-feed.js';

export const SIM_SERVE_USAGE = `  sim serve           simulated vLLM engines over HTTP (OpenAI API, /metrics), one per port
                    --instances N     engines (default ${SIM_FLEET_DEFAULTS.instances})
                    --port P          engines on P .. P+N-1 (default ${SIM_FLEET_DEFAULTS.port}; 0: free ports)
                    --host H          listen address (default ${SIM_FLEET_DEFAULTS.host})
                    --speed X         run the model X times faster than real time (default 1)
                    --preset NAME     ${Object.keys(ENGINE_PRESETS).join(', ')}
                    --block-size B    tokens per KV block (default ${SIM_FLEET_DEFAULTS.blockSize})
                    --model NAME      served model name (default the preset's model)
                    --shm NAME        publish each engine's state to the feed /dev/shm/NAME (slot i =
                                      engine i) every --publish-ms (default 50)`;

export interface SimServeHooks {
  /** Stops the fleet when aborted, besides SIGINT and SIGTERM. */
  signal?: AbortSignal;
}

export async function simServeVerb(args: string[], hooks: SimServeHooks = {}): Promise<void> {
  const { values } = parseArgs({
    args,
    allowPositionals: false,
    options: {
      instances: { type: 'string' },
      port: { type: 'string' },
      host: { type: 'string' },
      speed: { type: 'string' },
      preset: { type: 'string' },
      'block-size': { type: 'string' },
      model: { type: 'string' },
      shm: { type: 'string' },
      'publish-ms': { type: 'string' },
    },
  });
  const instances = integerFlag(values, 'instances', 1);
  const port = integerFlag(values, 'port', 0);
  if (port !== undefined && port !== 0 && port + (instances ?? SIM_FLEET_DEFAULTS.instances) - 1 > 65535)
    throw new UsageError(
      `--port ${port} leaves no room for ${instances ?? SIM_FLEET_DEFAULTS.instances} engines below 65536`,
    );
  if (values.model === '') throw new UsageError('--model must not be empty');
  const fleet = await startSimFleet({
    instances,
    port,
    host: values.host,
    speed: numberFlag(values, 'speed'),
    preset: choiceFlag(values, 'preset', Object.keys(ENGINE_PRESETS)),
    blockSize: integerFlag(values, 'block-size', 1),
    model: values.model,
  }).catch((error: NodeJS.ErrnoException) => {
    if (['EADDRINUSE', 'EACCES', 'EADDRNOTAVAIL', 'ENOTFOUND'].includes(error.code ?? ''))
      throw new UsageError(`cannot listen: ${error.message}`);
    throw error;
  });
  const engine = fleet.engines[0]!;
  process.stderr.write(
    `kvroute sim serve: ${fleet.urls.length} engines · model ${engine.model} · speed ${engine.realtime.speed}× · max_model_len ${engine.maxModelLen} · Ctrl-C stops\n`,
  );
  process.stdout.write(`${fleet.urls.join('\n')}\n`);
  const feed =
    values.shm === undefined
      ? undefined
      : publishFleetState(fleet, values.shm, integerFlag(values, 'publish-ms', 1) ?? 50);
  if (feed !== undefined) process.stderr.write(`kvroute sim serve: publishing engine state to ${feed.path}\n`);
  await untilStopped(hooks.signal);
  feed?.stop();
  await fleet.close();
}
