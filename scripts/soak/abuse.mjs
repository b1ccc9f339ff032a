// @ts-check
/**
 * The client-side faults: aborted requests, oversized and malformed bodies, and a slowloris client.
 * Each returns what happened, and records its requests in the shared Outcomes.
 */
import { connect } from 'node:net';
import { clearInterval, setInterval } from 'node:timers';
import { gzipSync } from 'node:zlib';

import { request } from 'undici';

import { errorCode } from './outcomes.mjs';
import { sleep } from './random.mjs';

/**
 * @typedef {{ base: string, agent: import('undici').Agent, outcomes: import('./outcomes.mjs').Outcomes, model: string }} Ctx
 */

/**
 * `count` chat requests (half streamed), each aborted by the client after a random 0–`maxDelayMs`.
 * @param {Ctx} ctx
 * @param {() => number} random
 * @param {number} count
 * @param {number} maxDelayMs
 */
export async function clientAborts(ctx, random, count, maxDelayMs) {
  let aborted = 0;
  const one = async (/** @type {number} */ i) => {
    const at = Date.now();
    ctx.outcomes.sent++;
    const controller = new globalThis.AbortController();
    const stream = i % 2 === 0;
    const body = {
      model: ctx.model,
      messages: [{ role: 'user', content: `abort me ${i} ${at}` }],
      max_tokens: 64,
      stream,
    };
    const timer = setTimeout(() => controller.abort(), random() * maxDelayMs);
    try {
      const res = await request(`${ctx.base}/v1/chat/completions`, {
        method: 'POST',
        dispatcher: ctx.agent,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: controller.signal,
      });
      const text = await res.body.text();
      if (res.statusCode === 200) ctx.outcomes.record('completed', { kind: 'abort', at, stream });
      else ctx.outcomes.record('failed', { kind: 'abort', at, cause: `${res.statusCode} ${errorCode(text)}` });
    } catch (error) {
      if (controller.signal.aborted) {
        aborted++;
        ctx.outcomes.record('aborted', { kind: 'abort', at });
      } else
        ctx.outcomes.record('lost', { kind: 'abort', at, cause: `no answer: ${/** @type {Error} */ (error).message}` });
    } finally {
      clearTimeout(timer);
    }
  };
  await Promise.all(Array.from({ length: count }, (_, i) => one(i)));
  return { sent: count, aborted };
}

/**
 * Writes a raw HTTP/1.1 request (head, then the body in pieces while no answer came) and resolves
 * with the answer's status (0: none) once the proxy answered or closed, or after `timeoutMs`.
 * @param {string} base
 * @param {string} head without the final blank line
 * @param {Buffer[]} pieces
 * @param {number} timeoutMs
 * @returns {Promise<{ status: number, closed: boolean }>}
 */
function rawRequest(base, head, pieces, timeoutMs) {
  const { hostname, port } = new URL(base);
  return new Promise((resolve) => {
    const socket = connect(Number(port), hostname);
    let answer = '';
    let settled = false;
    const finish = (/** @type {boolean} */ closed) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      const match = /^HTTP\/1\.[01] (\d{3})/.exec(answer);
      resolve({ status: match ? Number(match[1]) : 0, closed });
    };
    const timer = setTimeout(() => finish(false), timeoutMs);
    socket.on('data', (chunk) => {
      answer += chunk.toString('latin1');
      if (answer.includes('\r\n\r\n')) finish(false);
    });
    socket.on('error', () => finish(true));
    socket.on('close', () => finish(true));
    socket.on('connect', async () => {
      socket.write(`${head}\r\n\r\n`);
      for (const piece of pieces) {
        if (answer !== '' || settled) return;
        socket.write(piece);
        await sleep(5);
      }
    });
  });
}

/**
 * Oversized bodies against `--max-body` (`maxBodyBytes`): one declared by Content-Length (the proxy
 * must answer 413 before reading it), one chunked that grows past the cap, each must get 413; and a
 * 10-digit Content-Length, which uWS refuses by closing the connection with no status.
 * @param {Ctx} ctx
 * @param {number} maxBodyBytes
 */
