/** `kvroute state watch`: the engine-state feed in shared memory, as a live table or one JSON reading. */
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';

import { stateError } from '../core/errors.js';
import { FEED_STATUS_REASONS, StateFeedReader, type EngineSnapshot } from '../state/shm-feed.js';
import { integerFlag, UsageError } from './common.js';

export const STATE_USAGE = `  state watch NAME    the engine-state feed /dev/shm/NAME (or a path), one row per published slot
                    --once            one reading, then exit (1 when the feed is missing or malformed)
                    --json            print readings as JSON
                    --interval MS     refresh period of the live table (default 500)`;

export async function stateVerb(args: string[]): Promise<void> {
  const [sub, ...rest] = args;
  if (sub !== 'watch')
    throw new UsageError(`state needs a sub-command: watch${sub === undefined ? '' : `, got ${sub}`}`);
  const { values, positionals } = parseArgs({
    args: rest,
    allowPositionals: true,
    options: { once: { type: 'boolean' }, json: { type: 'boolean' }, interval: { type: 'string' } },
  });
  if (positionals.length !== 1) throw new UsageError('state watch needs one feed NAME (or path)');
  const interval = integerFlag(values, 'interval', 1) ?? 500;
  const warnings: string[] = [];
  const reader = new StateFeedReader(positionals[0]!, { recheckMs: 0, warn: (m) => warnings.push(m) });
  try {
    if (values.once) {
      const { status } = reader;
      if (status !== 'ok')
        throw stateError('ERR_KVROUTE_STATE_FEED', `the feed ${reader.path} ${FEED_STATUS_REASONS[status]}`);
      process.stdout.write(`${values.json ? JSON.stringify(reading(reader)) : table(reader)}\n`);
      return;
    }
    let stop = false;
    const onSignal = () => (stop = true);
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
    while (!stop) {
      reader.refresh(true);
      for (const warning of warnings.splice(0)) process.stderr.write(`${warning}\n`);
      const out = values.json ? JSON.stringify(reading(reader)) : `\u001b[2J\u001b[H${table(reader)}`;
      process.stdout.write(`${out}\n`);
      await sleep(interval);
    }
  } finally {
    reader.close();
  }
}

interface Row {
  slot: number;
  snapshot: EngineSnapshot;
}

function rows(reader: StateFeedReader): Row[] {
  const out: Row[] = [];
  for (let slot = 0; slot < reader.slots; slot++) {
    const snapshot = reader.read(slot);
    if (snapshot !== undefined) out.push({ slot, snapshot });
  }
  return out;
}

/** The issue's JSON reading; the generation is a decimal string (it is 64 bits wide). */
function reading(reader: StateFeedReader) {
  const now = Date.now();
  return {
    generation: reader.generation.toString(),
    instances: rows(reader).map(({ slot, snapshot: s }) => ({
      slot,
      instance: s.instance,
      age_ms: Math.round((now - s.timestampMs) * 10) / 10,
      running: s.running,
      waiting: s.waiting,
      kv_blocks_used: s.kvBlocksUsed,
      kv_blocks_total: s.kvBlocksTotal,
      pending_prefill_tokens: s.pendingPrefillTokens,
      max_prefill_remaining: s.maxPrefillRemaining,
      decode_batch: s.decodeBatch,
      prefix_cache_queries: s.prefixCacheQueries,
      prefix_cache_hits: s.prefixCacheHits,
      unreachable: s.unreachable,
    })),
  };
}

function table(reader: StateFeedReader): string {
  if (reader.status !== 'ok') return `${reader.path}: ${reader.status} (waiting for the feed)`;
  const now = Date.now();
  const head = [
    'slot',
    'instance',
    'age ms',
    'running',
    'waiting',
    'KV used',
    'KV %',
    'prefill',
    'max prefill',
    'decode',
  ];
  const body = rows(reader).map(({ slot, snapshot: s }) => [
    String(slot),
    s.unreachable ? `${s.instance} (unreachable)` : s.instance,
    (now - s.timestampMs).toFixed(0),
    String(s.running),
    String(s.waiting),
    `${s.kvBlocksUsed}/${s.kvBlocksTotal}`,
    s.kvBlocksTotal > 0 ? ((100 * s.kvBlocksUsed) / s.kvBlocksTotal).toFixed(1) : '-',
    String(s.pendingPrefillTokens),
    String(s.maxPrefillRemaining),
    String(s.decodeBatch),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i === 1 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  const title = `${reader.path} · generation ${reader.generation} · ${reader.slots} slots, ${body.length} published`;
  return [title, line(head), ...body.map(line)].join('\n');
}
