/**
 * `kvroute sim run | serve | interference | breakeven`, declared; sim-verb.ts runs `run` and
 * `interference`, sim-serve-verb.ts runs `serve`, breakeven-verb.ts runs `breakeven`.
 */
import type { Command } from 'commander';

import { POLICY_NAMES_TEXT } from '../core/policy-spec.js';
import { DEFAULT_ENGINE_PRESET, ENGINE_PRESETS } from '../sim/engine-preset.js';
import { SIM_FLEET_DEFAULTS } from '../sim/sim-fleet-defaults.js';
import { example, runs, subcommand, withDefault } from './command-kit.js';
import { addEngineScalingOptions, addFleetOption } from './engine-options.js';
import { addFlowOptions } from './flow-options.js';
import { addLinkOptions } from './link-options.js';
import { addTraceInputOptions } from './trace-options.js';
import { SIM_RUN_DEFAULTS, SIM_SERVE_DEFAULTS } from './defaults/sim-defaults.js';

export function addSimCommand(program: Command): void {
  const sim = subcommand(program, 'sim', 'simulated engines: sim run, sim serve, sim interference, sim breakeven');
  example(sim, 'kvroute sim run data/mooncake_synthetic_trace.jsonl --policy unified');
  addRun(sim);
  addServe(sim);
  const interference = subcommand(
    sim,
    'interference',
    'the B2 microbench on two engine models: TTFT and TPOT indices of a steady decode load when large prefills land on the same or another engine',
  ).option('--json', 'print the cells as JSON');
  example(interference, 'kvroute sim interference');
  runs(interference, async () => (await import('./sim-verb.js')).interferenceVerb);
  addBreakEven(sim);
}

function addBreakEven(sim: Command): void {
  const breakeven = subcommand(
    sim,
    'breakeven',
    "prefill offload's break-even on the engine model: interference against P→D KV transfer cost for 2k–32k-token prompts, beside the reference experiments' figures, and the smallest prompt where offload pays",
  )
    .option('--decode-batch <D>', withDefault('decoding requests a co-located prefill would stall', 1))
    .option(
      '--preset <NAME>',
      withDefault(`engine model: ${Object.keys(ENGINE_PRESETS).join(', ')}`, DEFAULT_ENGINE_PRESET),
    )
    .option('--json', 'print the table as JSON');
  addLinkOptions(breakeven);
  example(breakeven, 'kvroute sim breakeven --decode-batch 4 --link-gbps 100 --layerwise');
  runs(breakeven, async () => (await import('./breakeven-verb.js')).breakEvenVerb);
}

function addRun(sim: Command): void {
  const d = SIM_RUN_DEFAULTS;
  const run = subcommand(sim, 'run', 'replay a trace in virtual time through the router and N engine models')
    .argument('[IN]', 'the trace file, or - for stdin (or give it as --trace IN)')
    .option('--trace <IN>', 'the trace file, or - for stdin (required, as --trace or as the operand IN)')
    .option('--policy <P>', withDefault(`${POLICY_NAMES_TEXT}; P:KEY=VALUE… sets its tunables`, d.policy))
    .option('--instances <N>', withDefault('engines', d.instances))
    .option(
      '--engine-state <shadow|shm>',
      withDefault("the router sees its shadow counters only, or the engines' true state every 50 ms", d.engineState),
    )
    .option('--preset <NAME>', withDefault(`engine model: ${Object.keys(ENGINE_PRESETS).join(', ')}`, d.preset))
    .option('--rate <R>', 'open-loop Poisson arrivals at R requests/s instead of session-sequential dispatch')
    .option('--seed <K>', withDefault("--rate's and --replica-assign's seed", d.seed))
    .option(
      '--replicas <R>',
      withDefault(
        `independent router replicas over the one fleet (1..${d.maxReplicas}), each seeing only its own dispatches`,
        d.replicas,
      ),
    )
    .option(
      '--replica-assign <random|session>',
      withDefault(
        'which replica routes each request: a seeded draw per request, or a hash of its session',
        d.replicaAssign,
      ),
    )
    .option(
      '--cache-state <own|events>',
      withDefault(
        "each replica's cache belief from its own dispatches, or every engine's KV events fed to every replica",
        d.cacheState,
      ),
    )
    .option(
      '--sync <none|events|load|all>',
      withDefault(
        "what replicas share: every engine's KV events (the NATS event plane), each replica's in-flight load and session placements (the load plane), or both",
        d.sync,
      ),
    )
    .option(
      '--sync-delay <MS>',
      withDefault('virtual milliseconds before a shared change reaches the other replicas', d.syncDelayMs),
    )
    .option(
      '--costs <learned|fixed>',
      withDefault(
        "min_ttft's price of each instance: learned online per instance, or the preset's for all (reproducible)",
        d.costs,
      ),
    )
    .option(
      '--no-session-returns',
      'min_ttft does not count the expected prefill of sessions idle between turns on their instance (default: it does)',
    )
    .option('--records <OUT>', 'write per-request records (MessagePack)')
    .option('--json', 'print the metrics as JSON');
  addFleetOption(run);
  addEngineScalingOptions(run);
  addFlowOptions(run);
  addTraceInputOptions(run);
  example(
    run,
    'kvroute sim run --trace data/mooncake_synthetic_trace.jsonl --policy unified --instances 8',
    'kvroute sim run --trace data/mooncake_synthetic_trace.jsonl --replicas 4 --cache-state events',
    'kvroute sim run --trace data/mooncake_synthetic_trace.jsonl --fleet 4,4:prefill=0.5:decode=0.7',
    'kvroute trace transform data/mooncake_synthetic_trace.jsonl --infer-sessions --tenants noisy=10,q1=1,q2=1 -o tenants.jsonl',
    'kvroute sim run --trace tenants.jsonl --instances 8 --max-in-flight 32',
  );
  runs(run, async () => (await import('./sim-verb.js')).simRunVerb);
}

