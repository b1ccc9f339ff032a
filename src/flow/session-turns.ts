/**
 * Which arriving requests are an agent session's next turn (a continuation): the session's
 * previous turn ended, successfully, within `windowMs`, and nothing of the session is in flight
 * (docs/flow-control.md "Agent sessions"). The tool call between the turns is the agent's user
 * waiting, so flow control keeps the turn's place (class-queue.ts).
 *
 * Bounded: at most `maxSessions` ended turns are remembered, the oldest forgotten first; each
 * call is O(1). Times are ms on the caller's clock (the simulator passes virtual time).
 */
export class SessionTurns {
  private readonly endedAt = new Map<string, number>();

  constructor(
    private readonly windowMs = 60_000,
    private readonly maxSessions = 65_536,
  ) {}

  /** The session's turn ended with an answer at `now`. */
  ended(session: string, now: number): void {
    this.endedAt.delete(session);
    if (this.endedAt.size >= this.maxSessions) this.endedAt.delete(this.endedAt.keys().next().value!);
    this.endedAt.set(session, now);
  }

  /** A turn of the session arrives: true when it continues a turn that ended within the window. */
  arriving(session: string, now: number): boolean {
    const at = this.endedAt.get(session);
    if (at === undefined) return false;
    this.endedAt.delete(session);
    return now - at <= this.windowMs;
  }
}
