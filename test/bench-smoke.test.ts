/**
 * The benchmark keeps working: a quick run of one workload writes the JSON
 * figures issue #2 specifies. Shape only; performance targets are checked by
 * the benchmark itself (`npm run bench`), never here.
 */
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { expect, it } from 'vitest';

import { POLICY_NAMES } from '../src/index.js';

const RUN = fileURLToPath(new URL('../bench/run.mjs', import.meta.url));

interface QuickBench {
  child: SpawnSyncReturns<string>;
  /** The --json document it wrote. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  doc: any;
  /** `npm run bench -- --from` that document: the report rendered again. */
  renderFrom(): SpawnSyncReturns<string>;
}

/**
 * `npm run bench -- --quick --only WORKLOAD --json FILE` in a scratch directory: it exits 0 with
 * nothing on stderr, and `check` reads what it printed and wrote.
 */
function quickBench(workload: string, timeout: number, check: (run: QuickBench) => void): void {
  const dir = mkdtempSync(join(tmpdir(), 'kvroute-bench-test-'));
  try {
    const out = join(dir, 'bench.json');
    const child = spawnSync(process.execPath, [RUN, '--quick', '--only', workload, '--json', out], {
      encoding: 'utf8',
      timeout,
    });
    expect(child.stderr).toBe('');
    expect(child.status).toBe(0);
    check({
      child,
      doc: JSON.parse(readFileSync(out, 'utf8')),
      renderFrom: () => spawnSync(process.execPath, [RUN, '--from', out], { encoding: 'utf8' }),
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

it('npm run bench -- --quick --only mooncake --json writes every policy (and two with the offload layer) for both implementations', () => {
  quickBench('mooncake', 120_000, ({ child, doc }) => {
    expect(child.stdout).toMatch(/^machine: /);
    expect(child.stdout).toContain('native:  on');
    // Every base policy, and the offload layer beside the default and the reference experiments' champion.
    const policies = [...POLICY_NAMES, 'unified+A+B+offload', 'min_ttft+offload'];
    expect(doc.results).toHaveLength(policies.length * 2);
    expect(new Set(doc.results.map((r: { policy: string }) => r.policy))).toEqual(new Set(policies));
    for (const r of doc.results) {
      expect(r).toMatchObject({ workload: 'mooncake', instances: 8 });
      expect(['native', 'ts']).toContain(r.impl);
      for (const key of ['p50_us', 'p99_us', 'ops_per_s', 'bytes_per_block']) expect(r[key]).toBeGreaterThan(0);
      expect(r.p99_us).toBeGreaterThanOrEqual(r.p50_us);
    }
  });
});

it('an unknown workload is refused with a clear message', () => {
  const child = spawnSync(process.execPath, [RUN, '--only', 'nope'], { encoding: 'utf8' });
  expect(child.status).toBe(2);
  expect(child.stderr).toContain('unknown workload(s): nope; known: mooncake, agentic-long, characterize, simulate');
});

it('npm run bench -- --quick --only cli-startup times the floor, kvroute --help and kvroute hash', () => {
  quickBench('cli-startup', 120_000, ({ child, doc }) => {
    expect(child.stdout).toMatch(/info {2}cold start, median: node -e 0 \d+ ms; kvroute --help \d+ ms/);
    expect(doc.results.map((r: { command: string }) => r.command)).toEqual([
      'node -e 0',
      'kvroute --help',
      'kvroute hash',
    ]);
    for (const r of doc.results) {
      expect(r).toMatchObject({ workload: 'cli-startup', kind: 'cli-startup', runs: 5 });
      expect(r.p90_ms).toBeGreaterThanOrEqual(r.median_ms);
      expect(r.floor_ratio).toBeGreaterThan(0);
    }
  });
});

it('npm run bench -- --quick --only import-cost times the floor and importing the routing core', () => {
  quickBench('import-cost', 120_000, ({ child, doc }) => {
    expect(child.stdout).toMatch(/info {2}import \{ Router \} from 'kvroute', median: this \d+ ms, \d+ MiB/);
    expect(doc.results.map((r: { build: string }) => r.build)).toEqual(['node', 'this', 'this']);
    for (const r of doc.results) {
      expect(r).toMatchObject({ workload: 'import-cost', kind: 'import-cost', runs: 5 });
      expect(r.rss_mib).toBeGreaterThan(0);
    }
  });
});

it('npm run bench -- --quick --only analyze-run analyses generated records, with and without the reuse split', () => {
  quickBench('analyze-run', 240_000, ({ child, doc }) => {
    expect(child.stdout).toMatch(/analyze run 0\.\d+M records, records only: <= 20 s/);
    expect(child.stdout).toMatch(
      /info {2}analyze run 0\.\d+M records, with the reuse split, workers 1, TypeScript trie \(reference\): .* \(the addon's trie: /,
    );
    type Leg = { reuse: boolean; workers: number; trie: string };
    expect(doc.results.map((r: Leg) => [r.reuse, r.workers, r.trie])).toEqual([
      [false, 0, 'native'],
      [true, 1, 'native'],
      [true, 0, 'native'],
      [true, 1, 'typescript'],
    ]);
    for (const r of doc.results) {
      expect(r).toMatchObject({ workload: 'analyze-run', kind: 'run-analysis' });
      expect(r.records).toBeGreaterThan(100_000);
      expect(r.n_slow).toBeGreaterThan(0);
      for (const key of ['seconds', 'peak_rss_bytes', 'file_bytes']) expect(r[key]).toBeGreaterThan(0);
    }
  });
}, 300_000);

it('npm run bench -- --quick --only tokenize compares both libraries and times session reuse', () => {
  quickBench('tokenize', 120_000, ({ child, doc }) => {
    expect(child.stdout).toMatch(/MET {3}tokenizer libraries give identical ids on the varied corpus/);
    expect(child.stdout).toMatch(/MET {3}session reuse gives the full encode's ids/);
    const libraries = doc.results.filter((r: { kind: string }) => r.kind === 'tokenize-library');
    expect(libraries.map((r: { library: string }) => r.library)).toEqual([
      '@huggingface/tokenizers',
      '@anush008/tokenizers',
    ]);
    for (const r of libraries) {
      expect(r.identical).toBe(true);
      expect(r.sizes.map((s: { tokens: number }) => Math.round(s.tokens / 1000))).toEqual([1, 20]);
    }
    const session = doc.results.find((r: { kind: string }) => r.kind === 'tokenize-session');
    expect(session).toMatchObject({ exact: true });
    expect(session.reused_tokens).toBeGreaterThan(session.session_tokens * 0.9);
  });
});

it('npm run bench -- --quick --only kv-events measures both legs, the reference beside the addon', () => {
  quickBench('kv-events', 120_000, ({ child, doc }) => {
    expect(doc.results.map((r: { leg: string }) => r.leg)).toEqual([
      'apply',
      'decode+pack+apply',
      'direct decode+apply',
    ]);
    const [apply, endToEnd, direct] = doc.results;
    expect(apply.block_events).toBeGreaterThan(100_000);
    expect(apply.native_events_per_s).toBeGreaterThan(0);
    expect(apply.reference_events_per_s).toBeGreaterThan(0);
    expect(apply.prefix_native_events_per_s).toBeGreaterThan(0);
    expect(apply.ratio).toBeCloseTo(apply.prefix_native_events_per_s / apply.reference_events_per_s, 0);
    expect(apply.held_keys).toBeGreaterThan(0);
    expect(endToEnd.native_events_per_s).toBeGreaterThan(0);
    expect(direct.native_events_per_s).toBeGreaterThan(0);
    expect(child.stdout).toContain('applyKvEvents >= 1M block events/s');
  });
});

it('npm run bench -- --quick --only flow measures flow control beside a plain FIFO, and renders its section', () => {
  quickBench('flow', 120_000, ({ child, doc, renderFrom }) => {
    expect(doc.results).toHaveLength(1);
    const [flow] = doc.results;
    expect(flow).toMatchObject({ workload: 'flow', tenants: 1000, limited_tenants: 100, queue_depth: 512 });
    expect(flow.flow_us).toBeGreaterThan(0);
    expect(flow.fifo_us).toBeGreaterThan(0);
    expect(flow.ratio).toBeCloseTo(flow.flow_us / flow.fifo_us, 0);
    expect(child.stdout).toContain('flow control <= 2 µs CPU per request with 1,000 tenants');
    const rerender = renderFrom();
    expect(rerender.stdout).toContain('flow control <= 2 µs CPU per request');
  });
});

it('npm run bench -- --quick --only flow-targets measures the four flow targets in the simulator, each with its bound', () => {
  quickBench('flow-targets', 120_000, ({ child, doc, renderFrom }) => {
    const byTarget = Object.fromEntries(
      (doc.results as Array<{ target: string; value: number; bound: number; pass: boolean }>).map((r) => [r.target, r]),
    );
    expect(Object.keys(byTarget).sort()).toEqual(['jain', 'noisy', 'priority', 'shedding']);
    // Each verdict is its figure against its bound, whichever way it falls.
    expect(byTarget.jain!.pass).toBe(byTarget.jain!.value >= 0.95);
    for (const target of ['noisy', 'priority', 'shedding'])
      expect(byTarget[target]!.pass).toBe(byTarget[target]!.value <= byTarget[target]!.bound);
    expect(byTarget.shedding!.value).toBeGreaterThan(0);
    expect(child.stdout).toMatch(/(PASS|FAIL) {2}flow shedding: admitted requests' TTFT p90 at 3x overload/);
    const rerender = renderFrom();
    expect(rerender.stdout).toContain('flow jain:');
  });
});
