// @ts-check
/**
 * A KV-event relay per engine, between its ZeroMQ PUB socket and the proxy's subscriber, so the
 * soak can fault the event path without touching the engine:
 *
 * - `drop(n)`: the next n messages are not forwarded. The proxy then sees a sequence gap and must
 *   recover (ask the engine's replay socket, which it reaches directly, or rebuild).
 * - `restart(downMs)`: the relay's PUB socket is closed and bound again on the same port after
 *   `downMs`, as a publisher restarting: the proxy's subscriber sees a disconnect and a reconnect,
 *   and the messages published meanwhile are lost.
 *
 * An engine restart needs nothing here: the relay's subscriber reconnects to the new engine on its
 * own (ZeroMQ reconnects), and the engine's seq starting again at 0 reaches the proxy as such.
 */
import { Publisher, Subscriber } from 'zeromq';

import { sleep } from './random.mjs';

export class KvRelay {
  /**
   * @param {string} engineUrl the engine's PUB endpoint
   * @param {number} port the relay's own PUB port on 127.0.0.1
   */
  constructor(engineUrl, port) {
    this.engineUrl = engineUrl;
    this.url = `tcp://127.0.0.1:${port}`;
    this.forwarded = 0;
    this.dropped = 0;
    this.restarts = 0;
    this.toDrop = 0;
    this.subscriber = new Subscriber();
    /** @type {Publisher | null} */
    this.publisher = null;
    /** @type {Promise<void> | null} */
    this.pump = null;
  }

  async start() {
    this.publisher = await this.#bind();
    this.subscriber.connect(this.engineUrl);
    this.subscriber.subscribe();
    this.pump = this.#forward();
  }

  async #bind() {
    // The port is released a moment after close: retry the bind for up to 5 s.
    for (let attempt = 0; ; attempt++) {
      const publisher = new Publisher();
      try {
        await publisher.bind(this.url);
        return publisher;
      } catch (error) {
        publisher.close();
        if (attempt >= 50) throw error;
        await sleep(100);
      }
    }
  }

  async #forward() {
    try {
      for await (const frames of this.subscriber) {
        if (this.toDrop > 0) {
          this.toDrop--;
          this.dropped++;
          continue;
        }
        const publisher = this.publisher;
        if (publisher === null) {
          this.dropped++;
          continue;
        }
        await publisher.send(frames);
        this.forwarded++;
      }
    } catch (error) {
      // The subscriber closed (stop()); anything else is a relay failure worth seeing.
      if (!this.subscriber.closed) console.error(`soak: kv relay ${this.url}: ${/** @type {Error} */ (error).message}`);
    }
  }

  /** @param {number} count */
  drop(count) {
    this.toDrop += count;
  }

  /** @param {number} downMs */
  async restart(downMs) {
    const old = this.publisher;
    this.publisher = null;
    old?.close();
    await sleep(downMs);
    this.publisher = await this.#bind();
    this.restarts++;
  }

  async stop() {
    this.subscriber.close();
    this.publisher?.close();
    this.publisher = null;
    await this.pump;
  }
}
