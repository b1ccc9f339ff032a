/**
 * TicketMirror: the router's JS-side copy of the core's open tickets, so onFirstToken(),
 * complete() and abort() validate a ticket and queue its event without a call into the core, and
 * reconcile() can release tickets whose complete() never came.
 *
 * A ticket is generation * 2^32 + slab index (native/core/ticket-table.h). Per slab index the mirror
 * keeps the open ticket, its phase, the instance slot it was dispatched to and the route count at
 * dispatch. Ticket events go into a queue the core drains on its next call (CoreBuffers.events);
 * a full queue is drained at once.
 *
 * Invariants:
 * - a closed ticket's index holds -1 and PHASE_CLOSED, so a stale ticket is refused
 *   (ERR_KVROUTE_UNKNOWN_TICKET);
 * - a ticket reconcile() released stays known (up to MAX_RELEASED, oldest forgotten first), so
 *   its caller's late onFirstToken()/complete()/abort() are no-ops, not errors;
 * - an open ticket on a removed instance stays valid but belongs to no slot (-1), as a new
 *   instance may reuse the slot.
 * Complexity: O(1) per event; reconcile() is O(open tickets) per call.
 */
import { EVENT_ABORT, EVENT_FIRST_TOKEN, type CoreRouter } from './core-router.js';
import { invalidType, rangeError } from './errors.js';

/** Ticket events queued before the core applies them (see CoreBuffers.events). */
export const EVENT_QUEUE = 256;
/** A ticket is generation * 2^32 + slab index (native/core/ticket-table.h). */
const TICKET_INDEX_RANGE = 2 ** 32;
const PHASE_CLOSED = 0;
const PHASE_WAITING = 1;
const PHASE_DECODING = 2;
/** Released tickets remembered for their callers' late complete(); the oldest are forgotten past this. */
const MAX_RELEASED = 65_536;
/** The slab index of a ticket; floor arithmetic, as `%` on a double above the Smi range is slow. */
const indexOfTicket = (ticket: number): number => ticket - Math.floor(ticket / TICKET_INDEX_RANGE) * TICKET_INDEX_RANGE;

export class TicketMirror {
  /** The queue the core drains: [count, ticket, kind, ticket, kind, …]. */
  readonly events = new Float64Array(1 + 2 * EVENT_QUEUE);
  private ticketAt: Float64Array = new Float64Array(64).fill(-1);
  private phaseAt: Uint8Array = new Uint8Array(64);
  /** The instance slot and the route count at which each open ticket was dispatched (for reconcile()). */
  private slotAt: Int32Array = new Int32Array(64);
  private routedAt: Float64Array = new Float64Array(64);
  private routeCount = 0;
  /** Per slot: the route count and the unexplained excess at its last reconcile(). */
  private readonly lastReconcile = new Map<number, { routeCount: number; excess: number }>();
  /** Tickets reconcile() released, so the caller's later complete()/abort() are no-ops (insertion order = age). */
  private readonly released = new Set<number>();
  /** Set once the core exists (it takes `events` as one of its buffers). */
  core!: CoreRouter;

  /** Records a ticket the core just opened on `slot`. */
  track(ticket: number, slot: number): void {
    const index = indexOfTicket(ticket);
    if (index >= this.ticketAt.length) this.growTracking(index);
    this.ticketAt[index] = ticket;
    this.phaseAt[index] = PHASE_WAITING;
    this.slotAt[index] = slot;
    this.routedAt[index] = ++this.routeCount;
  }

  /** The request produced its first token: waiting to decoding. Repeats are no-ops. */
  firstToken(ticket: number): void {
    const index = this.openIndex(ticket);
    if (index < 0 || this.phaseAt[index] !== PHASE_WAITING) return;
    this.phaseAt[index] = PHASE_DECODING;
    this.enqueue(ticket, EVENT_FIRST_TOKEN);
  }

