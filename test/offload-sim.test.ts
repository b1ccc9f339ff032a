/**
 * The discrete-event simulator's prefill offload (docs/offload.md): a request the router
 * offloads prefills on the prefill instance, reports its prefill ticket there, moves its KV to
 * the decode instance in the link's transfer time (cold on a pair's first use), and decodes
 * there with its prompt cached; its record, `sim run --json` and the sweep tables say so.
 *
 * Until the routing core's `+offload` policies land no policy offloads, so most tests here make
 * the router's decision say `offload` (forceOffload: the real decision, with its `offload` part
 * set and the prefill ticket's reports captured). The last block runs the real policies and is
 * skipped while the core does not know them.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';

import { NO_OFFLOAD } from '../src/core/decision-view.js';
import { offloadMetrics } from '../src/analysis/offload-metrics.js';
import { predictionAccuracy } from '../src/analysis/prediction-accuracy.js';
import { runMetrics } from '../src/analysis/run-metrics.js';
import { renderMetrics } from '../src/cli/sim-tables.js';
import { simRunVerb } from '../src/cli/sim-verb.js';
import { renderOffload } from '../src/cli/sweep-tables.js';
import { cellSummary } from '../src/cli/sweep-summary.js';
import { planCells } from '../src/cli/sweep-layout.js';
import { DEFAULT_OFFLOAD_COST, transferMs } from '../src/core/offload-cost.js';
import { Router } from '../src/core/router.js';
import type { Decision, OffloadDecision, RouteRequest } from '../src/core/types.js';
import { DEFAULT_ENGINE_PRESET, ENGINE_PRESETS, stepMs } from '../src/sim/engine-preset.js';
import { simulate } from '../src/sim/simulator.js';
import { readRecordFile } from '../src/trace/record-file.js';
import type { RequestRecord } from '../src/trace/records.js';
import { synthesizeTrace } from '../src/trace/synth.js';
import type { TraceRequest } from '../src/trace/types.js';
import { writeTrace } from '../src/trace/write-trace.js';

const preset = ENGINE_PRESETS[DEFAULT_ENGINE_PRESET]!;
const dir = mkdtempSync(join(tmpdir(), 'kvroute-offload-sim-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
afterEach(() => vi.restoreAllMocks());

/** Far above any ticket the router opens. */
const PREFILL_TICKETS = 2 ** 40;

interface PrefillReport {
  kind: 'first' | 'complete';
  ticket: number;
  /** The router's clock when it was reported. */
  atMs: number;
}

/**
 * Makes every route() whose request `pick` gives a prefill index an offload to that instance
 * (decode: the decision's own instance), with a prefill ticket of its own; every other one `off`.
 * Returns the prefill tickets' reports, in order.
 */
function forceOffload(pick: (request: RouteRequest, decision: Decision) => number | undefined): PrefillReport[] {
  const reports: PrefillReport[] = [];
  let nowMs = 0;
  let next = PREFILL_TICKETS;
  const { route, setTime, onFirstToken, complete } = Router.prototype;
  vi.spyOn(Router.prototype, 'setTime').mockImplementation(function (this: Router, ms: number) {
    nowMs = ms;
    setTime.call(this, ms);
  });
  vi.spyOn(Router.prototype, 'route').mockImplementation(function (this: Router, request: RouteRequest) {
    const ticket = route.call(this, request);
    const prefill = pick(request, this.decision);
    const offload: OffloadDecision =
      prefill === undefined
        ? NO_OFFLOAD
        : {
            ...NO_OFFLOAD,
            outcome: 'offload',
            prefillInstance: this.instances()[prefill],
            prefillIndex: prefill,
            prefillTicket: next++,
            interferenceMs: 1e6,
          };
    // Shadows DecisionView's getter on this router's decision (the real layer is not asked).
    Object.defineProperty(this.decision, 'offload', { value: offload, configurable: true, writable: true });
    return ticket;
  });
  vi.spyOn(Router.prototype, 'onFirstToken').mockImplementation(function (this: Router, ticket: number) {
    if (ticket >= PREFILL_TICKETS) reports.push({ kind: 'first', ticket, atMs: nowMs });
    else onFirstToken.call(this, ticket);
  });
  vi.spyOn(Router.prototype, 'complete').mockImplementation(function (this: Router, ticket: number) {
    if (ticket >= PREFILL_TICKETS) reports.push({ kind: 'complete', ticket, atMs: nowMs });
    else complete.call(this, ticket);
  });
  return reports;
}

const range = (from: number, count: number): number[] => Array.from({ length: count }, (_, i) => from + i);

