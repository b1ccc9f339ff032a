/**
 * `replay()` end to end on 127.0.0.1: against simulated engines behind the proxy (records
 * complete and readable, cached tokens where the trace shares blocks, session ordering, the
 * engine-state log), and against stubs (poisson rate, failures recorded while the run goes on,
 * a target down at start or dying mid-run, find-srr on a server that falls behind past a capacity).
 */
import { existsSync, readFileSync } from 'node:fs';

import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

import { findSrr, parseSlo } from '../src/replay/find-srr.js';
import { replay } from '../src/replay/replay.js';
import { ReplayError } from '../src/replay/target-check.js';
import { readRecordFile } from '../src/trace/record-file.js';
import type { RequestRecord } from '../src/trace/records.js';
import { MODEL, refusingUrl, scopedRigs, startFleetProxy, type ProxyRig } from './helpers/proxy-harness.js';
import {
  BLOCK,
  capacityStub,
  fastStub,
  maxTokens,
  scratch,
  sessionTrace,
  sseBody,
  writeTraceFile,
} from './helpers/replay-rig.js';
import type { SimFleet } from '../src/sim/sim-fleet.js';

const files = scratch();
const rigs = scopedRigs();
afterEach(() => rigs.closeAll());

describe('against simulated engines behind the proxy', () => {
  let rig: ProxyRig & { fleet: SimFleet };
  beforeAll(async () => {
    rig = await startFleetProxy(2, {}, 200);
  });
  afterAll(() => rig?.close());

  it('records every request, readable, with cached tokens where the trace shares blocks, turns in order', async () => {
    const requests = sessionTrace(4, 3, 8, 6, 0.01);
    const trace = writeTraceFile(files.path('sessions.jsonl'), requests);
    const out = files.path('sessions.rec');
    const result = await replay({
      trace,
      target: rig.base,
      records: out,
      engineState: rig.fleet.urls,
      engineStateIntervalMs: 50,
    });
    expect(result).toMatchObject({ sent: 12, done: 12, errors: 0, stoppedBy: 'end', model: MODEL });
    const file = readRecordFile(out);
    expect(file.truncated).toBeUndefined();
    expect(file.header).toMatchObject({ source: 'replay', target: rig.base, mode: 'session', trace: { path: trace } });
    expect(file.header!.trace.fingerprint).toMatch(/^sha256:[0-9a-f]{16}:12$/);
    expect(file.records).toHaveLength(12);
    const bySession = new Map<string, RequestRecord[]>();
    for (const r of file.records) {
      expect(r).toMatchObject({ status: 200, overlapped: false, preemptions: 0, output_tokens: 6 });
      expect(r.error).toBeUndefined();
      expect(r.instance).toBeGreaterThanOrEqual(0);
      expect(r.instance).toBeLessThan(2);
      expect(typeof r.reason).toBe('string');
      expect(r.dispatch).toBeLessThanOrEqual(r.first_token);
      expect(r.first_token).toBeLessThanOrEqual(r.finish);
      bySession.set(r.session, [...(bySession.get(r.session) ?? []), r]);
    }
    let stayed = 0;
    for (const turns of bySession.values()) {
      turns.sort((a, b) => a.turn - b.turn);
      expect(turns.map((r) => r.turn)).toEqual([1, 2, 3]);
      expect(turns[0]!.cached_tokens).toBe(0);
      for (let t = 1; t < turns.length; t++) {
        // Session dispatch: turn N+1 leaves only after turn N finished.
        expect(turns[t]!.dispatch).toBeGreaterThanOrEqual(turns[t - 1]!.finish);
        // Affinity sends the turn to the same engine, which holds the previous turn's full blocks
        // (the policy may move a turn off an engine it finds overloaded: then nothing is cached).
        if (turns[t]!.instance === turns[t - 1]!.instance) {
          stayed++;
          expect(turns[t]!.cached_tokens).toBeGreaterThanOrEqual((t * 8 - 1) * BLOCK);
        }
      }
    }
    expect(stayed).toBeGreaterThanOrEqual(4);
    // The engine-state log: JSON lines on the replay clock, one per engine per scrape.
    const lines = readFileSync(`${out}.engine-state`, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines.length).toBeGreaterThanOrEqual(2);
    // A scrape that timed out (a loaded machine) is a line with its error instead of the counts.
    for (const line of lines)
      expect(line).toMatchObject(
        'error' in line
          ? { engine: expect.any(Number), error: expect.any(String) }
          : { engine: expect.any(Number), running: expect.any(Number), kv_usage: expect.any(Number) },
      );
    expect(lines.some((l: object) => !('error' in l))).toBe(true);
    expect(new Set(lines.map((l: { url: string }) => l.url))).toEqual(new Set(rig.fleet.urls));
  });
});