  /** Closes an open ticket with EVENT_COMPLETE or EVENT_ABORT. */
  close(ticket: number, kind: number): void {
    const index = this.openIndex(ticket);
    if (index < 0) {
      this.released.delete(ticket); // the caller's own close of a released ticket: done with it
      return;
    }
    this.phaseAt[index] = PHASE_CLOSED;
    this.ticketAt[index] = -1;
    this.enqueue(ticket, kind);
  }

  /** See Router.reconcile(): releases the oldest persistently unexplained tickets on `slot`. */
  reconcile(slot: number, engineRequests: number): number {
    const previous = this.lastReconcile.get(slot);
    const open: number[] = [];
    for (let index = 0; index < this.ticketAt.length; index++)
      if (this.phaseAt[index] !== PHASE_CLOSED && this.slotAt[index] === slot) open.push(index);
    const excess = open.length - engineRequests;
    let release = 0;
    if (previous !== undefined && excess > 0 && previous.excess > 0) {
      const eligible = open.filter((index) => this.routedAt[index]! <= previous.routeCount);
      eligible.sort((a, b) => this.routedAt[a]! - this.routedAt[b]!);
      release = Math.min(excess, previous.excess, eligible.length);
      for (const index of eligible.slice(0, release)) {
        const ticket = this.ticketAt[index]!;
        this.close(ticket, EVENT_ABORT);
        this.released.add(ticket);
      }
      for (const ticket of this.released) {
        if (this.released.size <= MAX_RELEASED) break;
        this.released.delete(ticket);
      }
    }
    this.lastReconcile.set(slot, { routeCount: this.routeCount, excess: excess - release });
    return release;
  }

  /** The instance on `slot` was removed: its open tickets stay valid but belong to no slot. */
  forgetSlot(slot: number): void {
    this.lastReconcile.delete(slot);
    for (let index = 0; index < this.slotAt.length; index++) if (this.slotAt[index] === slot) this.slotAt[index] = -1;
  }

  /** Makes room for ticket slab index `index` (rare: apart from track(), so route() inlines it). */
  private growTracking(index: number): void {
    const ticketAt = new Float64Array(Math.max(index + 1, this.ticketAt.length * 2)).fill(-1);
    ticketAt.set(this.ticketAt);
    const phaseAt = new Uint8Array(ticketAt.length);
    phaseAt.set(this.phaseAt);
    const slotAt = new Int32Array(ticketAt.length);
    slotAt.set(this.slotAt);
    const routedAt = new Float64Array(ticketAt.length);
    routedAt.set(this.routedAt);
    this.ticketAt = ticketAt;
    this.phaseAt = phaseAt;
    this.slotAt = slotAt;
    this.routedAt = routedAt;
  }

  /**
   * The slab index of an open ticket, or -1 for one reconcile() released; throws
   * ERR_KVROUTE_UNKNOWN_TICKET otherwise.
   */
  private openIndex(ticket: number): number {
    if (typeof ticket !== 'number') throw invalidType('ticket', 'a number', ticket);
    const index = Number.isSafeInteger(ticket) && ticket >= 0 ? indexOfTicket(ticket) : -1;
    if (index < 0 || this.ticketAt[index] !== ticket || this.phaseAt[index] === PHASE_CLOSED) {
      if (this.released.size > 0 && this.released.has(ticket)) return -1;
      throw unknownTicket(ticket);
    }
    return index;
  }

  private enqueue(ticket: number, kind: number): void {
    let n = this.events[0]!;
    if (n === EVENT_QUEUE) {
      this.core.drainEvents();
      n = 0;
    }
    this.events[1 + 2 * n] = ticket;
    this.events[2 + 2 * n] = kind;
    this.events[0] = n + 1;
  }
}

function unknownTicket(ticket: number) {
  return rangeError('ERR_KVROUTE_UNKNOWN_TICKET', `ticket ${ticket} is not open (unknown, completed or aborted)`);
}
