/**
 * `kvroute explain` through the built CLI: a described fleet's decision with the offload layer's
 * outcome and both costs, the x-kvroute-reason text, warm pairs from requests routed before,
 * --policy and --json, and scenario mistakes refused naming the field (exit 2).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { afterAll, describe, expect, it } from 'vitest';

const CLI = fileURLToPath(new URL('../dist/cli.js', import.meta.url));
const EXAMPLE = fileURLToPath(new URL('../examples/offload-scenario.json', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'kvroute-explain-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const kvroute = (args: string[], input = '') =>
  spawnSync(process.execPath, [CLI, 'explain', ...args], { encoding: 'utf8', input, timeout: 30_000 });
const scenario = (value: unknown): string => {
  const file = join(dir, `s${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(file, JSON.stringify(value));
  return file;
};

/** t decodes one request; p is idle. */
const FLEET = [
  { id: 't', state: { running: 1, decodeBatch: 1 } },
  { id: 'p', state: { waiting: 3 } },
];

describe('kvroute explain', () => {
  it('prints the decision, the reason header, the offload costs and every candidate', () => {
    const run = kvroute([EXAMPLE]);
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    // gpu-0 holds 4,096 of the 12,288 tokens and decodes 2: 2 × prefillMs(8192, 4096) = 2 × 772.87 ms.
    expect(run.stdout).toContain('instance:   gpu-0\n');
    expect(run.stdout).toContain(
      'reason:     fallback; offload prefill=gpu-1 interference=1546ms > transfer=433ms cold\n',
    );
    expect(run.stdout).toContain('offload:    offload (threshold 1000 uncached tokens)\n');
    expect(run.stdout).toContain('  prefill on gpu-1, decode on gpu-0\n');
    expect(run.stdout).toContain('  interference 1545.74 ms');
    expect(run.stdout).toContain('  transfer     432.70 ms (cold pair)\n');
    expect(run.stdout).toMatch(/\*gpu-0 +256 +8192 +2 +0 +0\.000 +8355\.84\n/);
  });

  it('a pair warmed by an offload routed before prices the transfer warm and flips a colocation', () => {
    const request = { inputTokens: 2048 };
    const cold = kvroute([scenario({ policy: 'load_only+offload', instances: FLEET, request })]);
    expect(cold.stdout).toContain('reason:     least_loaded; colocated interference=139ms <= transfer=239ms cold\n');
    const warmed = {
      policy: 'load_only+offload',
      instances: FLEET,
      before: [{ conversation: 'earlier', inputTokens: 8192 }],
      request,
    };
    const warm = kvroute([scenario(warmed)]);
    // The earlier request still waits on t, so t counts 2 requests; p (3 waiting + the prefill) is busier.
    expect(warm.stdout).toContain('reason:     least_loaded; offload prefill=p interference=139ms > transfer=99ms\n');
    expect(warm.stdout).toContain('  transfer     99.42 ms (warm pair)\n');
  });

  it('--policy replaces the scenario policy; a policy without the layer has no offload line', () => {
    const run = kvroute([EXAMPLE, '--policy', 'min_ttft']);
    expect(run.status).toBe(0);
    expect(run.stdout).toContain('policy:     min_ttft\n');
    expect(run.stdout).toContain('reason:     min_ttft\n');
    expect(run.stdout).not.toContain('offload');
  });

  it('--json prints the explanation with its offload section and the header, reading stdin', () => {
    const run = kvroute(['--json'], JSON.stringify({ policy: 'v3', instances: FLEET, request: { inputTokens: 1000 } }));
    expect(run.status).toBe(0);
    const out = JSON.parse(run.stdout);
    expect(out).toMatchObject({
      policy: 'v3',
      instance: 't',
      dryRun: true,
      header: 'fallback; colocated (prefill below threshold)',
      offload: { outcome: 'below_threshold', prefillInstance: null, prefillTicket: null, thresholdTokens: 1000 },
    });
  });

  it.each([
    [{ instances: [], request: {} }, /scenario\.instances must be a non-empty array/],
    [{ instances: FLEET, request: { inputTokens: -1 } }, /scenario\.request\.inputTokens must be/],
    [
      { instances: [{ id: 't', cached: { chat: 1.5 } }], request: { inputTokens: 1 } },
      /scenario\.instances\[0\]\.cached\.chat must be/,
    ],
    [
      { instances: [{ id: 't', state: { decoding: 1 } }], request: { inputTokens: 1 } },
      /scenario\.instances\[0\]\.state\.decoding must be absent/,
    ],
    [
      { instances: FLEET, request: { inputTokens: 1 }, policy: 'v3:linkGbps=0' },
      /scenario\.policy\.offload\.linkGbps must be > 0/,
    ],
    [{ instances: FLEET, request: { inputTokens: 1 }, polcy: 'v3' }, /scenario\.polcy must be absent/],
  ])('refuses %j naming the field', (value, message) => {
    const run = kvroute([scenario(value)]);
    expect(run.status).toBe(2);
    expect(run.stderr).toMatch(message);
  });

  it('refuses text that is not JSON', () => {
    const run = kvroute([], 'policy: v3');
    expect(run.status).toBe(2);
    expect(run.stderr).toMatch(/^kvroute explain: scenario must be JSON/);
  });
});