function addServe(sim: Command): void {
  const d = SIM_FLEET_DEFAULTS;
  const serve = subcommand(sim, 'serve', 'simulated vLLM engines over HTTP (OpenAI API, /metrics), one per port')
    .option('--instances <N>', withDefault('engines', d.instances))
    .option('--port <P>', withDefault('engines on P .. P+N-1 (0: free ports)', d.port))
    .option('--host <H>', withDefault('listen address', d.host))
    .option('--speed <X>', withDefault('run the model X times faster than real time', d.speed))
    .option('--preset <NAME>', withDefault(`engine model: ${Object.keys(ENGINE_PRESETS).join(', ')}`, d.preset))
    .option('--block-size <B>', withDefault('tokens per KV block', d.blockSize))
    .option('--model <NAME>', withDefault('served model name', "the preset's model"))
    .option(
      '--flavor <vllm|sglang>',
      withDefault(
        'speak as vLLM or SGLang: metrics names, KV event shape, health and model routes, error bodies',
        'vllm',
      ),
    )
    .option('--shm <NAME>', "publish each engine's state to the feed /dev/shm/NAME (slot i = engine i)")
    .option('--publish-ms <MS>', withDefault('how often --shm publishes', SIM_SERVE_DEFAULTS.publishMs))
    .option(
      '--kv-events <PORT>',
      "publish KV cache events (vLLM's, or SGLang's with --flavor sglang): engine i's ZeroMQ PUB socket on PORT+i (0: free ports)",
    )
    .option(
      '--kv-events-encoding <E>',
      withDefault(
        'array (vLLM before 2026: positional) or map (maps with type); not with --flavor sglang (one shape)',
        SIM_SERVE_DEFAULTS.kvEventsEncoding,
      ),
    )
    .option('--kv-events-replay <PORT>', "answer KV event replay requests: engine i's ZeroMQ ROUTER on PORT+i")
    .option(
      '--tokenizer <DIR>',
      'tokenize text prompts as vLLM does and cache by token blocks: DIR (tokenizer.json + tokenizer_config.json) or qwen3',
    );
  addFleetOption(serve);
  addEngineScalingOptions(serve);
  addLinkOptions(serve);
  serve.addHelpText(
    'after',
    '\nRuns until SIGINT or SIGTERM; prints one URL per engine on stdout (docs/sim-serve.md).',
  );
  example(serve, 'kvroute sim serve --instances 2 --port 8101 --speed 10');
  example(serve, 'kvroute sim serve --instances 2 --kv-events 5557 --kv-events-replay 5600');
  example(serve, 'kvroute sim serve --fleet 1,1:prefill=0.5 --port 8101 --speed 10');
  runs(serve, async () => {
    const { simServeVerb } = await import('./sim-serve-verb.js');
    return (values) => simServeVerb(values);
  });
}
