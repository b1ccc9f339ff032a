/**
 * SessionReturns: the load of agentic sessions between turns (docs/policies.md "Sessions between
 * turns"). A session in a tool call holds its KV on its instance and will come back there, usually
 * within seconds; at that moment the instance has nothing in flight for it, so min_ttft sees it
 * idle and may place a new session there just before several long sessions resume. This keeps,
 * per instance, the expected prefill of the sessions idle on it for less than their typical think
 * time, and pushes it into the router (Router.setReturningTokens), where min_ttft counts it as
 * prefill queued there.
 *
 * The embedder tells it what it tells the router, off the routing path:
 *
 *   returns.arriving(session);  const t = router.route(request);  returns.routed(t, session);
 *   router.complete(t);         returns.completed(t);
 *   router.abort(t);            returns.aborted(t);
 *
 * arriving() takes the session's own expected return off its instance before the route, so a
 * returning session is never pushed away by itself.
 *
 * The model: a session's next prefill is the mean (EWMA, weight `smoothing`) of its own later
 * turns' uncached tokens, as the router predicted them at dispatch; before it has one, the fleet's
 * mean of later turns. It is expected back while idle for less than `horizonFactor` × its think
 * time (the EWMA of its own gaps from completion to next arrival; `priorThinkSeconds` before
 * one), and never after `maxIdleSeconds`. A session still in flight, or aborted, counts nothing.
 *
 * Invariants: each instance's pushed total is the sum of its idle sessions' expected tokens, in
 * whole tokens (so sums are exact and never negative); at most `maxSessions` sessions are
 * remembered (the least recently active forgotten first). Times are ms on the tracker's clock
 * (`now`, default performance.now()); a simulator passes its virtual times.
 * Complexity: O(1) per call, plus an O(idle sessions) expiry scan at most every `scanMs`.
 */
import { invalidValue, rangeError } from './errors.js';
import type { Router } from './router.js';

export interface SessionReturnsOptions {
  /** A session is expected back while idle for less than this many think times (default 3). */
  horizonFactor?: number;
  /** The think time assumed of a session before its first gap, seconds (default 2). */
  priorThinkSeconds?: number;
  /** Never expected back after this long idle, seconds (default 60). */
  maxIdleSeconds?: number;
  /** EWMA weight of the newest gap and the newest later turn's prefill (default 0.5). */
  smoothing?: number;
  /** Sessions remembered at most (default 65,536). */
  maxSessions?: number;
  /** Expiry scans at most this often, ms (default 250). */
  scanMs?: number;
  /** The clock, ms (default performance.now()). */
  now?: () => number;
}

interface SessionState {
  instance: string;
  /** Turns routed so far. */
  turns: number;
  /** EWMA of its later turns' uncached tokens; NaN before its second turn. */
  laterPrefill: number;
  /** EWMA of its gaps, ms; NaN before one. */
  thinkMs: number;
  /** When it went idle (its last completion), ms; NaN while in flight or gone. */
  idleSinceMs: number;
  /** What it adds to its instance's total while idle (whole tokens). */
  counted: number;
}

export class SessionReturns {
  private readonly sessions = new Map<string, SessionState>();
  private readonly open = new Map<number, string>();
  private readonly totals = new Map<string, number>();
  private readonly idle = new Set<string>();
  private fleetLaterPrefill = NaN;
  private lastScanMs = -Infinity;
  private readonly o: Required<Omit<SessionReturnsOptions, 'now'>>;
  private readonly now: () => number;

  constructor(
    private readonly router: Router,
    options: SessionReturnsOptions = {},
  ) {
    this.o = {
      horizonFactor: options.horizonFactor ?? 3,
      priorThinkSeconds: options.priorThinkSeconds ?? 2,
      maxIdleSeconds: options.maxIdleSeconds ?? 60,
      smoothing: options.smoothing ?? 0.5,
      maxSessions: options.maxSessions ?? 65_536,
      scanMs: options.scanMs ?? 250,
    };
    const o = this.o;
    for (const key of ['horizonFactor', 'priorThinkSeconds', 'maxIdleSeconds', 'scanMs'] as const)
      if (!(Number.isFinite(o[key]) && o[key] >= 0)) throw invalidValue(key, 'a finite number >= 0', o[key]);
    if (!(o.smoothing > 0 && o.smoothing <= 1)) throw invalidValue('smoothing', 'a number in (0, 1]', o.smoothing);
    if (!(Number.isInteger(o.maxSessions) && o.maxSessions >= 1))
      throw invalidValue('maxSessions', 'an integer >= 1', o.maxSessions);
    this.now = options.now ?? (() => performance.now());
  }

