/**
 * A MessagePort sender with bounded work in flight: every message it sends is answered by one
 * 'ack' from the receiver once processed, and `send` waits while `maxInFlight` are
 * unanswered. `fail` wakes a waiting sender with an error (the receiver died), so a pipeline
 * never hangs on a stage that is gone.
 */
import type { MessagePort, Transferable } from 'node:worker_threads';

export class AckedPort {
  private inFlight = 0;
  private wake: (() => void) | undefined;
  private failure: unknown;

  constructor(
    readonly port: MessagePort,
    private readonly maxInFlight = 4,
  ) {
    port.on('message', (message: unknown) => {
      if (message !== 'ack') return;
      this.inFlight--;
      this.wake?.();
    });
  }

  async send(message: unknown, transfer: Transferable[] = []): Promise<void> {
    if (this.failure !== undefined) throw this.failure;
    this.port.postMessage(message, transfer);
    this.inFlight++;
    while (this.inFlight >= this.maxInFlight && this.failure === undefined)
      await new Promise<void>((resolve) => (this.wake = resolve));
    this.wake = undefined;
    if (this.failure !== undefined) throw this.failure;
  }

  /** A message that is not acknowledged (control: 'end', results). */
  post(message: unknown, transfer: Transferable[] = []): void {
    this.port.postMessage(message, transfer);
  }

  fail(error: unknown): void {
    this.failure ??= error;
    this.wake?.();
  }

  close(): void {
    this.port.close();
  }
}
