/**
 * `kvroute state publish`: Prometheus text into engine counts (vLLM and SGLang names), and the
 * publisher against simulated engines, one of which does not answer.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { afterAll, describe, expect, it } from 'vitest';

import { startSimFleet } from '../src/sim/sim-fleet.js';
import {
  KV_BLOCKS_SCALE,
  countsFromMetrics,
  parseExposition,
  prefixCacheHitRatio,
} from '../src/state/engine-metrics-scrape.js';
import { publishEngineMetrics } from '../src/state/metrics-publisher.js';
import { StateFeedReader } from '../src/state/shm-feed.js';
import { waitFor } from './helpers/wait-for.js';

const dir = mkdtempSync(join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), 'kvroute-publish-test-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const VLLM = `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="qwen"} 3.0
vllm:num_requests_running{engine="1",model_name="qwen"} 2.0
vllm:num_requests_waiting{engine="0",model_name="qwen"} 4.0
vllm:kv_cache_usage_perc{engine="0",model_name="qwen"} 0.25
vllm:cache_config_info{block_size="16",num_gpu_blocks="20194",note="a \\"quoted\\" label"} 1.0
vllm:prefix_cache_queries_total{engine="0",model_name="qwen"} 1000.0
vllm:prefix_cache_hits_total{engine="0",model_name="qwen"} 750.0
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="qwen"} 12
`;

const SGLANG = `# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m"} 7
sglang:num_queue_reqs{model_name="m"} 1
sglang:token_usage{model_name="m"} 0.5
`;

describe('engine counts from /metrics', () => {
  it('parses samples, labels (escapes included) and Prometheus values', () => {
    const samples = parseExposition(VLLM);
    expect(samples).toHaveLength(8);
    expect(samples[0]).toEqual({
      name: 'vllm:num_requests_running',
      labels: { engine: '0', model_name: 'qwen' },
      value: 3,
    });
    expect(samples.find((s) => s.name === 'vllm:cache_config_info')!.labels.note).toBe('a "quoted" label');
    expect(parseExposition('x 1 1700000000000\ny{a="b"} +Inf\nz NaN\nnot a sample')).toEqual([
      { name: 'x', labels: {}, value: 1 },
      { name: 'y', labels: { a: 'b' }, value: Infinity },
      { name: 'z', labels: {}, value: NaN },
    ]);
  });

  it('reads vLLM: sums engines, KV from num_gpu_blocks, prefix counters', () => {
    expect(countsFromMetrics(parseExposition(VLLM))).toEqual({
      running: 5,
      waiting: 4,
      kvBlocksUsed: Math.round(0.25 * 20194),
      kvBlocksTotal: 20194,
      pendingPrefillTokens: 0,
      maxPrefillRemaining: 0,
      decodeBatch: 5,
      prefixCacheQueries: 1000,
      prefixCacheHits: 750,
    });
  });

  it('reads SGLang, with KV usage against the default scale', () => {
    expect(countsFromMetrics(parseExposition(SGLANG))).toMatchObject({
      running: 7,
      waiting: 1,
      kvBlocksUsed: KV_BLOCKS_SCALE / 2,
      kvBlocksTotal: KV_BLOCKS_SCALE,
    });
  });

  it('gives nothing for text without request gauges', () => {
    expect(countsFromMetrics(parseExposition('# nothing\nprocess_cpu_seconds_total 3\n'))).toBeUndefined();
  });

  it("reads the engine's own prefix-cache hit ratio: vLLM's counters, else SGLang's counters, else its gauge", () => {
    expect(prefixCacheHitRatio(parseExposition(VLLM))).toBe(0.75);
    const twoEngines = `vllm:prefix_cache_queries_total{engine="0"} 100\nvllm:prefix_cache_hits_total{engine="0"} 90
vllm:prefix_cache_queries_total{engine="1"} 300\nvllm:prefix_cache_hits_total{engine="1"} 10\n`;
    expect(prefixCacheHitRatio(parseExposition(twoEngines))).toBe(0.25); // 100 of 400 tokens, not the mean of ratios
    // Two data-parallel schedulers average; a second tensor-parallel rank mirrors its rank 0 and is left out.
    const sglang = `${SGLANG}sglang:cache_hit_rate{model_name="m",dp_rank="0",tp_rank="0"} 0.5
sglang:cache_hit_rate{model_name="m",dp_rank="1",tp_rank="0"} 0.7\nsglang:cache_hit_rate{model_name="m",dp_rank="1",tp_rank="1"} 0.9\n`;
    expect(prefixCacheHitRatio(parseExposition(sglang))).toBeCloseTo(0.6);
    expect(prefixCacheHitRatio(parseExposition(SGLANG))).toBeUndefined(); // no rate exported
    expect(
      prefixCacheHitRatio(parseExposition('vllm:prefix_cache_queries_total 0\nvllm:prefix_cache_hits_total 0\n')),
    ).toBe(undefined); // nothing asked yet
    expect(
      prefixCacheHitRatio(parseExposition('vllm:prefix_cache_queries_total 10\nvllm:prefix_cache_hits_total 12\n')),
    ).toBe(1); // never above 1
  });
});

describe('the publisher', () => {
  it('publishes each engine’s state, slot i for engine i, and marks one that does not answer', async () => {
    const fleet = await startSimFleet({ instances: 2, port: 0, speed: 1 });
    // A port that refuses: bound, then closed.
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const deadUrl = `http://127.0.0.1:${(closed.address() as AddressInfo).port}`;
    await new Promise((resolve) => closed.close(resolve));
    const path = join(dir, 'feed');
    const body = JSON.stringify({ model: 'qwen3-coder-30b-a3b', prompt: 'y'.repeat(300), max_tokens: 300 });
    const pending = fetch(`${fleet.urls[0]}/v1/completions`, {
      method: 'POST',
      body,
      headers: { 'content-type': 'application/json' },
    });
    try {
      await waitFor('engine 0 to run the request', () => fleet.engines[0]!.engine.state().running === 1);
      const changes: string[] = [];
      await publishEngineMetrics({
        engines: [...fleet.urls, deadUrl],
        shm: path,
        intervalMs: 10,
        timeoutMs: 500,
        rounds: 3,
        onChange: (engine, reachable) => changes.push(`${engine} ${reachable}`),
      });
      expect(changes).toEqual([`${deadUrl} false`]);
      const reader = new StateFeedReader(path);
      expect(reader.slots).toBe(3);
      expect(reader.read(0)).toMatchObject({ instance: new URL(fleet.urls[0]!).host, running: 1, unreachable: false });
      expect(reader.read(1)).toMatchObject({ instance: new URL(fleet.urls[1]!).host, running: 0, unreachable: false });
      expect(reader.read(2)).toMatchObject({ instance: new URL(deadUrl).host, unreachable: true });
      expect(Date.now() - reader.read(2)!.timestampMs).toBeLessThan(2_000); // marked, not dropped
      reader.close();
    } finally {
      await pending;
      await fleet.close();
    }
  });

  it('kvroute state publish refuses bad flags with exit 2', () => {
    const cli = fileURLToPath(new URL('../dist/cli.js', import.meta.url));
    const run = (args: string[]) => spawnSync(process.execPath, [cli, 'state', ...args], { encoding: 'utf8' });
    expect(run(['publish', '--shm', 'x']).stderr).toMatch(/needs --engines/);
    const bad = run(['publish', '--engines', 'ftp://a', '--shm', join(dir, 'f')]);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/--engines must be http\(s\) URLs, got ftp:\/\/a/);
    expect(run(['publish', '--engines', 'http://127.0.0.1:1']).stderr).toMatch(/needs --shm NAME/);
  });
});
