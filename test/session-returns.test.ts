/**
 * SessionReturns (src/core/session-returns.ts, docs/policies.md "Sessions between turns"): a
 * session idle between turns counts its expected prefill on its instance until it comes back or
 * its horizon passes; min_ttft then places a new session elsewhere.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import { Router, SessionReturns } from '../src/index.js';
import { simulate } from '../src/sim/simulator.js';
import { synthesizeTrace } from '../src/trace/synth.js';
import { kvroute } from './helpers/cli-trace.js';
import { Rng } from './helpers/random.js';
import { IMPLEMENTATIONS, thrown } from './helpers/routers.js';

const chain = (from: number, n: number) => Array.from({ length: n }, (_, k) => from + k);

describe.each(IMPLEMENTATIONS)('SessionReturns ($impl)', ({ native }) => {
  const make = () => new Router({ instances: ['a', 'b'], policy: 'min_ttft', native, clock: 'manual', blockSize: 16 });

  /** One turn of `session`: arriving, route, routed, complete, completed; returns its instance. */
  function turn(r: Router, returns: SessionReturns, session: string, ids: number[], atMs: number): string {
    returns.arriving(session, atMs);
    const ticket = r.route({ hashIds: ids, session });
    returns.routed(ticket, session);
    const instance = r.decision.instance;
    r.complete(ticket);
    returns.completed(ticket, atMs + 100);
    return instance;
  }

  it("counts an idle session's later-turn prefill on its instance, and takes it off when it comes back", () => {
    const r = make();
    const returns = new SessionReturns(r, { now: () => 0 });
    const home = turn(r, returns, 'long', chain(1, 100), 0);
    // After its first turn there is no later turn to learn from, nor a fleet mean: nothing counted.
    expect(returns.returningTokens(home)).toBe(0);
    turn(r, returns, 'long', chain(1, 130), 1000); // 30 new blocks: 480 uncached tokens
    expect(returns.returningTokens(home)).toBe(480);
    expect(returns.idleSessions).toBe(1);
    const explained = r.explain({ hashIds: chain(5000, 4) }).candidates.find((c) => c.instance === home)!;
    expect(explained.terms!.returningTokens).toBe(480);
    // Its next turn takes its own expected return off before it is routed.
    returns.arriving('long', 2000);
    expect(returns.returningTokens(home)).toBe(0);
    expect(
      r.explain({ hashIds: chain(1, 140), session: 'long' }).candidates.every((c) => c.terms!.returningTokens === 0),
    ).toBe(true);
  });

  it('a new session goes elsewhere while a long session is expected back', () => {
    const r = make();
    const returns = new SessionReturns(r, { now: () => 0 });
    const home = turn(r, returns, 'long', chain(1, 1000), 0);
    turn(r, returns, 'long', chain(1, 1600), 1000); // 9,600 tokens per later turn
    expect(returns.returningTokens(home)).toBe(9600);
    const placed = r.explain({ hashIds: chain(90_000, 20), session: 'new' }).instance;
    expect(placed).not.toBe(home);
  });

  it('expires a session past horizonFactor × its think time, and never counts past maxIdleSeconds', () => {
    const r = make();
    const returns = new SessionReturns(r, { now: () => 0, horizonFactor: 3, priorThinkSeconds: 2, scanMs: 0 });
    const home = turn(r, returns, 's', chain(1, 10), 0);
    turn(r, returns, 's', chain(1, 20), 1100); // think gap 1,000 ms: horizon 3 s
    expect(returns.returningTokens(home)).toBe(160);
    returns.arriving(undefined, 1200 + 2900);
    expect(returns.returningTokens(home)).toBe(160);
    returns.arriving(undefined, 1200 + 3100);
    expect(returns.returningTokens(home)).toBe(0);
    expect(returns.idleSessions).toBe(0);
  });

  it('an aborted turn counts nothing; an unknown ticket is ignored; bad options and times are refused', () => {
    const r = make();
    const returns = new SessionReturns(r, { now: () => 0 });
    turn(r, returns, 's', chain(1, 10), 0);
    returns.arriving('s', 500);
    const ticket = r.route({ hashIds: chain(1, 30), session: 's' });
    returns.routed(ticket, 's');
    r.abort(ticket);
    returns.aborted(ticket);
    returns.completed(ticket, 900);
    expect(returns.idleSessions).toBe(0);
    returns.completed(12345, 900);
    expect(thrown(() => returns.routed(999, 's')).code).toBe('ERR_KVROUTE_UNKNOWN_TICKET');
    expect(thrown(() => returns.arriving('s', NaN)).message).toContain('atMs');
    expect(thrown(() => new SessionReturns(r, { horizonFactor: -1 })).message).toContain('horizonFactor');
    expect(thrown(() => new SessionReturns(r, { smoothing: 0 })).message).toContain('smoothing');
    expect(thrown(() => new SessionReturns(r, { maxSessions: 0.5 })).message).toContain('maxSessions');
  });

  it('keeps every total equal to the sum over its idle sessions, over random traffic', () => {
    const r = new Router({ instances: 4, policy: 'min_ttft', native, clock: 'manual', blockSize: 16 });
    const returns = new SessionReturns(r, { now: () => 0, maxSessions: 20, scanMs: 0 });
    const rng = new Rng(7);
    const open = new Map<number, string>();
    let now = 0;
    for (let step = 0; step < 3000; step += 1) {
      now += rng.int(0, 400);
      const session = `s${rng.int(0, 40)}`;
      if ([...open.values()].includes(session)) continue;
      returns.arriving(session, now);
      const ticket = r.route({ hashIds: chain(rng.int(0, 5) * 1000, rng.int(1, 200)), session });
      returns.routed(ticket, session);
      open.set(ticket, session);
      if (open.size > 8) {
        const [t] = [...open.keys()].slice(rng.int(0, open.size - 1));
        open.delete(t!);
        if (rng.chance(0.1)) {
          r.abort(t!);
          returns.aborted(t!);
        } else {
          r.complete(t!);
          returns.completed(t!, now);
        }
      }
      const pushed = r.explain({ hashIds: [1] }).candidates.map((c) => c.terms!.returningTokens);
      expect(pushed).toEqual(r.instances().map((id) => returns.returningTokens(id)));
      expect(pushed.every((t) => Number.isInteger(t) && t >= 0)).toBe(true);
    }
    expect(returns.idleSessions).toBeLessThanOrEqual(20);
  });
});

