/**
 * One request's standing with flow control (admission.ts, src/flow/), kept beside its exchange:
 * its tenant and class (from the headers copied in the uWS handler, and the body's `priority`),
 * when it queued and how long it waited, and the output tokens charged to its tenant so far. The
 * exchange calls, in order:
 * entry() once at admission (a bad header throws the 400), queued() if it waits, decided() once
 * (admitted or refused), streamed() per streamed chunk, settled() once at the end.
 */
import type { FlowEntry } from '../../flow/flow-controller.js';
import { FlowRequestError, identify, type FlowHeaders } from '../../flow/flow-identity.js';
import type { FlowOutcome, ObserverList, RequestOutcome, RequestRecord } from '../observe/proxy-observer.js';
import type { ProxyState } from '../proxy-state.js';
import { ClientError } from '../server/error-body.js';
import { flowEntry } from './flow-entry.js';
import type { ParsedRequest } from './request-inputs.js';

export class FlowTicket {
  /** The request's tenant; '' until entry() (it never reached admission). Its slot is given back in its name. */
  tenant = '';
  private priority = '';
  private queuedAt = -1;
  /** ms it waited for a slot (0 when it went at once). */
  private queueMs = 0;
  /** Its prompt tokens as admission counted them (0 before entry()): its slot is given back with them. */
  inputTokens = 0;
  /** The tenant has a tokens-per-minute limit: its output is charged as it streams. */
  private chargesOutput = false;
  private charged = 0;

  constructor(
    private readonly headers: FlowHeaders,
    private readonly state: ProxyState,
    private readonly observers: ObserverList,
  ) {}

  /** What admission is told; throws a 400 ClientError naming a bad flow header. */
  entry(parsed: ParsedRequest, blockSize: number, now: number): FlowEntry {
    const flow = this.state.admission.flow;
    let identity;
    try {
      identity = identify(this.headers, flow.flowConfig, parsed.priority);
    } catch (error) {
      if (!(error instanceof FlowRequestError)) throw error;
      throw new ClientError(400, error.message, 'invalid_field', error.header);
    }
    this.tenant = identity.tenant;
    this.priority = flow.flowConfig.classes[identity.classRank]!.name;
    this.chargesOutput = flow.tenant(identity.tenant).tpm !== undefined;
    const entry = flowEntry(parsed, identity, this.state, now, blockSize);
    this.inputTokens = entry.inputTokens;
    return entry;
  }

  queued(now: number): void {
    this.queuedAt = now;
  }

  /** Admitted (at once, or after waiting) or refused; observers hear it once. */
  decided(outcome: FlowOutcome): void {
    if (this.queuedAt >= 0) this.queueMs = performance.now() - this.queuedAt;
    if (!this.observers.any) return;
    const input = outcome === 'admitted' ? this.inputTokens : 0;
    this.observers.onFlow(this.tenant, this.priority, outcome, this.queueMs, input);
  }

  /** A streamed answer's output tokens so far: the increase is charged to a tenant with a token limit. */
  streamed(total: number): void {
    if (!this.chargesOutput || total <= this.charged) return;
    this.state.admission.flow.chargeOutput(this.tenant, total - this.charged, performance.now());
    this.charged = total;
  }

  /** The request ended: output not yet charged is, and a session's successful turn is marked ended. */
  settled(outcome: RequestOutcome, outputTokens: number | undefined, session: string | number | undefined): void {
    if (this.tenant === '') return;
    if (outputTokens !== undefined) {
      this.streamed(outputTokens);
      if (this.observers.any) this.observers.onFlowOutput(this.tenant, this.priority, outputTokens);
    }
    if (outcome === 'success' && session !== undefined && session !== '')
      this.state.sessionTurns.ended(String(session), performance.now());
  }

  /** Adds tenant, priority and queue wait to the request's record, once it reached admission. */
  annotate(record: RequestRecord): void {
    if (this.tenant === '') return;
    record.tenant = this.tenant;
    record.priority = this.priority;
    record.queueMs = this.queueMs;
  }
}
