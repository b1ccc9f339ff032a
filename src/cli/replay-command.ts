/** `kvroute replay`, declared; replay-verb.ts runs it (docs/replay.md). */
import type { Command } from 'commander';

import { example, runs, subcommand, withDefault } from './command-kit.js';
import { addTraceInputOptions } from './trace-options.js';
import { REPLAY_CLI_DEFAULTS } from './defaults/replay-defaults.js';

export function addReplayCommand(program: Command): void {
  const d = REPLAY_CLI_DEFAULTS;
  const replay = subcommand(
    program,
    'replay',
    'drive an OpenAI-compatible endpoint (kvroute serve, vLLM, SGLang, kvroute sim serve) with a trace in real time, recording every request',
  )
    .argument('[IN]', 'the trace file (or give it as --trace IN)')
    .option('--trace <IN>', 'the trace file (required, as --trace or as the operand IN)')
    .option('--target <URL>', 'base URL of the endpoint, e.g. http://127.0.0.1:8000 (required)')
    .option('--records <OUT>', 'write per-request records (MessagePack, docs/records.md)')
    .option(
      '--mode <session|poisson>',
      withDefault("session: the reference experiments' agentic dispatch; poisson: open loop", d.mode),
    )
    .option('--rate <R>', "poisson: requests per second; find-srr: the first trial's rate (default 1)")
    .option('--seed <K>', withDefault('poisson: seed of the arrivals', d.seed))
    .option('--find-srr', 'search the highest poisson rate meeting --slo (bracket, then bisect)')
    .option('--slo <SPEC>', withDefault('find-srr: the SLO, seconds', d.slo))
    .option('--max-trials <N>', withDefault('find-srr: trials at most', d.maxTrials))
    .option('--trial-requests <N>', withDefault('find-srr: requests per trial', d.trialRequests))
    .option('--warm-trials', "find-srr: every trial sends the trace's block ids (default: each trial its own, cold)")
    .option('--speed <X>', withDefault('session: replay trace time X times faster', d.speed))
    .option('--max-requests <N>', 'send the first N requests of the trace only')
    .option('--duration <S>', 'stop sending after S seconds')
    .option('--grace <S>', withDefault('seconds in-flight requests get after a stop', d.grace))
    .option('--connections <N>', withDefault('sockets to the target', d.connections))
    .option('--model <NAME>', withDefault('model name to send', 'the first the target lists at /v1/models'))
    .option('--no-ignore-eos', 'do not send ignore_eos: true (for engines that reject it)')
    .option(
      '--no-hash-ids',
      "do not send the trace's hash_ids: the target keys each request by its prompt (text chunks, or tokens)",
    )
    .option('--engine-state <URL,…>', "scrape these engines' /metrics every second into OUT.engine-state")
    .option(
      '--max-connection-failures <N>',
      withDefault('stop after N consecutive requests without a response', d.maxConnectionFailures),
    )
    .option('--json', 'print the summary as JSON');
  addTraceInputOptions(replay);
  replay.addHelpText(
    'after',
    '\nCtrl-C or SIGTERM stops sending; in-flight requests get --grace seconds, then are recorded as aborted.',
  );
  example(
    replay,
    'kvroute sim serve --instances 1 --port 8101 --speed 10 & sleep 1',
    'kvroute trace synth --sessions 10 -o synth.jsonl',
    'kvroute replay synth.jsonl --target http://127.0.0.1:8101 --records run.msgpack --speed 20',
    'kill $!',
  );
  runs(replay, async () => (await import('./replay-verb.js')).replayVerb);
}