describe('against stubs', () => {
  it('poisson: sends at the asked rate, in trace order', async () => {
    const stub = await rigs.stub((_req, res, body) =>
      res.writeHead(200, { 'content-type': 'text/event-stream' }).end(sseBody(maxTokens(body), 10)),
    );
    const requests = sessionTrace(300, 1, 1, 2);
    const result = await replay({
      trace: 'poisson',
      requests,
      target: stub.url,
      records: files.path('poisson.rec'),
      dispatch: { mode: 'poisson', rate: 200, seed: 3 },
    });
    expect(result).toMatchObject({ sent: 300, errors: 0 });
    const records = readRecordFile(files.path('poisson.rec')).records.sort((a, b) => a.dispatch - b.dispatch);
    const span = records[records.length - 1]!.dispatch - records[0]!.dispatch;
    const rate = (records.length - 1) / span;
    // Never faster than asked; a loaded machine can only send later, so the lower bound is loose
    // (test/replay-dispatcher.test.ts holds the exact schedule on a virtual clock).
    expect(rate).toBeLessThan(200 * 1.25);
    expect(rate).toBeGreaterThan(200 * 0.3);
    // Open loop in trace order: session s<i> is the i-th sent.
    expect(records.map((r) => Number(r.session.slice(1)))).toEqual(Array.from({ length: 300 }, (_, i) => i));
    expect(records.every((r) => r.instance === 0)).toBe(true);
  });

  it('session mode: --speed divides trace time; sessionless requests go at their arrival; --duration stops sending', async () => {
    const stub = await fastStub();
    rigs.add(stub.close);
    const requests = sessionTrace(5, 1, 1, 2, 0.5).map((r) => ({ ...r, sessionless: true }));
    const out = files.path('speed.rec');
    const result = await replay({ trace: 't', requests, target: stub.url, records: out, speed: 10 });
    expect(result).toMatchObject({ sent: 5, errors: 0, stoppedBy: 'end' });
    const dispatched = readRecordFile(out)
      .records.map((r) => r.dispatch)
      .sort((a, b) => a - b);
    // Trace time / 10: never early (a timer never fires early), and far earlier than at trace
    // time (i × 0.5 s); the bound on lateness is loose, for a loaded machine, not a target.
    for (const [i, at] of dispatched.entries()) {
      expect(at).toBeGreaterThanOrEqual(i * 0.05 - 0.002);
      expect(at).toBeLessThan(i * 0.05 + 0.2);
    }
    // 100 requests 0.1 s apart, stopped after 0.25 s: three sent (0, 0.1, 0.2), the rest never.
    const bounded = await replay({
      trace: 't',
      requests: sessionTrace(100, 1, 1, 2, 0.1),
      target: stub.url,
      duration: 0.25,
    });
    expect(bounded.stoppedBy).toBe('duration');
    expect(bounded.sent).toBe(3);
    expect(bounded.done).toBe(3);
  });

  it('the body: prompt, max_tokens, ignore_eos, streaming with usage, hash_ids, x-session-id', async () => {
    const stub = await fastStub();
    rigs.add(stub.close);
    const requests = sessionTrace(1, 2, 2, 5);
    await replay({ trace: 't', requests, target: stub.url, ignoreEos: false });
    const bodies = stub.requests.map((r) => JSON.parse(r.body.toString()) as Record<string, unknown>);
    expect(bodies[1]).toMatchObject({
      model: MODEL,
      max_tokens: 5,
      stream: true,
      stream_options: { include_usage: true },
      hash_ids: requests[1]!.hashIds,
      input_tokens: requests[1]!.inputLength,
    });
    expect(bodies[1]!.ignore_eos).toBeUndefined();
    expect((bodies[1]!.prompt as string).startsWith(bodies[0]!.prompt as string)).toBe(true);
    expect(stub.requests[0]!.headers['x-session-id']).toBe('s0');
    expect(stub.requests[0]!.headers['x-kvroute-tenant']).toBeUndefined();
    expect(stub.requests[0]!.url).toBe('/v1/completions');
  });

  it('sends a request’s tenant and class as flow control’s headers, and records them', async () => {
    const stub = await fastStub();
    rigs.add(stub.close);
    const requests = sessionTrace(2, 1, 2, 5).map((r, k) => ({
      ...r,
      tenant: `tenant-${k}`,
      ...(k === 0 ? { priority: 'high' } : {}),
    }));
    const out = files.path('tenants.rec');
    await replay({ trace: 't', requests, target: stub.url, records: out });
    const sent = new Map(stub.requests.map((q) => [q.headers['x-session-id'], q.headers]));
    expect(sent.get(requests[0]!.session)).toMatchObject({
      'x-kvroute-tenant': 'tenant-0',
      'x-kvroute-priority': 'high',
    });
    expect(sent.get(requests[1]!.session)!['x-kvroute-priority']).toBeUndefined();
    const records = new Map(readRecordFile(out).records.map((r) => [r.session, r]));
    expect(records.get(requests[0]!.session)).toMatchObject({ tenant: 'tenant-0', priority: 'high' });
    expect(records.get(requests[1]!.session)!.priority).toBeUndefined();
  });

  it('failures are recorded and the run goes on: a 503, a cut stream, an error event; the next turn follows', async () => {
    let n = 0;
    const stub = await rigs.stub((_req, res, body) => {
      const k = n++;
      if (k === 0)
        return void res
          .writeHead(503, { 'content-type': 'application/json' })
          .end('{"error":{"message":"overloaded"}}');
      if (k === 1) {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write('data: {"choices":[{"text":" a"}]}\n\n');
        return void setTimeout(() => res.destroy(), 10);
      }
      if (k === 2) return void res.writeHead(200).end('data: {"error":{"message":"engine died"}}\n\n');
      res.writeHead(200, { 'content-type': 'text/event-stream' }).end(sseBody(maxTokens(body), 10));
    });
    const requests = sessionTrace(1, 5, 1, 3);
    const out = files.path('failures.rec');
    const result = await replay({ trace: 't', requests, target: stub.url, records: out });
    expect(result).toMatchObject({ sent: 5, done: 5, errors: 3, stoppedBy: 'end' });
    const records = readRecordFile(out).records;
    expect(records.map((r) => r.turn)).toEqual([1, 2, 3, 4, 5]);
    expect(records[0]).toMatchObject({ status: 503, error: 'HTTP 503: overloaded', instance: 0 });
    expect(records[1]!.status).toBe(200);
    expect(records[1]!.error).toMatch(/terminated|closed|socket|ended before/i);
    expect(records[2]).toMatchObject({ status: 200, error: 'stream error: engine died' });
    expect(records[3]).toMatchObject({ status: 200, output_tokens: 3 });
    for (let i = 1; i < records.length; i++)
      expect(records[i]!.dispatch).toBeGreaterThanOrEqual(records[i - 1]!.finish);
  });

  it('a target down at start: ReplayError before any record file exists', async () => {
    const out = files.path('down.rec');
    const target = await refusingUrl();
    const run = replay({ trace: 't', requests: sessionTrace(1, 1), target, records: out });
    await expect(run).rejects.toThrow(ReplayError);
    await expect(run).rejects.toThrow(/not reachable.*ECONNREFUSED/);
    expect(existsSync(out)).toBe(false);
  });

  it('a target that dies mid-run: requests fail and are recorded; N connection failures in a row stop the run', async () => {
    const stub = await fastStub();
    const requests = sessionTrace(40, 1, 1, 2, 0.01);
    let closed = false;
    const out = files.path('dies.rec');
    const result = await replay({
      trace: 't',
      requests,
      target: stub.url,
      records: out,
      maxConnectionFailures: 5,
      onStart: (tally) => {
        const timer = setInterval(() => {
          if (tally.done >= 5 && !closed) {
            closed = true;
            clearInterval(timer);
            void stub.close();
          }
        }, 1);
      },
    });
    expect(result.stoppedBy).toBe('target-down');
    expect(result.sent).toBeLessThan(40);
    const records = readRecordFile(out).records;
    expect(records).toHaveLength(result.sent);
    const failed = records.filter((r) => r.status === 0);
    expect(failed.length).toBeGreaterThanOrEqual(5);
    expect(failed[0]!.error).toMatch(/ECONNREFUSED|ECONNRESET|closed/);
    expect(failed[0]!.instance).toBe(-1);
  });

  it('find-srr on a server that falls behind past its capacity: the bracket holds the capacity', async () => {
    // The stub's latency follows the trial's offered rate (capacityStub): immediate below 330
    // req/s, 2.5 s late from there. The SLO (p90 TTFT 1 s) lies far from both, so every trial's
    // verdict, and so the whole search, is the same on any machine, however loaded.
    let offered = 0;
    const stub = await capacityStub(330, 2_500, () => offered);
    rigs.add(stub.close);
    const result = await findSrr({
      replay: { trace: 't', requests: sessionTrace(50, 1, 1, 2), target: stub.url },
      records: files.path('srr.rec'),
      slo: parseSlo('ttft_p90=1'),
      startRate: 60,
      seed: 1,
      maxTrials: 6,
      trialRequests: 50,
      onTrialStart: (_n, rate) => (offered = rate),
    });
    // Doubling from 60 until a trial fails, then bisecting [240, 480] until the trials run out.
    expect(result.trials.map((t) => [t.n, t.rate, t.pass])).toEqual([
      [1, 60, true],
      [2, 120, true],
      [3, 240, true],
      [4, 480, false],
      [5, 360, false],
      [6, 300, true],
    ]);
    expect(result).toMatchObject({ rate: 300, bracket: [300, 360], stoppedBy: 'trials' });
    for (const trial of result.trials) {
      expect(trial).toMatchObject({ sent: 50, errors: 0 });
      // A failing trial failed on latency: its answers came late.
      if (!trial.pass) expect(trial.measured.ttft_p90!).toBeGreaterThanOrEqual(2.5);
      expect(existsSync(trial.records!)).toBe(true);
    }
    expect(readRecordFile(`${files.path('srr.rec')}.trial1`).header).toMatchObject({ mode: 'poisson', rate: 60 });
  });
});
