/**
 * H1Pool (the proxy's lean upstream client) against undici's Pool, differentially: scripted
 * raw-socket servers answer in many framings (content-length, chunked with random split points
 * and extensions, trailers, read-until-close, 1xx heads, Connection: close, keep-alive reuse)
 * and fail in many ways (reset mid-body, refused port, stalled head, stalled body, garbage);
 * each scenario runs through both clients with the same recording handler, and the recorded
 * callback sequences (bytes joined, 1xx heads dropped) or error codes must match. Scenarios
 * undici handles differently by design (the reused-socket retry) assert H1Pool's behaviour.
 * Split points come from a seeded RNG; nothing synchronises on sleeps.
 */
import { createServer, type Server, type Socket } from 'node:net';
import { setImmediate as nextTurn } from 'node:timers/promises';

import { Pool } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';

import { H1Pool } from '../src/proxy/upstream/h1-pool.js';
import { MODEL, post, startProxy } from './helpers/proxy-harness.js';
import { Rng } from './helpers/random.js';

type Event =
  ['connect'] | ['headers', number, string[], string] | ['data', string] | ['complete', string[]] | ['error', string];

interface Recording {
  events: Event[];
  done: Promise<void>;
  handler: Parameters<H1Pool['dispatch']>[1];
  /** Data arrived while the handler had asked for a pause. */
  violations: number;
  pauses: number;
  abort?: (error?: Error) => void;
}

interface RecorderOptions {
  /** Return false from every onData and resume on the next turn. */
  backpressure?: boolean;
  /** Abort on the first body byte. */
  abortOnData?: boolean;
  /** Return false from onHeaders and resume on the next turn. */
  pauseOnHeaders?: boolean;
}

function recorder(options: RecorderOptions = {}): Recording {
  const rec: Recording = { events: [], done: undefined!, handler: undefined!, violations: 0, pauses: 0 };
  let finish!: () => void;
  rec.done = new Promise<void>((r) => (finish = r));
  let paused = false;
  let resume: (() => void) | undefined;
  let terminal = false;
  const push = (event: Event): void => {
    if (terminal) throw new Error(`callback after the end: ${event[0]}`);
    rec.events.push(event);
  };
  rec.handler = {
    onConnect(abort) {
      rec.abort = abort;
      push(['connect']);
    },
    onHeaders(status, raw, resumeFn, statusText) {
      if (status < 200) return true;
      resume = resumeFn;
      push(['headers', status, (raw as unknown as Buffer[]).map((b) => b.toString('latin1')), statusText]);
      if (options.pauseOnHeaders !== true) return true;
      paused = true;
      rec.pauses++;
      setImmediate(() => {
        paused = false;
        resume!();
      });
      return false;
    },
    onData(chunk) {
      if (paused) rec.violations++;
      const last = rec.events[rec.events.length - 1];
      if (last !== undefined && last[0] === 'data') last[1] += chunk.toString('latin1');
      else push(['data', chunk.toString('latin1')]);
      if (options.abortOnData === true) {
        rec.abort!();
        return true;
      }
      if (options.backpressure !== true) return true;
      paused = true;
      rec.pauses++;
      setImmediate(() => {
        paused = false;
        resume!();
      });
      return false;
    },
    onComplete(trailers) {
      push(['complete', ((trailers ?? []) as unknown as Buffer[]).map((b) => b.toString('latin1'))]);
      terminal = true;
      finish();
    },
    onError(error) {
      push(['error', (error as { code?: string }).code ?? error.message]);
      terminal = true;
      finish();
    },
  };
  return rec;
}

// ---- scripted servers --------------------------------------------------------------------------

interface Exchange {
  socket: Socket;
  /** 0-based connection number and request number on that connection. */
  conn: number;
  index: number;
  head: string;
  body: Buffer;
}

type Responder = (ex: Exchange) => void | Promise<void>;

interface Scripted {
  port: number;
  connections: () => number;
  maxOpen: () => number;
  close: () => Promise<void>;
}

const servers: Server[] = [];
const pools: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of pools.splice(0)) await close();
  for (const s of servers.splice(0)) await new Promise<void>((r) => s.close(() => r()));
});