/** One session's turns: each prompt extends the previous one (block ids chained). */
function session(name: string, turns: Array<{ arrival: number; blocks: number; output: number }>): TraceRequest[] {
  return turns.map((t, turn) => ({
    session: name,
    turn,
    arrival: t.arrival,
    inputLength: t.blocks * 16,
    outputLength: t.output,
    hashIds: range(1, t.blocks),
    blockSize: 16,
  }));
}

describe('an offloaded request in the simulator', () => {
  const trace = session('s', [
    { arrival: 0, blocks: 128, output: 8 }, // 2,048 tokens, offloaded cold
    { arrival: 5, blocks: 160, output: 4 }, // served where routed: must hit the transferred blocks
    { arrival: 10, blocks: 192, output: 4 }, // offloaded again: warm
  ]);

  it('prefills on P, reports the prefill ticket there, moves its KV, and decodes on T', () => {
    const reports = forceOffload((request, decision) =>
      request.inputTokens === 2048 || request.inputTokens === 3072 ? 1 - decision.index : undefined,
    );
    const { records } = simulate(trace, { policy: 'sticky', instances: 2 });
    const [first, second, third] = records as [RequestRecord, RequestRecord, RequestRecord];
    const decode = first.instance;
    const prefill = 1 - decode;

    // Turn 0: P's isolated prefill, the cold transfer of all 2,048 tokens, T's admitting decode step.
    const prefillS = stepMs(preset, [{ tokens: 2048, context: 0 }], 0) / 1000;
    const transferS = transferMs(DEFAULT_OFFLOAD_COST, 2048, true) / 1000;
    const decodeStepS = stepMs(preset, [], 1, 2047) / 1000;
    expect(first).toMatchObject({ turn: 0, prefill_instance: prefill, transferred_tokens: 2048, cached_tokens: 0 });
    expect(first.decode_cached_tokens).toBe(0);
    expect(first.transfer_s).toBeCloseTo(transferS, 12);
    expect(first.first_token - first.dispatch).toBeCloseTo(prefillS + transferS + decodeStepS, 9);
    expect(first.overlapped).toBe(false);

    // The prefill ticket: first token and completion when P's prefill ends, before T's first token.
    expect(reports.slice(0, 2)).toEqual([
      { kind: 'first', ticket: PREFILL_TICKETS, atMs: expect.closeTo(prefillS * 1000, 6) },
      { kind: 'complete', ticket: PREFILL_TICKETS, atMs: expect.closeTo(prefillS * 1000, 6) },
    ]);

    // Turn 1 stays on T (sticky) and finds the transferred blocks cached there.
    expect(second).toMatchObject({ instance: decode, cached_tokens: 2048 });
    expect(second.prefill_instance).toBeUndefined();

    // Turn 2: P still caches turn 0's blocks, T lacks 512 tokens; the pair is warm now.
    expect(third).toMatchObject({ instance: decode, prefill_instance: prefill, cached_tokens: 2048 });
    expect(third.decode_cached_tokens).toBe(2560);
    expect(third.transferred_tokens).toBe(512);
    expect(third.transfer_s).toBeCloseTo(transferMs(DEFAULT_OFFLOAD_COST, 512, false) / 1000, 12);
    expect(reports.slice(2).map((r) => [r.kind, r.ticket])).toEqual([
      ['first', PREFILL_TICKETS + 1],
      ['complete', PREFILL_TICKETS + 1],
    ]);
    expect(reports[2]!.atMs / 1000).toBeGreaterThan(third.dispatch);
    expect(reports[2]!.atMs / 1000).toBeLessThan(third.first_token - third.transfer_s!);
  });

  it('times the transfer with the policy-independent link given in transferCost', () => {
    forceOffload((request, decision) => (request.inputTokens === 2048 ? 1 - decision.index : undefined));
    const fast = { linkGbps: 100, layerwise: true, coldPenaltyMs: 0 };
    const { records } = simulate(trace.slice(0, 1), { policy: 'sticky', instances: 2, transferCost: fast });
    const model = { ...DEFAULT_OFFLOAD_COST, ...fast };
    expect(records[0]!.transfer_s).toBeCloseTo(transferMs(model, 2048, true) / 1000, 12);
    expect(() => simulate(trace, { policy: 'sticky', instances: 2, transferCost: { warmOverheadMs: -1 } })).toThrow(
      /transferCost\.warmOverheadMs/,
    );
  });

  it('completes under memory pressure, where held and transferred blocks compete with running requests', () => {
    const synth = [...synthesizeTrace({ sessions: 30, seed: 7, duration: 40 })];
    const largest = Math.max(...synth.map((r) => r.inputLength + r.outputLength));
    const capacityBlocks = Math.ceil((largest * 1.01) / 16); // barely the largest request per engine
    const pick = (request: RouteRequest, decision: Decision): number | undefined =>
      request.inputTokens! - decision.predictedCachedTokens > 1000 ? (decision.index + 1) % 3 : undefined;
    forceOffload(pick);
    const ahead = simulate(synth, { policy: 'unified+A+B', instances: 3, capacityBlocks });
    const stepwise = simulate(synth, { policy: 'unified+A+B', instances: 3, capacityBlocks, runAhead: false });
    expect(ahead.records).toHaveLength(synth.length);
    expect(ahead.records).toEqual(stepwise.records);
    expect(ahead.preemptions).toBeGreaterThan(0);
    expect(offloadMetrics(ahead.records).offloads).toBeGreaterThan(10);
  });

  it('gives the same records whether silent steps run ahead or not, on every engine state', () => {
    const synth = [...synthesizeTrace({ sessions: 30, seed: 5, duration: 40 })];
    // Offload every request with more than 1,000 uncached tokens on its target, to the next instance.
    const pick = (request: RouteRequest, decision: Decision): number | undefined =>
      request.inputTokens! - decision.predictedCachedTokens > 1000 ? (decision.index + 1) % 4 : undefined;
    for (const engineState of ['shadow', 'shm'] as const) {
      forceOffload(pick);
      const ahead = simulate(synth, { policy: 'unified+A+B', instances: 4, engineState });
      const stepwise = simulate(synth, { policy: 'unified+A+B', instances: 4, engineState, runAhead: false });
      vi.restoreAllMocks();
      expect(ahead.records).toEqual(stepwise.records);
      expect(ahead.records).toHaveLength(synth.length);
      const offloaded = ahead.records.filter((r) => r.prefill_instance !== undefined);
      expect(offloaded.length).toBeGreaterThan(20);
      for (const r of offloaded) {
        expect(r.prefill_instance).toBe((r.instance + 1) % 4);
        expect(r.first_token - r.dispatch).toBeGreaterThan(r.transfer_s!);
        expect(r.transfer_s! * 1000).toBeGreaterThanOrEqual(DEFAULT_OFFLOAD_COST.warmOverheadMs);
      }
      // Every pair's first transfer is cold, later ones warm: at most 4 ordered pairs are used here.
      const cold = offloaded.filter(
        (r) => r.transfer_s! * 1000 >= transferMs(DEFAULT_OFFLOAD_COST, r.transferred_tokens!, true) - 1e-9,
      );
      expect(cold.length).toBeLessThanOrEqual(4);
    }
  });

  it('offload figures: records, sim run --json and --records, prediction against the decode instance', async () => {
    const tracePath = join(dir, 'trace.jsonl');
    await writeTrace(trace, tracePath, 'session');
    forceOffload((request, decision) =>
      request.inputTokens === 2048 || request.inputTokens === 3072 ? 1 - decision.index : undefined,
    );
    const writes: string[] = [];
    vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
      writes.push(String(chunk));
      return true;
    });
    const recordsPath = join(dir, 'records.msgpack');
    await simRunVerb({ trace: tracePath, policy: 'sticky', instances: '2', json: true, records: recordsPath });
    vi.restoreAllMocks();
    const summary = JSON.parse(writes.join(''));
    const { records, header } = readRecordFile(recordsPath);
    const offloaded = records.filter((r) => r.prefill_instance !== undefined);
    expect(offloaded).toHaveLength(2);
    expect(summary.offloads).toBe(2);
    const meanTtft =
      (offloaded[0]!.first_token - offloaded[0]!.dispatch + offloaded[1]!.first_token - offloaded[1]!.dispatch) / 2;
    expect(summary.offloaded_ttft_mean_s).toBeCloseTo(meanTtft, 12);
    expect(summary.transferred_tokens).toBe(2048 + 512);
    expect(summary.requests).toBe(3);
    expect(header?.policy).toBe('sticky');
    // The router predicted the decode instance's cache: offloaded records are checked against it.
    expect(summary.prediction).toEqual(predictionAccuracy(records));
    expect(predictionAccuracy(records)!.exact).toBe(3);
    const offload = offloadMetrics(records);
    expect(offload).toEqual({
      offloads: 2,
      offloaded_ttft_mean_s: summary.offloaded_ttft_mean_s,
      transfer_s_mean: (offloaded[0]!.transfer_s! + offloaded[1]!.transfer_s!) / 2,
      transferred_tokens: 2560,
    });
    // The text form adds one line for them, and none without offloads.
    const options = { policy: 'sticky' as const, instances: 2, engineState: 'shadow' as const };
    const text = renderMetrics(options, runMetrics(records), 1, offload).split('\n');
    expect(text.at(-1)).toMatch(
      /^offloaded prefills 2 · their TTFT mean [\d.]+ m?s · transfer mean [\d.]+ m?s · 2,560 tokens moved$/,
    );
    expect(renderMetrics(options, runMetrics(records), 1, offloadMetrics([])).split('\n')).toHaveLength(
      text.length - 1,
    );
  });

  it('without offloads: offloads 0 and the means null; the sweep shows no offload table', () => {
    const { records } = simulate(trace, { policy: 'sticky', instances: 2 });
    expect(records.every((r) => r.prefill_instance === undefined)).toBe(true);
    expect(offloadMetrics(records)).toEqual({
      offloads: 0,
      offloaded_ttft_mean_s: null,
      transfer_s_mean: null,
      transferred_tokens: 0,
    });
    const cells = planCells(['sticky'], ['shadow'], 'sim');
    const summaries = new Map([[cells[0]!.id, cellSummary(records, { makespan: 1, preemptions: 0, evictions: 0 })]]);
    expect(summaries.get(cells[0]!.id)).toMatchObject({ offloads: 0, offloaded_ttft_mean_s: null });
    expect(renderOffload(cells, summaries)).toBeUndefined();
  });

  it('the sweep’s offload table: TTFT p90, TPOT p99, interference, offloads and their means per cell', () => {
    const synth = [...synthesizeTrace({ sessions: 20, seed: 3, duration: 30 })];
    const cells = planCells(['unified+A+B', 'unified+A+B+offload'], ['shadow'], 'sim');
    const plain = simulate(synth, { policy: 'unified+A+B', instances: 3 }).records;
    forceOffload((request, decision) => (request.inputTokens! > 4000 ? (decision.index + 1) % 3 : undefined));
    const offloaded = simulate(synth, { policy: 'unified+A+B', instances: 3 }).records;
    vi.restoreAllMocks();
    const totals = { makespan: 1, preemptions: 0, evictions: 0 };
    const summaries = new Map([
      [cells[0]!.id, cellSummary(plain, totals)],
      [cells[1]!.id, cellSummary(offloaded, totals)],
    ]);
    const table = renderOffload(cells, summaries)!;
    const lines = table.split('\n');
    expect(lines[0]).toBe('## Offload');
    expect(lines[2]).toMatch(/TTFT p90 \(s\) \| TPOT p99 \(ms\) \| interference \(×\) \| offloads/);
    const m = runMetrics(offloaded);
    const o = offloadMetrics(offloaded);
    expect(o.offloads).toBeGreaterThan(0);
    expect(lines[5]).toBe(
      `| ${cells[1]!.id} | ${m.ttft_s.p90.toFixed(2)} | ${m.tpot_ms.p99.toFixed(1)} | ${m.interference_index!.toFixed(2)} | ${o.offloads} (${((o.offloads / m.requests) * 100).toFixed(1)} %) | ${o.offloaded_ttft_mean_s!.toFixed(2)} | ${(o.transfer_s_mean! * 1000).toFixed(0)} |`,
    );
    expect(lines[4]).toMatch(/^\| unified_A_B-shadow \| .* \| 0 \(0\.0 %\) \| - \| - \|$/);
  });
});

