/** In-flight requests keyed by ticket, the twin of native/core/ticket-table.h. */

export interface InFlight {
  slot: number;
  slotGeneration: number;
  uncachedTokens: number;
  blocks: number;
  decoding: boolean;
}

const GENERATION_LIMIT = 2 ** 21;
const INDEX_RANGE = 2 ** 32;

export class ReferenceTicketTable {
  private readonly entries: Array<{ request: InFlight | null; generation: number }> = [];
  private readonly free: number[] = [];
  private open = 0;

  get openCount(): number {
    return this.open;
  }

  openTicket(request: InFlight): number {
    let index = this.free.pop();
    if (index === undefined) {
      index = this.entries.length;
      this.entries.push({ request: null, generation: 0 });
    }
    const entry = this.entries[index]!;
    entry.request = request;
    this.open += 1;
    return entry.generation * INDEX_RANGE + index;
  }

  find(ticket: number): InFlight | undefined {
    if (!Number.isSafeInteger(ticket) || ticket < 0) return undefined;
    const index = ticket % INDEX_RANGE;
    const generation = Math.floor(ticket / INDEX_RANGE);
    const entry = this.entries[index];
    if (entry === undefined || entry.request === null || entry.generation !== generation) return undefined;
    return entry.request;
  }

  close(ticket: number): void {
    const index = ticket % INDEX_RANGE;
    const entry = this.entries[index]!;
    entry.request = null;
    entry.generation = (entry.generation + 1) % GENERATION_LIMIT;
    this.free.push(index);
    this.open -= 1;
  }

  *openRequests(): Generator<InFlight> {
    for (const entry of this.entries) if (entry.request !== null) yield entry.request;
  }
}