async function scripted(respond: Responder): Promise<Scripted> {
  let connections = 0;
  let open = 0;
  let maxOpen = 0;
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    const conn = connections++;
    open++;
    maxOpen = Math.max(maxOpen, open);
    sockets.add(socket);
    socket.on('error', () => {});
    socket.on('close', () => {
      open--;
      sockets.delete(socket);
    });
    let buffered = Buffer.alloc(0);
    let index = 0;
    let chain = Promise.resolve();
    socket.on('data', (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      for (;;) {
        const end = buffered.indexOf('\r\n\r\n');
        if (end < 0) return;
        const head = buffered.toString('latin1', 0, end);
        const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
        if (buffered.length < end + 4 + length) return;
        const body = buffered.subarray(end + 4, end + 4 + length);
        buffered = buffered.subarray(end + 4 + length);
        const ex = { socket, conn, index: index++, head, body };
        chain = chain
          .then(() => respond(ex))
          .catch(() => {
            socket.destroy();
          });
      }
    });
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    port: (server.address() as { port: number }).port,
    connections: () => connections,
    maxOpen: () => maxOpen,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** Writes `bytes` in pieces cut at random points, a turn apart (so they tend to arrive as separate reads). */
async function writeSplit(socket: Socket, bytes: Buffer, rng: Rng, pieces = 6): Promise<void> {
  const cuts = new Set<number>();
  for (let i = 0; i < pieces - 1; i++) cuts.add(rng.int(1, Math.max(1, bytes.length - 1)));
  let from = 0;
  for (const cut of [...cuts].sort((a, b) => a - b)) {
    if (socket.destroyed) return;
    socket.write(bytes.subarray(from, cut));
    from = cut;
    await nextTurn();
  }
  if (!socket.destroyed) socket.write(bytes.subarray(from));
}

function randomText(rng: Rng, length: number): string {
  const alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789 {}":,\n';
  let out = '';
  for (let i = 0; i < length; i++) out += alphabet[rng.int(0, alphabet.length - 1)];
  return out;
}

function chunked(body: string, rng: Rng, extensions: boolean, trailers = ''): Buffer {
  let out = '';
  let pos = 0;
  while (pos < body.length) {
    const n = Math.min(body.length - pos, rng.int(1, 300));
    const ext = extensions && rng.chance(0.5) ? `;ext${rng.int(0, 9)}=v${rng.int(0, 99)}` : '';
    out += `${n.toString(16)}${ext}\r\n${body.slice(pos, pos + n)}\r\n`;
    pos += n;
  }
  return Buffer.from(`0\r\n${trailers}\r\n`.replace(/^/, out), 'latin1');
}

// ---- clients -----------------------------------------------------------------------------------

interface ClientConfig {
  connections?: number;
  headersTimeout?: number;
  bodyTimeout?: number;
}

type Client = 'undici' | 'h1';

function makePool(kind: Client, port: number, config: ClientConfig = {}): Parameters<typeof run>[0] {
  const origin = `http://127.0.0.1:${port}`;
  if (kind === 'undici') {
    const pool = new Pool(origin, {
      connections: config.connections ?? 8,
      pipelining: 1,
      connect: { timeout: 2_000 },
      headersTimeout: config.headersTimeout ?? 10_000,
      bodyTimeout: config.bodyTimeout ?? 10_000,
    });
    pools.push(() => pool.destroy());
    return pool;
  }
  const pool = new H1Pool(origin, {
    connections: config.connections ?? 8,
    connectTimeoutMs: 2_000,
    firstByteTimeoutMs: config.headersTimeout ?? 10_000,
    idleTimeoutMs: config.bodyTimeout ?? 10_000,
  });
  pools.push(() => pool.destroy());
  return pool;
}

const REQUEST_BODY = Buffer.from('{"model":"m","messages":[{"role":"user","content":"hi"}]}');

async function run(
  pool: { dispatch: H1Pool['dispatch'] | Pool['dispatch'] },
  options: RecorderOptions = {},
): Promise<Recording> {
  const rec = recorder(options);
  (pool.dispatch as H1Pool['dispatch'])(
    {
      path: '/v1/chat/completions',
      method: 'POST',
      headers: ['content-type', 'application/json', 'x-session-id', 's1'],
      body: REQUEST_BODY,
    },
    rec.handler,
  );
  await rec.done;
  return rec;
}

/** The same scenario through both clients, each against its own fresh server. */
async function both(
  respond: (rng: Rng) => Responder,
  config: ClientConfig = {},
  requests = 1,
  options: RecorderOptions = {},
): Promise<Record<Client, { recs: Recording[]; server: Scripted }>> {
  const out = {} as Record<Client, { recs: Recording[]; server: Scripted }>;
  for (const kind of ['undici', 'h1'] as const) {
    const server = await scripted(respond(new Rng(42)));
    const pool = makePool(kind, server.port, config);
    const recs: Recording[] = [];
    for (let i = 0; i < requests; i++) recs.push(await run(pool, options));
    out[kind] = { recs, server };
  }
  return out;
}

function same(result: Awaited<ReturnType<typeof both>>): Event[][] {
  const h1 = result.h1.recs.map((r) => r.events);
  expect(h1).toEqual(result.undici.recs.map((r) => r.events));
  return h1;
}

const head = (status: string, headers: string[]): string =>
  `HTTP/1.1 ${status}\r\n${headers.map((h) => `${h}\r\n`).join('')}\r\n`;

// ---- scenarios ---------------------------------------------------------------------------------

describe('H1Pool against undici', () => {
  it('content-length bodies split at random points', async () => {
    for (let seed = 1; seed <= 6; seed++) {
      const body = randomText(new Rng(seed), seed * 700);
      const r = await both((rng) => async ({ socket }) => {
        const bytes = Buffer.from(
          head('200 OK', ['Content-Type: application/json', `Content-Length: ${body.length}`, 'X-Mixed-Case: Yes ']) +
            body,
          'latin1',
        );
        await writeSplit(socket, bytes, rng, 2 + (seed % 5));
      });
      const [events] = same(r);
      expect(events!.at(-1)).toEqual(['complete', []]);
      expect(events!.find((e) => e[0] === 'data')?.[1]).toBe(body);
    }
  });

  it('chunked bodies with random chunk sizes, extensions and split points', async () => {
    for (let seed = 1; seed <= 6; seed++) {
      const body = randomText(new Rng(100 + seed), 200 + seed * 900);
      const r = await both((rng) => async ({ socket }) => {
        const bytes = Buffer.concat([
          Buffer.from(head('200 OK', ['content-type: text/event-stream', 'Transfer-Encoding: chunked']), 'latin1'),
          chunked(body, rng, seed % 2 === 0),
        ]);
        await writeSplit(socket, bytes, rng, 3 + seed * 3);
      });
      const [events] = same(r);
      expect(events!.find((e) => e[0] === 'data')?.[1]).toBe(body);
    }
  });

  it('chunked bodies with trailers', async () => {
    const body = randomText(new Rng(7), 3000);
    const r = await both((rng) => async ({ socket }) => {
      const bytes = Buffer.concat([
        Buffer.from(head('200 OK', ['Transfer-Encoding: chunked', 'Trailer: X-Checksum']), 'latin1'),
        chunked(body, rng, true, 'X-Checksum: abc123\r\nX-Other:  two \r\n'),
      ]);
      await writeSplit(socket, bytes, rng, 12);
    });
    const [events] = same(r);
    expect(events!.at(-1)).toEqual(['complete', ['X-Checksum', 'abc123', 'X-Other', 'two ']]);
  });

  it('a body read until the connection closes', async () => {
    const body = randomText(new Rng(8), 5000);
    const r = await both((rng) => async ({ socket }) => {
      await writeSplit(socket, Buffer.from(head('200 OK', ['Content-Type: text/plain']) + body, 'latin1'), rng, 5);
      socket.end();
    });
    const [events] = same(r);
    expect(events!.find((e) => e[0] === 'data')?.[1]).toBe(body);
  });

  it('skips informational heads (103) before the final one', async () => {
    const r = await both(() => ({ socket }) => {
      socket.write(head('103 Early Hints', ['Link: </style.css>; rel=preload']));
      socket.write(head('200 OK', ['Content-Length: 2']) + 'ok');
    });
    same(r);
  });

  it('skips a 100 Continue head too (undici refuses it; the exchange ignores 1xx)', async () => {
    const server = await scripted(({ socket }) => {
      socket.write(head('100 Continue', []) + head('200 OK', ['Content-Length: 2']) + 'ok');
    });
    const rec = await run(makePool('h1', server.port));
    expect(rec.events).toEqual([
      ['connect'],
      ['headers', 200, ['Content-Length', '2'], 'OK'],
      ['data', 'ok'],
      ['complete', []],
    ]);
  });

  // How a response's connection headers decide reuse: [case, headers, server ends the socket, requests, connections].
  // (undici's Pool may open extra connections where h1 reuses one: its client still counts as busy
  // right after onComplete, so connection counts are h1's.)
  it.each([
    ['reuses one keep-alive connection across sequential requests', ['Keep-Alive: timeout=5'], false, 5, 1],
    ['drops a connection whose Keep-Alive hint is too short to reuse', ['Keep-Alive: timeout=1'], false, 3, 3],
    ['honours Connection: close (a new connection per request)', ['Connection: close'], true, 3, 3],
  ] as const)('%s', async (_case, headers, endSocket, requests, connections) => {
    const r = await both(
      () =>
        ({ socket }) => {
          const response = head('200 OK', ['Content-Length: 2', ...headers]) + 'ok';
          if (endSocket) socket.end(response);
          else socket.write(response);
        },
      {},
      requests,
    );
    same(r);
    expect(r.h1.server.connections()).toBe(connections);
  });

  it('a pause requested by onHeaders holds the body until resume()', async () => {
    const body = randomText(new Rng(11), 20_000);
    const r = await both(
      () =>
        ({ socket }) => {
          socket.write(head('200 OK', [`Content-Length: ${body.length}`]) + body);
        },
      {},
      1,
      { pauseOnHeaders: true },
    );
    const [events] = same(r);
    expect(events!.find((e) => e[0] === 'data')?.[1]).toBe(body);
    expect(r.h1.recs[0]!.violations).toBe(0);
  });

  it('a server closing an idle connection between requests', async () => {
    const r = await both(
      () =>
        ({ socket }) => {
          // Answer, then close the idle connection right away (FIN after the response).
          socket.end(head('200 OK', ['Content-Length: 2']) + 'ok');
        },
      {},
      3,
    );
    same(r);
  });

  for (const how of ['FIN', 'RST'] as const) {
    it(`retries once, invisibly, when a reused socket is closed (${how}) as the request goes out`, async () => {
      const server = await scripted(({ socket, index }) => {
        if (index === 0) {
          socket.write(head('200 OK', ['Content-Length: 2']) + 'ok');
          return;
        }
        // The race: the server dropped the idle connection just as the request was written.
        if (how === 'FIN') socket.end();
        else socket.resetAndDestroy();
      });
      const pool = makePool('h1', server.port);
      for (let i = 0; i < 3; i++) {
        const rec = await run(pool);
        expect(rec.events.at(-1)).toEqual(['complete', []]);
      }
      // 1st on conn 0; 2nd killed on conn 0, retried on conn 1; 3rd killed on conn 1, retried on conn 2.
      expect(server.connections()).toBe(3);
    });
  }

  it('does not retry a request whose fresh connection fails before the response', async () => {
    const server = await scripted(({ socket }) => {
      socket.end();
    });
    const rec = await run(makePool('h1', server.port));
    expect(rec.events).toEqual([['connect'], ['error', 'UND_ERR_SOCKET']]);
    expect(server.connections()).toBe(1);
  });

  it('the server closing mid-body (FIN)', async () => {
    const r = await both(() => ({ socket }) => {
      socket.end(head('200 OK', ['Content-Length: 1000']) + 'x'.repeat(100));
    });
    const [events] = same(r);
    expect(events!.at(-1)).toEqual(['error', 'UND_ERR_SOCKET']);
  });

  it('the server resetting mid-body (RST)', async () => {
    const r = await both(() => async ({ socket }) => {
      socket.write(head('200 OK', ['Transfer-Encoding: chunked']) + '64\r\n' + 'x'.repeat(50));
      await nextTurn();
      socket.resetAndDestroy();
    });
    const [events] = same(r);
    expect(['ECONNRESET', 'UND_ERR_SOCKET']).toContain(events!.at(-1)![1]);
  });

  it('a refused port', async () => {
    const server = await scripted(() => {});
    const { port } = server;
    await server.close();
    const recs = [await run(makePool('undici', port)), await run(makePool('h1', port))];
    expect(recs[1]!.events).toEqual(recs[0]!.events);
    expect(recs[1]!.events).toEqual([['error', 'ECONNREFUSED']]);
  });

  it('a stalled head (headers timeout)', async () => {
    const r = await both(() => () => {}, { headersTimeout: 150 });
    const [events] = same(r);
    expect(events!.at(-1)).toEqual(['error', 'UND_ERR_HEADERS_TIMEOUT']);
  });

  it('a stalled body (idle timeout)', async () => {
    const r = await both(
      () =>
        ({ socket }) => {
          socket.write(head('200 OK', ['Content-Length: 100']) + 'partial');
        },
      { bodyTimeout: 150 },
    );
    const [events] = same(r);
    expect(events!.at(-1)).toEqual(['error', 'UND_ERR_BODY_TIMEOUT']);
  });

  it('backpressure: pauses and resumes over a large body, bytes intact', async () => {
    const body = randomText(new Rng(9), 4 * 2 ** 20);
    const r = await both(
      (rng) =>
        async ({ socket }) => {
          const bytes = Buffer.concat([
            Buffer.from(head('200 OK', ['Transfer-Encoding: chunked']), 'latin1'),
            chunked(body, new Rng(10), false),
          ]);
          // Written at once: the client's pauses must hold the rest back (TCP window, no data callbacks).
          void rng;
          socket.write(bytes);
        },
      {},
      1,
      { backpressure: true },
    );
    const [events] = same(r);
    expect(events!.find((e) => e[0] === 'data')?.[1].length).toBe(body.length);
    expect(r.h1.recs[0]!.violations).toBe(0);
    expect(r.h1.recs[0]!.pauses).toBeGreaterThan(10);
  });

  it('abort on the first body byte: one onError, the server sees the disconnect', async () => {
    const r = await both(
      () =>
        ({ socket }) => {
          socket.write(head('200 OK', ['Transfer-Encoding: chunked']) + '5\r\nhello\r\n');
        },
      {},
      1,
      { abortOnData: true },
    );
    const [events] = same(r);
    expect(events!.at(-1)).toEqual(['error', 'UND_ERR_ABORTED']);
  });

  it('a malformed response is an onError with a parser code, never a throw', async () => {
    for (const garbage of [
      'HTTP/1.1 2x0 OK\r\n\r\n',
      'SPDY/9 200 OK\r\n\r\n',
      head('200 OK', ['Content-Length: x']),
      head('200 OK', ['Transfer-Encoding: chunked']) + 'zz\r\n',
    ]) {
      const r = await both(() => ({ socket }) => {
        socket.write(garbage);
      });
      for (const kind of ['undici', 'h1'] as const) {
        const last = r[kind].recs[0]!.events.at(-1)!;
        expect(last[0], `${kind}: ${JSON.stringify(garbage)}`).toBe('error');
        expect(String(last[1])).toMatch(/^HPE_/);
      }
    }
  });

  it('caps connections and queues the rest in order', async () => {
    const server = await scripted(async ({ socket }) => {
      await nextTurn();
      socket.write(head('200 OK', ['Content-Length: 2']) + 'ok');
    });
    const pool = makePool('h1', server.port, { connections: 2 });
    const recs = await Promise.all(Array.from({ length: 8 }, () => run(pool)));
    for (const rec of recs) expect(rec.events.at(-1)).toEqual(['complete', []]);
    expect(server.maxOpen()).toBeLessThanOrEqual(2);
    expect(server.connections()).toBe(2);
  });

  it('close() waits for in-flight requests, then releases every socket', async () => {
    const server = await scripted(async ({ socket }) => {
      await nextTurn();
      socket.write(head('200 OK', ['Content-Length: 2']) + 'ok');
    });
    const pool = new H1Pool(`http://127.0.0.1:${server.port}`, {
      connections: 4,
      connectTimeoutMs: 2_000,
      firstByteTimeoutMs: 2_000,
      idleTimeoutMs: 2_000,
    });
    const pending = run(pool);
    await pool.close();
    expect((await pending).events.at(-1)).toEqual(['complete', []]);
    const after = await run(pool);
    expect(after.events).toEqual([['error', 'UND_ERR_CLOSED']]);
  });
});

describe("the proxy with upstream: 'h1'", () => {
  it('a stale keep-alive connection is retried inside the pool: no upstream error, no breaker trip', async () => {
    const completion = JSON.stringify({ id: 'c', object: 'chat.completion', choices: [], model: MODEL });
    const completionConnections = new Set<number>();
    const server = await scripted(({ socket, conn, index, head: requestHead }) => {
      // The proxy's health probe and model discovery (its control pool) get a plain answer.
      if (requestHead.startsWith('GET ')) {
        const list = `{"object":"list","data":[{"id":"${MODEL}"}]}`;
        socket.write(head('200 OK', [`Content-Length: ${list.length}`]) + list);
        return;
      }
      completionConnections.add(conn);
      // Every connection answers one completion, then drops the next one as it arrives.
      if (index > 0) socket.resetAndDestroy();
      else
        socket.write(
          head('200 OK', ['Content-Type: application/json', `Content-Length: ${completion.length}`]) + completion,
        );
    });
    const rig = await startProxy({ backends: [`http://127.0.0.1:${server.port}`], upstream: 'h1', retries: 0 });
    pools.push(rig.close);
    for (let i = 0; i < 4; i++) {
      const res = await post(rig.base, '/v1/chat/completions', {
        model: MODEL,
        messages: [{ role: 'user', content: 'hi' }],
      });
      expect(res.status).toBe(200);
      expect(await res.text()).toBe(completion);
    }
    expect(rig.observer.named('upstreamError')).toEqual([]);
    expect(rig.observer.named('health')).toEqual([]);
    expect(completionConnections.size).toBe(4); // the first, then one fresh per retried request
  });
});
