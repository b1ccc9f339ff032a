/** `kvroute state watch`: the engine-state feed in shared memory, as a live table or one JSON reading. */
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';

import { durationScale, formatCount, formatIn } from '../analysis/format-units.js';
import { stateError } from '../core/errors.js';
import { publishEngineMetrics } from '../state/metrics-publisher.js';
import { FEED_STATUS_REASONS, StateFeedReader, feedPath, type EngineSnapshot } from '../state/shm-feed.js';
import { integerFlag, UsageError } from './common.js';
import { freshnessVerb, STATE_FRESHNESS_USAGE } from './state-freshness-verb.js';

export const STATE_USAGE = `  state watch NAME    the engine-state feed /dev/shm/NAME (or a path), one row per published slot
                    --once            one reading, then exit (1 when the feed is missing or malformed)
                    --json            print readings as JSON
                    --interval MS     refresh period of the live table (default 500)
  state publish       scrape engines' /metrics (vLLM or SGLang) into the feed, slot i = engine i
                    --engines URL[,URL…]  --shm NAME
                    --interval MS     scrape period (default 50)
                    --timeout MS      an engine slower than this is marked unreachable (default 1000)
                    --rounds N        stop after N rounds (default: until SIGINT or SIGTERM)
${STATE_FRESHNESS_USAGE}`;

export async function stateVerb(args: string[]): Promise<void> {
  const [sub, ...rest] = args;
  if (sub === 'publish') return publishVerb(rest);
  if (sub === 'freshness') return freshnessVerb(rest);
  if (sub !== 'watch')
    throw new UsageError(
      `state needs a sub-command: watch, publish or freshness${sub === undefined ? '' : `, got ${sub}`}`,
    );
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

/** The live table: a header, a row of units, one row per published slot (ages in one unit). */
function table(reader: StateFeedReader): string {
  if (reader.status !== 'ok') return `${reader.path}: ${reader.status} (waiting for the feed)`;
  const now = Date.now();
  const published = rows(reader);
  const age = durationScale(published.map(({ snapshot: s }) => (now - s.timestampMs) / 1000));
  const head = ['slot', 'instance', 'age', 'running', 'waiting', 'KV used', 'KV', 'prefill', 'max prefill', 'decode'];
  const units = ['', '', age.unit, 'requests', 'requests', 'blocks', '%', 'tokens', 'tokens', 'sequences'];
  const body = published.map(({ slot, snapshot: s }) => [
    String(slot),
    s.unreachable ? `${s.instance} (unreachable)` : s.instance,
    formatIn((now - s.timestampMs) / 1000, age, 1),
    formatCount(s.running),
    formatCount(s.waiting),
    `${formatCount(s.kvBlocksUsed)}/${formatCount(s.kvBlocksTotal)}`,
    s.kvBlocksTotal > 0 ? ((100 * s.kvBlocksUsed) / s.kvBlocksTotal).toFixed(1) : '-',
    formatCount(s.pendingPrefillTokens),
    formatCount(s.maxPrefillRemaining),
    formatCount(s.decodeBatch),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, units[i]!.length, ...body.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i === 1 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  const title = `${reader.path} · generation ${reader.generation} · ${reader.slots} slots, ${body.length} published`;
  return [title, line(head), line(units), ...body.map(line)].join('\n');
}

async function publishVerb(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    allowPositionals: false,
    options: {
      engines: { type: 'string' },
      shm: { type: 'string' },
      interval: { type: 'string' },
      timeout: { type: 'string' },
      rounds: { type: 'string' },
    },
  });
  if (values.engines === undefined) throw new UsageError('state publish needs --engines URL[,URL…]');
  if (values.shm === undefined) throw new UsageError('state publish needs --shm NAME');
  const engines = values.engines.split(',').filter((url) => url !== '');
  for (const url of engines)
    if (!URL.canParse(url) || !['http:', 'https:'].includes(new URL(url).protocol))
      throw new UsageError(`--engines must be http(s) URLs, got ${url}`);
  if (engines.length === 0) throw new UsageError('--engines must name at least one URL');
  const controller = new AbortController();
  const stop = () => controller.abort();
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  const rounds = integerFlag(values, 'rounds', 1);
  process.stderr.write(`kvroute state publish: ${engines.length} engines into ${feedPath(values.shm)}\n`);
  try {
    await publishEngineMetrics({
      engines,
      shm: values.shm,
      intervalMs: integerFlag(values, 'interval', 1) ?? 50,
      timeoutMs: integerFlag(values, 'timeout', 1) ?? 1_000,
      ...(rounds === undefined ? {} : { rounds }),
      signal: controller.signal,
      onChange: (engine, reachable, why) =>
        process.stderr.write(
          `kvroute state publish: ${engine} ${reachable ? 'answers again' : `unreachable: ${why}`}\n`,
        ),
    });
  } finally {
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
  }
}
