// @ts-check
// Issue #32's event-relay workload: its target check and its section of bench/RESULTS.md.

/** @typedef {import('../event-relay.mjs').EventRelayResult & { date?: string }} EventRelayResult */

/** @param {readonly object[]} results */
const rows = (results) =>
  /** @type {EventRelayResult[]} */ (results.filter((r) => 'kind' in r && r.kind === 'event-relay'));

const rate = (/** @type {number} */ x) => `${(x / 1e6).toFixed(2)}M`;

/** @param {readonly object[]} allResults */
export function eventRelayChecks(allResults) {
  return rows(allResults).map(
    (r) =>
      `  ${r.cpu_events_per_s >= 1e6 ? 'PASS' : 'FAIL'}  events relay >= 1M block events/s per core: ${rate(r.cpu_events_per_s)}/s ` +
      `(${rate(r.wall_events_per_s)}/s wall, ${r.cpu_seconds} CPU-s for ${r.block_events.toLocaleString('en-US')})`,
  );
}

/** @param {readonly object[]} allResults */
export function renderEventRelayResults(allResults) {
  const list = rows(allResults);
  if (list.length === 0) return [];
  const out = ['## event-relay: engine → `kvroute events relay` → JetStream (issue #32)', ''];
  out.push(
    "An engine process sends the kv-events workload's vLLM stream (16-token blocks, stored runs of 1–64, ~30% removals) over ZeroMQ as fast as it can; the relay (src/events/nats/event-relay.ts) republishes each message to a real nats-server's JetStream stream (file storage, one subject per engine, the seq in a header), up to 2,048 unacknowledged. Timed from the relay's first message to NATS's last acknowledgement. Per core: block events (stored + removed blocks) over the relay process's CPU time (user + system, its ZeroMQ and NATS client threads included; the engine's and nats-server's not). The stream is checked to hold every message. Target: >= 1M block events/s per core. [bench/event-relay.mjs](event-relay.mjs).",
    '',
    '| messages | block events | payload MiB | wall s | relay CPU-s | block events/s wall | block events/s per core | stored | resets | load average | date |',
    '|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|',
  );
  for (const r of list)
    out.push(
      `| ${r.messages.toLocaleString('en-US')} | ${r.block_events.toLocaleString('en-US')} | ${(r.bytes / 2 ** 20).toFixed(1)} | ${r.wall_seconds} | ${r.cpu_seconds} | ${r.wall_events_per_s.toLocaleString('en-US')} | ${r.cpu_events_per_s.toLocaleString('en-US')} | ${r.stored_messages.toLocaleString('en-US')} | ${r.resets} | ${r.load_avg} | ${r.date ?? ''} |`,
    );
  out.push('');
  return out;
}