/** The routing core's `+offload` policies, once they exist (the core branch of issue #18). */
const offloadPolicies = (() => {
  try {
    new Router({ instances: 1, policy: 'unified+A+B+offload' as never });
    return true;
  } catch {
    return false;
  }
})();

describe.skipIf(!offloadPolicies)('with the core’s offload layer (unified+A+B+offload)', () => {
  const synth = [...synthesizeTrace({ sessions: 60, seed: 1, duration: 120 })];

  it('offloads long uncached prefills onto decode-free instances and decodes them where routed', () => {
    const run = simulate(synth, { policy: 'unified+A+B+offload' as never, instances: 8 });
    const offloaded = run.records.filter((r) => r.prefill_instance !== undefined);
    expect(offloaded.length).toBeGreaterThan(0);
    for (const r of offloaded) {
      expect(r.prefill_instance).not.toBe(r.instance);
      expect(r.input_tokens - (r.decode_cached_tokens ?? 0)).toBeGreaterThan(DEFAULT_OFFLOAD_COST.thresholdTokens);
      expect(r.first_token - r.dispatch).toBeGreaterThan(r.transfer_s!);
    }
    expect(run.records).toHaveLength(synth.length);
    expect(offloadMetrics(run.records).offloads).toBe(offloaded.length);
  });

  it('is deterministic and independent of running silent steps ahead', () => {
    const a = simulate(synth, { policy: 'unified+A+B+offload' as never, instances: 4, engineState: 'shm' });
    const b = simulate(synth, {
      policy: 'unified+A+B+offload' as never,
      instances: 4,
      engineState: 'shm',
      runAhead: false,
    });
    expect(a.records).toEqual(b.records);
  });
});
