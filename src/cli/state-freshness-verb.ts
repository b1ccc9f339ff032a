/**
 * `kvroute state freshness NAME` (declared in state-command.ts): how old the feed's snapshots are
 * when the router reads them.
 */
import { durationScale, formatCount, formatDuration, formatIn } from '../analysis/format-units.js';
import { percentileOfSorted } from '../analysis/percentiles.js';
import { stateError } from '../core/errors.js';
import { sampleFeedFreshness, type SlotAges } from '../state/feed-freshness.js';
import { FEED_STATUS_REASONS, StateFeedReader } from '../state/shm-feed.js';
import { integerFlag, type OptionValues } from './common.js';
import { STATE_DEFAULTS } from './defaults/state-defaults.js';

interface AgeSummary {
  samples: number;
  median_ms: number;
  p99_ms: number;
  max_ms: number;
  pct_stale: number;
}

export async function freshnessVerb(values: OptionValues, [name]: string[]): Promise<void> {
  const durationMs = integerFlag(values, 'duration', 1) ?? STATE_DEFAULTS.freshnessDurationMs;
  const sampleMs = integerFlag(values, 'sample', 1) ?? STATE_DEFAULTS.freshnessSampleMs;
  const stalenessMs = integerFlag(values, 'staleness', 0) ?? STATE_DEFAULTS.stalenessMs;
  const reader = new StateFeedReader(name!, { recheckMs: 100, warn: () => {} });
  const controller = new AbortController();
  const stop = () => controller.abort();
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  try {
    const { status } = reader;
    if (status !== 'ok')
      throw stateError('ERR_KVROUTE_STATE_FEED', `the feed ${reader.path} ${FEED_STATUS_REASONS[status]}`);
    const slots = await sampleFeedFreshness(reader, { durationMs, sampleMs, signal: controller.signal });
    if (slots.length === 0)
      throw stateError('ERR_KVROUTE_STATE_FEED', `the feed ${reader.path} has no published slot to sample`);
    const report = {
      feed: reader.path,
      duration_ms: durationMs,
      staleness_ms: stalenessMs,
      ...summarize(
        slots.flatMap((s) => s.ages),
        stalenessMs,
      ),
      instances: slots.map((s) => ({
        slot: s.slot,
        instance: s.instance,
        ...summarize(s.ages, stalenessMs),
        unreadable: s.unreadable,
        unreachable: s.unreachable,
      })),
    };
    process.stdout.write(`${values.json ? JSON.stringify(report) : table(report, slots)}\n`);
  } finally {
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
    reader.close();
  }
}

function summarize(ages: readonly number[], stalenessMs: number): AgeSummary {
  const sorted = Float64Array.from(ages).sort();
  const round = (x: number) => Math.round(x * 10) / 10;
  const stale = ages.reduce((n, age) => n + (age > stalenessMs ? 1 : 0), 0);
  return {
    samples: ages.length,
    median_ms: round(percentileOfSorted(sorted, 50)),
    p99_ms: round(percentileOfSorted(sorted, 99)),
    max_ms: round(sorted.length === 0 ? 0 : sorted[sorted.length - 1]!),
    pct_stale: ages.length === 0 ? 0 : round((100 * stale) / ages.length),
  };
}

/** The summary line, then a row per slot; the ages of all slots share one unit, named in the header. */
function table(report: AgeSummary & { feed: string; staleness_ms: number }, slots: SlotAges[]): string {
  const perSlot = slots.map((s) => ({ slot: s, ages: summarize(s.ages, report.staleness_ms) }));
  const scale = durationScale(perSlot.flatMap(({ ages }) => [ages.median_ms / 1000, ages.p99_ms / 1000]));
  const rows = perSlot.map(({ slot: s, ages: r }) => {
    const age = (ms: number) => formatIn(ms / 1000, scale, 1);
    return `${String(s.slot).padStart(4)}  ${s.instance.padEnd(24)}  ${formatCount(r.samples).padStart(8)}  ${age(r.median_ms).padStart(12)}  ${age(r.p99_ms).padStart(9)}  ${r.pct_stale.toFixed(1).padStart(9)}`;
  });
  const ms = (value: number) => formatDuration(value / 1000);
  return [
    `${report.feed}: ${formatCount(report.samples, 'readings')}, median age ${ms(report.median_ms)}, p99 ${ms(report.p99_ms)}, ${report.pct_stale}% older than ${ms(report.staleness_ms)}`,
    `slot  ${'instance'.padEnd(24)}  ${'readings'.padStart(8)}  ${`median (${scale.unit})`.padStart(12)}  ${`p99 (${scale.unit})`.padStart(9)}  ${'stale (%)'.padStart(9)}`,
    ...rows,
  ].join('\n');
}
