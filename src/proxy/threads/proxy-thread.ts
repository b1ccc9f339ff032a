/**
 * The entry of each extra thread of `kvroute serve --threads N` (docs/scale-out.md): a proxy that
 * routes with the main thread's shared routing core, serves completions, /v1/models, /health and
 * /ready on the shared port, and relays every other request to the main thread's control
 * listener. It runs until the main thread sends `close`, then finishes its open requests within
 * the grace period, flushes its observer calls and exits.
 */
import { parentPort, workerData } from 'node:worker_threads';

import type { ProxyOptions } from '../proxy-options.js';
import { createProxy, type Proxy } from '../server/proxy-server.js';
import { ObserverRelay } from './observer-relay.js';
import { ThreadAdmission } from './thread-admission.js';
import { reportFlow } from './thread-flow.js';
import type { ThreadState, ToPrimary, ToThread } from './thread-messages.js';

/** What the main thread hands a thread at start (threads/proxy-threads.ts). */
export interface ThreadData {
  /** The shared core's handle (Router.share()). */
  attach: number;
  state: ThreadState;
  /** The proxy options, plain data (no observers, mounts or callbacks). */
  options: Omit<ProxyOptions, 'backends' | 'observers' | 'mounts' | 'onWarning'>;
  host: string;
  port: number;
  controlOrigin: string;
  /** Relay whole request records too (the main thread keeps a request log). */
  records: boolean;
  /** This thread's index, 1…N−1 (0 is the main thread). */
  index: number;
}

const port = parentPort!;
const data = workerData as ThreadData;
const post = (message: ToPrimary) => port.postMessage(message);

// Warnings go to the main thread's stderr, as the main thread's own do.
const warn = (message: string) => process.stderr.write(`${message}\n`);
// createProxy() is synchronous, so `proxy` is set before the relay's first flush asks it.
// eslint-disable-next-line prefer-const
let proxy: Proxy;
const relay = new ObserverRelay(
  post,
  () => proxy.state.ownInFlight(),
  data.records,
  () => reportFlow(proxy.state.admission, performance.now()),
);
proxy = createProxy(
  {
    ...data.options,
    // Validation wants a backend list; a thread's backends are the main thread's (state).
    backends: data.state.backends.length > 0 ? data.state.backends.map((b) => b.id) : ['http://127.0.0.1:1'],
    onWarning: warn,
    observers: [relay.observer],
  },
  {
    thread: {
      attach: data.attach,
      state: data.state,
      controlOrigin: data.controlOrigin,
      onTrip: (id, why) => post({ type: 'trip', id, why }),
      onFlow: post,
      index: data.index,
    },
  },
);

port.on('message', (message: ToThread) => {
  if (message.type === 'state') proxy.state.applyThreadState(message.state);
  else if (message.type === 'close') void stop(message.graceMs);
  // The main thread's answers about slots (only under --max-in-flight: then this admission asks it).
  else if (proxy.state.admission instanceof ThreadAdmission) proxy.state.admission.heard(message);
});

async function stop(graceMs: number): Promise<void> {
  await proxy.close({ graceMs });
  relay.close();
  post({ type: 'closed' });
  port.close();
}

await proxy.listen(data.port, data.host, { reusePort: true });
post({ type: 'listening' });
