/**
 * The live replica test of issue #32 (docs/scale-out.md, "Measured live"): a real nats-server,
 * 3 `kvroute serve --cluster` replicas behind haproxy (round robin), `sim serve` engines whose KV
 * events reach the replicas through `kvroute events relay` and JetStream, and `kvroute replay` of
 * an agentic trace, one replica killed mid-run and restarted (warm from the stream), against the
 * same replay through one replica (scripts/replica-live.mjs).
 * The replicas keep one replica's cache (APC within 2 points) and session placement (instances per
 * session within 1.05×, plus two sessions' extra engine: the resolution of 20 sessions); the
 * restarted replica's index holds 95% of a peer's blocks within 5 s; the load plane sends at most
 * 3 delta messages per request. TTFT is reported by the script, not asserted: on 2 shared cores
 * the 3 replicas, haproxy and NATS compete with the engines' timing for CPU.
 * Skipped, saying so, when nats-server or haproxy is absent.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

import { describe, expect, it } from 'vitest';

import { HAPROXY_SKIP_REASON, haproxyPath } from './helpers/haproxy.js';
import { NATS_SKIP_REASON, natsServerPath } from './helpers/nats-server.js';

const script = fileURLToPath(new URL('../scripts/replica-live.mjs', import.meta.url));
const missing =
  natsServerPath() === undefined ? NATS_SKIP_REASON : haproxyPath() === undefined ? HAPROXY_SKIP_REASON : '';
if (missing !== '') console.warn(`test/replica-live.test.ts: ${missing}`);

const SESSIONS = 20;

describe.skipIf(missing !== '')('3 replicas behind haproxy, one killed and restarted', () => {
  it("keep one replica's cache and placement, and the restarted one is warm within 5 s", () => {
    const run = spawnSync(
      process.execPath,
      [script, '--replicas', '3', '--sessions', String(SESSIONS), '--duration', '60', '--speed', '10'],
      { encoding: 'utf8', timeout: 400_000 },
    );
    expect(run.status, run.stderr).toBe(0);
    const r = JSON.parse(run.stdout) as {
      events: string;
      single: { requests: number; failed: number; apc: number; instances_per_session: number };
      split: {
        requests: number;
        failed: number;
        apc: number;
        instances_per_session: number;
        delta_messages_per_request: number;
        restart: { warm_ms: number | null; blocks: number; peer_blocks: number };
      };
    };
    expect(r.events).toMatch(/events relay → JetStream/);
    expect(r.single.failed).toBe(0);
    expect(r.split.requests).toBe(r.single.requests);
    // Only the killed replica's requests in flight fail.
    expect(r.split.failed).toBeLessThanOrEqual(4);
    expect(Math.abs(r.split.apc - r.single.apc)).toBeLessThan(0.02);
    // Two sessions' extra engine of slack: the killed replica's in-flight turns fail, and the
    // sessions they belong to may move (1.25 against 1.10 was seen once in 20 sessions).
    expect(r.split.instances_per_session).toBeLessThanOrEqual(r.single.instances_per_session * 1.05 + 2 / SESSIONS);
    expect(r.split.restart.warm_ms).not.toBeNull();
    expect(r.split.restart.warm_ms!).toBeLessThanOrEqual(5000);
    expect(r.split.restart.blocks).toBeGreaterThanOrEqual(0.95 * r.split.restart.peer_blocks);
    expect(r.split.delta_messages_per_request).toBeGreaterThan(0);
    expect(r.split.delta_messages_per_request).toBeLessThanOrEqual(3);
  }, 420_000);
});