describe('the simulator counts sessions between turns by default', () => {
  it('sim run --no-session-returns runs without, and --json says which', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kvroute-returns-'));
    try {
      const trace = join(dir, 't.jsonl');
      const synth = ['trace', 'synth', '--sessions', '60', '--seed', '5', '--duration', '120', '-o', trace];
      expect(kvroute(synth).status).toBe(0);
      const run = (...flags: string[]) =>
        JSON.parse(kvroute(['sim', 'run', trace, '--instances', '4', '--json', ...flags]).stdout);
      const on = run();
      const off = run('--no-session-returns');
      expect(on.session_returns).toBe(true);
      expect(off.session_returns).toBe(false);
      // The trace of the simulate() test below, whose records differ with and without.
      const placement = (r: { per_instance: Array<{ requests: number }> }) => r.per_instance.map((i) => i.requests);
      expect(placement(on)).not.toEqual(placement(off));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('changes min_ttft decisions; --no-session-returns is the run without, and the header says which', () => {
    const trace = [...synthesizeTrace({ sessions: 60, seed: 5, duration: 120 })];
    const withReturns = simulate(trace, { policy: 'min_ttft', instances: 4 });
    const without = simulate(trace, { policy: 'min_ttft', instances: 4, sessionReturns: false });
    expect(JSON.stringify(withReturns.records)).not.toBe(JSON.stringify(without.records));
    expect(JSON.stringify(simulate(trace, { policy: 'min_ttft', instances: 4, sessionReturns: true }).records)).toBe(
      JSON.stringify(withReturns.records),
    );
  });
});
