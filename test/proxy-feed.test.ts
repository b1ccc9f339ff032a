/**
 * The proxy on the engine-state feed (`engineState: { shm }`, `--engine-state shm:NAME`): a fresh
 * snapshot that shows one backend loaded steers load-aware routing away from it, a stale one does
 * not, and a missing feed routes on shadow state with one warning.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { createProxy } from '../src/proxy/server/proxy-server.js';
import { startSimFleet, type SimFleet } from '../src/sim/sim-fleet.js';
import { StateFeedWriter } from '../src/state/shm-feed.js';

const dir = mkdtempSync(join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), 'kvroute-proxy-feed-'));
let fleet: SimFleet;

beforeAll(async () => {
  fleet = await startSimFleet({ instances: 2, port: 0, speed: 50 });
});
afterAll(async () => {
  await fleet?.close();
  rmSync(dir, { recursive: true, force: true });
});

const LOADED = {
  running: 40,
  waiting: 25,
  kvBlocksUsed: 900,
  kvBlocksTotal: 1_000,
  pendingPrefillTokens: 200_000,
  maxPrefillRemaining: 30_000,
  decodeBatch: 40,
};
const IDLE = {
  ...LOADED,
  running: 0,
  waiting: 0,
  kvBlocksUsed: 0,
  pendingPrefillTokens: 0,
  maxPrefillRemaining: 0,
  decodeBatch: 0,
};

/** Where four fresh one-off requests go (load_only: fewest requests wins, ties to the first). */
async function placements(base: string): Promise<string[]> {
  const out: string[] = [];
  for (let k = 0; k < 4; k++) {
    const response = await fetch(`${base}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'qwen3-coder-30b-a3b', prompt: `request ${k}`, max_tokens: 2 }),
    });
    expect(response.status).toBe(200);
    await response.json();
    out.push(response.headers.get('x-kvroute-instance')!);
  }
  return out;
}

describe('kvroute serve with --engine-state shm', () => {
  it('routes away from the backend the feed shows loaded, and ignores a stale snapshot', async () => {
    const path = join(dir, 'feed');
    const writer = new StateFeedWriter(path, { slots: 2 });
    const proxy = createProxy({
      backends: fleet.urls,
      policy: 'load_only',
      engineState: { shm: path },
      onWarning: () => {},
    });
    const { port } = await proxy.listen(0);
    const base = `http://127.0.0.1:${port}`;
    try {
      const [first, second] = fleet.urls as [string, string];
      // Shadow alone: every request finishes before the next, so ties go to the first backend.
      writer.publish(0, 'engine-0', IDLE);
      writer.publish(1, 'engine-1', IDLE);
      expect(await placements(base)).toEqual([first, first, first, first]);
      writer.publish(0, 'engine-0', LOADED);
      expect(await placements(base)).toEqual([second, second, second, second]);
      writer.publish(0, 'engine-0', LOADED, { timestampMs: Date.now() - 10_000 }); // older than 2 s
      expect(await placements(base)).toEqual([first, first, first, first]);
    } finally {
      writer.close();
      await proxy.close({ graceMs: 100 });
    }
  });

  it('routes on shadow state with one warning when the feed is missing', async () => {
    const warnings: string[] = [];
    const proxy = createProxy({
      backends: fleet.urls,
      policy: 'load_only',
      engineState: { shm: join(dir, 'never-written') },
      onWarning: (m) => warnings.push(m),
    });
    const { port } = await proxy.listen(0);
    try {
      expect(await placements(`http://127.0.0.1:${port}`)).toEqual(Array(4).fill(fleet.urls[0]));
      expect(warnings.filter((w) => /never-written/.test(w))).toHaveLength(1);
    } finally {
      await proxy.close({ graceMs: 100 });
    }
  });
});