export async function oversizedBodies(ctx, maxBodyBytes) {
  const host = new URL(ctx.base).host;
  const size = Math.ceil(maxBodyBytes * 1.5);
  const piece = Buffer.alloc(64 * 1024, 'a');
  const pieces = Array.from({ length: Math.ceil(size / piece.length) }, () => piece);
  const chunked = pieces.map((p) =>
    Buffer.concat([Buffer.from(`${p.length.toString(16)}\r\n`), p, Buffer.from('\r\n')]),
  );
  const shapes = [
    // The head alone: the proxy must answer from Content-Length before reading (a client that also
    // sends the body races the proxy's close: see docs/reliability.md, "Findings").
    {
      name: 'content-length',
      head: `POST /v1/chat/completions HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\nContent-Length: ${size}`,
      pieces: [],
    },
    // 10 digits: past uWS's length parser, which closes the connection with no status (docs/proxy.md,
    // "Server modes"; the soak serves with uWS). `--http node` would answer 413.
    {
      name: 'content-length of 10 digits',
      head: `POST /v1/chat/completions HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\nContent-Length: 10000000000`,
      pieces: [],
      closesSilently: true,
    },
    {
      name: 'chunked',
      head: `POST /v1/chat/completions HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked`,
      pieces: chunked,
    },
  ];
  const results = [];
  for (const shape of shapes) {
    const at = Date.now();
    ctx.outcomes.sent++;
    const { status, closed } = await rawRequest(ctx.base, shape.head, shape.pieces, 15_000);
    const documented = 'closesSilently' in shape ? status === 0 && closed : status === 413;
    if (documented && status === 0)
      ctx.outcomes.record('rejected', { kind: 'oversized', at, cause: `closed, no status (${shape.name})` });
    else if (documented)
      ctx.outcomes.record('rejected', { kind: 'oversized', at, cause: `413 oversized (${shape.name})` });
    else
      ctx.outcomes.record('lost', {
        kind: 'oversized',
        at,
        cause: `oversized (${shape.name}) answered ${status || 'nothing'}${closed ? ', closed' : ''}, not as documented`,
      });
    results.push({ shape: shape.name, status, documented });
  }
  return results;
}

/**
 * Malformed bodies, each with the status it must get.
 * @param {Ctx} ctx
 */
export async function malformedBodies(ctx) {
  const model = JSON.stringify(ctx.model);
  /** @type {{ name: string, body: string | Buffer, status: number, headers?: Record<string, string> }[]} */
  const shapes = [
    { name: 'truncated JSON', body: `{"model": ${model}, "messages": [{"role": "user"`, status: 400 },
    { name: 'not an object', body: '[1, 2, 3]', status: 400 },
    { name: 'no messages', body: `{"model": ${model}}`, status: 400 },
    { name: 'messages not an array', body: `{"model": ${model}, "messages": "hi"}`, status: 400 },
    { name: 'bad gzip', body: Buffer.from('not gzip at all'), status: 400, headers: { 'content-encoding': 'gzip' } },
    {
      name: 'gzip of garbage JSON',
      body: gzipSync('{"model": '),
      status: 400,
      headers: { 'content-encoding': 'gzip' },
    },
    { name: 'unknown encoding', body: '{}', status: 415, headers: { 'content-encoding': 'zstd-nope' } },
  ];
  const results = [];
  for (const shape of shapes) {
    const at = Date.now();
    ctx.outcomes.sent++;
    try {
      const res = await request(`${ctx.base}/v1/chat/completions`, {
        method: 'POST',
        dispatcher: ctx.agent,
        headers: { 'content-type': 'application/json', ...shape.headers },
        body: shape.body,
      });
      const text = await res.body.text();
      const cause = `${res.statusCode} ${errorCode(text)} (${shape.name})`;
      if (res.statusCode === shape.status) ctx.outcomes.record('rejected', { kind: 'malformed', at, cause });
      else ctx.outcomes.record('lost', { kind: 'malformed', at, cause: `wanted ${shape.status}, got ${cause}` });
      results.push({ shape: shape.name, status: res.statusCode });
    } catch (error) {
      ctx.outcomes.record('lost', {
        kind: 'malformed',
        at,
        cause: `no answer (${shape.name}): ${/** @type {Error} */ (error).message}`,
      });
      results.push({ shape: shape.name, status: 0 });
    }
  }
  return results;
}

/**
 * Slowloris: `sockets` connections that each send a request head one byte every `everyMs`, never
 * finishing it, for `holdMs`. Resolves with how many the proxy closed itself, and after how long.
 * @param {string} base
 * @param {number} sockets
 * @param {number} holdMs
 * @param {number} everyMs
 */
export async function slowloris(base, sockets, holdMs, everyMs) {
  const { hostname, port } = new URL(base);
  const head = Buffer.from(`POST /v1/chat/completions HTTP/1.1\r\nHost: ${hostname}\r\nX-Slow: ${'s'.repeat(4096)}`);
  const one = () =>
    new Promise((resolve) => {
      const started = Date.now();
      const socket = connect(Number(port), hostname);
      let sent = 0;
      let closedByProxy = false;
      let ending = false;
      const ticker = setInterval(() => {
        if (socket.writable && sent < head.length) socket.write(head.subarray(sent, ++sent));
      }, everyMs);
      const end = () => {
        if (ending) return;
        ending = true;
        clearInterval(ticker);
        clearTimeout(timer);
        socket.destroy();
        resolve({ closedByProxy, heldMs: Date.now() - started });
      };
      const timer = setTimeout(end, holdMs);
      socket.on('error', () => undefined);
      socket.on('close', () => {
        closedByProxy = !ending;
        end();
      });
    });
  const results = /** @type {{ closedByProxy: boolean, heldMs: number }[]} */ (
    await Promise.all(Array.from({ length: sockets }, one))
  );
  return {
    sockets,
    closedByProxy: results.filter((r) => r.closedByProxy).length,
    longestHeldMs: Math.max(...results.map((r) => r.heldMs)),
  };
}