  /** The session's next request is about to be routed: its expected return leaves its instance. */
  arriving(session: string | undefined, atMs: number = this.now()): void {
    checkTime(atMs);
    this.expire(atMs);
    if (session === undefined) return;
    const s = this.sessions.get(session);
    if (s === undefined || Number.isNaN(s.idleSinceMs)) return;
    const gap = atMs - s.idleSinceMs;
    if (gap >= 0) s.thinkMs = Number.isNaN(s.thinkMs) ? gap : ewma(s.thinkMs, gap, this.o.smoothing);
    this.wake(session, s);
  }

  /** Right after route() returned `ticket` for `session`: reads router.decision. */
  routed(ticket: number, session: string | undefined): void {
    const d = this.router.decision;
    if (d.ticket !== ticket || d.instance === '')
      throw rangeError(
        'ERR_KVROUTE_UNKNOWN_TICKET',
        `ticket ${ticket} is not the last route()'s: call routed() right after route()`,
      );
    if (session === undefined) return;
    let s = this.sessions.get(session);
    if (s === undefined) {
      if (this.sessions.size >= this.o.maxSessions) this.forget(this.sessions.keys().next().value!);
      s = { instance: d.instance, turns: 0, laterPrefill: NaN, thinkMs: NaN, idleSinceMs: NaN, counted: 0 };
    } else {
      this.wake(session, s); // routed without arriving(): no gap, but it is in flight now
      this.sessions.delete(session); // re-inserted below: the most recently active last
    }
    this.sessions.set(session, s);
    s.turns += 1;
    s.instance = d.instance;
    if (s.turns >= 2 && d.offload.outcome !== 'offload') {
      const uncached = d.predictedUncachedTokens;
      s.laterPrefill = Number.isNaN(s.laterPrefill) ? uncached : ewma(s.laterPrefill, uncached, this.o.smoothing);
      this.fleetLaterPrefill = Number.isNaN(this.fleetLaterPrefill)
        ? uncached
        : ewma(this.fleetLaterPrefill, uncached, 0.05);
    }
    this.open.set(ticket, session);
  }

  /** The ticket completed: its session is idle on its instance, expected back. */
  completed(ticket: number, atMs: number = this.now()): void {
    checkTime(atMs);
    const session = this.open.get(ticket);
    this.open.delete(ticket);
    this.expire(atMs);
    if (session === undefined) return;
    const s = this.sessions.get(session);
    if (s === undefined || !Number.isNaN(s.idleSinceMs)) return;
    const expected = Number.isNaN(s.laterPrefill) ? this.fleetLaterPrefill : s.laterPrefill;
    s.idleSinceMs = atMs;
    s.counted = Number.isNaN(expected) ? 0 : Math.round(expected);
    this.idle.add(session);
    this.add(s.instance, s.counted);
  }

  /** The ticket was aborted: forgotten; its session counts nothing until its next completion. */
  aborted(ticket: number): void {
    this.open.delete(ticket);
  }

  /** The tokens pushed for `instance` now (0 for one with no idle session). */
  returningTokens(instance: string): number {
    return this.totals.get(instance) ?? 0;
  }

  /** Sessions idle and expected back now. */
  get idleSessions(): number {
    return this.idle.size;
  }

  /** Drops the idle sessions past their horizon (at most every scanMs). */
  private expire(atMs: number): void {
    if (atMs - this.lastScanMs < this.o.scanMs) return;
    this.lastScanMs = atMs;
    const cap = this.o.maxIdleSeconds * 1000;
    for (const session of this.idle) {
      const s = this.sessions.get(session)!;
      const think = Number.isNaN(s.thinkMs) ? this.o.priorThinkSeconds * 1000 : s.thinkMs;
      if (atMs - s.idleSinceMs > Math.min(cap, this.o.horizonFactor * think)) this.wake(session, s);
    }
  }

  /** The session no longer counts on its instance (it arrived, or expired). */
  private wake(session: string, s: SessionState): void {
    if (Number.isNaN(s.idleSinceMs)) return;
    this.idle.delete(session);
    s.idleSinceMs = NaN;
    this.add(s.instance, -s.counted);
    s.counted = 0;
  }

  private forget(session: string): void {
    const s = this.sessions.get(session)!;
    this.wake(session, s);
    this.sessions.delete(session);
  }

  private add(instance: string, tokens: number): void {
    if (tokens === 0) return;
    const total = (this.totals.get(instance) ?? 0) + tokens;
    if (total === 0) this.totals.delete(instance);
    else this.totals.set(instance, total);
    if (this.router.hasInstance(instance)) this.router.setReturningTokens(instance, total);
  }
}

const ewma = (old: number, sample: number, weight: number): number => old + weight * (sample - old);

function checkTime(atMs: number): void {
  if (!Number.isFinite(atMs)) throw invalidValue('atMs', 'a finite number of ms', atMs);
}
