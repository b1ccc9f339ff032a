// @ts-check
// The event-relay workload's engine, in a process of its own so the relay's CPU time is the
// relay's alone: binds a ZeroMQ PUB socket, waits for one subscriber, then sends the generated
// vLLM KV event stream (bench/lib/kv-event-workload.mjs, the seed the parent uses) as vLLM frames
// it: (topic, seq as 8 bytes big-endian, msgpack payload). No high-water mark: nothing is dropped.
// argv: BLOCK_EVENTS ENDPOINT. Prints "bound ENDPOINT" once bound, "sent N" when done.
import { Publisher } from 'zeromq';

import { generateKvEventStream } from './kv-event-workload.mjs';

const [blockEvents, endpoint] = process.argv.slice(2);
const { payloads } = generateKvEventStream(Number(blockEvents));
const pub = new Publisher({ sendHighWaterMark: 0, linger: 2000 });
await pub.bind(/** @type {string} */ (endpoint));
let subscribed = false;
pub.events.on('accept', () => (subscribed = true));
console.log(`bound ${pub.lastEndpoint}`);
while (!subscribed) await new Promise((r) => setTimeout(r, 10));
await new Promise((r) => setTimeout(r, 300)); // the subscription reaches the publisher
const topic = Buffer.alloc(0);
for (let seq = 0; seq < payloads.length; seq++) {
  const s = Buffer.alloc(8);
  s.writeBigInt64BE(BigInt(seq));
  await pub.send([topic, s, /** @type {Uint8Array} */ (payloads[seq])]);
}
console.log(`sent ${payloads.length}`);
// Stay until the parent has read everything (it kills this process).
setInterval(() => {}, 1000);
