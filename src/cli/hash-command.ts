/** `kvroute hash`, declared; hash-verb.ts runs it. */
import type { Command } from 'commander';

import { example, runs, subcommand, withDefault } from './command-kit.js';
import { HASH_DEFAULTS } from './defaults/hash-defaults.js';

export function addHashCommand(program: Command): void {
  const hash = subcommand(program, 'hash', 'print the chained block ids the router computes for a prompt')
    .argument(
      '[FILE]',
      'plain text, or an OpenAI request body ({"messages": [...]} or {"prompt": "..."}); - or none: stdin',
    )
    .option('--chunk-bytes <N>', withDefault('bytes per block', HASH_DEFAULTS.chunkBytes))
    .option('--json', 'print {"bytes", "chunkBytes", "ids": ["<u64>", ...]}');
  example(hash, `echo "hello world" | kvroute hash --chunk-bytes 4`);
  runs(hash, async () => (await import('./hash-verb.js')).hashVerb);
}
