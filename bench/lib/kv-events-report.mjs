// @ts-check
// Issue #17's kv-events workload: its target check and its section of bench/RESULTS.md.

/** @typedef {import('../kv-events.mjs').KvEventsResult & { date?: string }} KvEventsResult */

/** @param {readonly object[]} results */
const legs = (results) =>
  /** @type {KvEventsResult[]} */ (results.filter((r) => 'kind' in r && r.kind === 'kv-events'));

const rate = (/** @type {number} */ x) => `${(x / 1e6).toFixed(2)}M`;

/** @param {readonly object[]} allResults */
export function kvEventsChecks(allResults) {
  const rows = legs(allResults);
  const apply = rows.find((r) => r.leg === 'apply');
  const endToEnd = rows.find((r) => r.leg === 'decode+pack+apply');
  /** @type {string[]} */
  const out = [];
  if (apply)
    out.push(
      `  ${apply.native_events_per_s >= 1e6 ? 'PASS' : 'FAIL'}  applyKvEvents >= 1M block events/s: ` +
        `${rate(apply.native_events_per_s)}/s (${apply.ratio}x the reference)`,
    );
  const direct = rows.find((r) => r.leg === 'direct decode+apply');
  if (endToEnd) out.push(`  info  decode + pack + apply: ${rate(endToEnd.native_events_per_s)} block events/s`);
  if (direct) out.push(`  info  direct decode + apply: ${rate(direct.native_events_per_s)} block events/s`);
  return out;
}

/** @param {readonly object[]} allResults */
export function renderKvEventsResults(allResults) {
  const rows = legs(allResults);
  if (rows.length === 0) return [];
  const first = /** @type {KvEventsResult} */ (rows[0]);
  const out = ['## kv-events: ingesting vLLM KV cache events into the event-fed index (issue #17)', ''];
  out.push(
    `One engine's stream of ${first.messages.toLocaleString('en-US')} msgpack messages (vLLM's positional encoding), ${first.block_events.toLocaleString('en-US')} block events: 16-token blocks, BlockStored runs of 1–64 blocks (80% continuing a conversation), BlockRemoved runs of 1–64 of the oldest blocks (about 30% of block events), ${first.tick_messages} messages per applyKvEvents call. Rates are stored + removed blocks per second, the median of repetitions on a fresh router. \`apply\` times applyKvEvents alone on pre-packed calls; the reference runs the first 2% of them (it hashes in BigInt), and the ratio is of the two cores on that same prefix; \`decode+pack+apply\` starts from the payload bytes (the msgpackr decoder into event objects, KvEventPacker.addBatch, the addon), \`direct decode+apply\` too, through KvEventPacker.addPayload (msgpackr, then straight into the packed arrays); the two alternate. The load average (1 min, at the end of the leg) shows how shared the 2 cores were. Target: apply >= 1M block events/s. [bench/kv-events.mjs](kv-events.mjs).`,
    '',
  );
  out.push(
    '| leg | native block events/s | first 2%: native | first 2%: reference | native / reference | keys held after | orphaned blocks | load average | date |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---|',
  );
  for (const r of rows)
    out.push(
      `| ${r.leg} | ${r.native_events_per_s.toLocaleString('en-US')} | ${r.prefix_native_events_per_s?.toLocaleString('en-US') ?? '—'} | ${r.reference_events_per_s?.toLocaleString('en-US') ?? '—'} | ${r.ratio === null ? '—' : `${r.ratio}x`} | ${r.held_keys.toLocaleString('en-US')} | ${r.orphaned.toLocaleString('en-US')} | ${r.load_avg ?? ''} | ${r.date ?? ''} |`,
    );
  out.push('');
  return out;
}
