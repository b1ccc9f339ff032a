/**
 * `kvroute state watch` (the engine-state feed in shared memory, as a live table or one JSON
 * reading) and `kvroute state publish`, declared in state-command.ts.
 */
import { rmSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

import { durationScale, formatCount, formatIn } from '../analysis/format-units.js';
import { stateError } from '../core/errors.js';
import { publishEngineMetrics } from '../state/metrics-publisher.js';
import { FEED_STATUS_REASONS, StateFeedReader, feedPath, type EngineSnapshot } from '../state/shm-feed.js';
import { counted } from './counted.js';
import { integerFlag, stringFlag, UsageError, type OptionValues } from './common.js';
import { STATE_DEFAULTS } from './defaults/state-defaults.js';

export async function watchVerb(values: OptionValues, [name]: string[]): Promise<void> {
  const interval = integerFlag(values, 'interval', 1) ?? STATE_DEFAULTS.watchIntervalMs;
  const warnings: string[] = [];
  const reader = new StateFeedReader(name!, { recheckMs: 0, warn: (m) => warnings.push(m) });
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

export async function publishVerb(values: OptionValues): Promise<void> {
  const list = stringFlag(values, 'engines');
  const shm = stringFlag(values, 'shm');
  if (list === undefined) throw new UsageError('state publish needs --engines URL[,URL…]');
  if (shm === undefined) throw new UsageError('state publish needs --shm NAME');
  const engines = list.split(',').filter((url) => url !== '');
  for (const url of engines)
    if (!URL.canParse(url) || !['http:', 'https:'].includes(new URL(url).protocol))
      throw new UsageError(`--engines must be http(s) URLs, got ${url}`);
  if (engines.length === 0) throw new UsageError('--engines must name at least one URL');
  const controller = new AbortController();
  const stop = () => controller.abort();
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  const rounds = integerFlag(values, 'rounds', 1);
  process.stderr.write(`kvroute state publish: ${counted(engines.length, 'engine')} into ${feedPath(shm)}\n`);
  try {
    await publishEngineMetrics({
      engines,
      shm,
      intervalMs: integerFlag(values, 'interval', 1) ?? STATE_DEFAULTS.publishIntervalMs,
      timeoutMs: integerFlag(values, 'timeout', 1) ?? STATE_DEFAULTS.publishTimeoutMs,
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
  // Stopped (not run out of --rounds): the feed is this process's, and nobody updates it now.
  if (controller.signal.aborted) {
    rmSync(feedPath(shm), { force: true });
    process.stderr.write(`kvroute state publish: stopped; removed ${feedPath(shm)}\n`);
  }
}
