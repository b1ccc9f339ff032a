/**
 * Lingering close (server/lingering-close.ts), in both server modes (`kvroute serve`) over raw loopback sockets: a
 * client that sends an oversized body whole, as HTTP clients do, reads its 413, whether the
 * length was declared (refused from the head) or the chunked body crossed --max-body midway; and
 * a client that drips its body after the 413 is cut at the time bound.
 */
import { connect } from 'node:net';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { LINGER_MS } from '../src/proxy/server/lingering-close.js';
import { startStub, type StubUpstream } from './helpers/proxy-harness.js';
import { startServe, type ServeChild } from './helpers/proxy-serve-child.js';

const MAX_BODY = 1024 * 1024;
const OVERSIZED = Buffer.alloc(MAX_BODY + MAX_BODY / 2, 'a');
const HEAD = 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n';

interface Upload {
  status: number;
  /** Milliseconds from the first byte sent to the proxy's close. */
  closedAfterMs: number;
}

/**
 * Sends `head` and then `pieces` (every `everyMs`, or at once), reading all the while; resolves at
 * the proxy's close or once `waitForClose` is false and a whole answer head arrived (bounded).
 */
function upload(port: number, head: string, pieces: Buffer[], everyMs = 0, waitForClose = false): Promise<Upload> {
  return new Promise((resolve) => {
    const started = Date.now();
    const socket = connect(port, '127.0.0.1');
    let answer = '';
    let timer: NodeJS.Timeout | undefined;
    const done = () => {
      clearTimeout(bound);
      clearInterval(timer);
      socket.destroy();
      const match = /^HTTP\/1\.1 (\d{3})/.exec(answer);
      resolve({ status: match ? Number(match[1]) : 0, closedAfterMs: Date.now() - started });
    };
    const bound = setTimeout(done, LINGER_MS + 10_000);
    socket.on('data', (chunk) => {
      answer += chunk.toString('latin1');
      if (!waitForClose && answer.includes('\r\n\r\n')) done();
    });
    socket.on('error', () => undefined);
    socket.on('close', done);
    socket.on('connect', () => {
      socket.write(head);
      if (everyMs === 0) for (const piece of pieces) socket.write(piece);
      else {
        let next = 0;
        timer = setInterval(() => {
          if (next < pieces.length && socket.writable) socket.write(pieces[next++]!);
        }, everyMs);
      }
    });
  });
}

let upstream: StubUpstream;
beforeAll(async () => {
  upstream = await startStub((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
});
afterAll(async () => {
  await upstream?.close();
});

describe.each(['uws', 'node'] as const)('the %s server', (http) => {
  // A child process (`kvroute serve`, built dist/), as in production: in the test's own process
  // the proxy and the clients share one event loop, and the reset seldom beats the read.
  let serve: ServeChild;
  let port: number;
  beforeAll(async () => {
    serve = await startServe([
      '--port',
      '0',
      '--backends',
      upstream.url,
      '--http',
      http,
      '--max-body',
      String(MAX_BODY),
    ]);
    port = Number(new URL(serve.base).port);
  });
  afterAll(async () => {
    expect(await serve?.stop()).toBe(0);
  });

  it('uploads over --max-body by Content-Length (20 at once, then 20 one by one), each sent whole, all read 413', async () => {
    const head = `${HEAD}Content-Length: ${OVERSIZED.length}\r\n\r\n`;
    const got = [...(await Promise.all(Array.from({ length: 20 }, () => upload(port, head, [OVERSIZED]))))];
    // One at a time too: alone, an upload meets the proxy's answer sooner (the reset's best case).
    for (let i = 0; i < 20; i++) got.push(await upload(port, head, [OVERSIZED]));
    expect(got.map((u) => u.status)).toEqual(Array(40).fill(413));
    expect(upstream.requests.length).toBe(0);
  });

  it('20 concurrent chunked uploads that cross --max-body midway, each sent whole, all read 413', async () => {
    const piece = OVERSIZED.subarray(0, 64 * 1024);
    const chunk = Buffer.concat([Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from('\r\n')]);
    const body = [...Array(OVERSIZED.length / piece.length).fill(chunk), Buffer.from('0\r\n\r\n')] as Buffer[];
    const head = `${HEAD}Transfer-Encoding: chunked\r\n\r\n`;
    const got = await Promise.all(Array.from({ length: 20 }, () => upload(port, head, body)));
    expect(got.map((u) => u.status)).toEqual(Array(20).fill(413));
    expect(upstream.requests.length).toBe(0);
  });

  it('a body dripped after the 413 is cut at the time bound', async () => {
    const head = `${HEAD}Content-Length: ${OVERSIZED.length}\r\n\r\n`;
    const drip = Array.from({ length: 1_000 }, () => Buffer.from('a'));
    const got = await upload(port, head, drip, 20, true);
    expect(got.status).toBe(413);
    expect(got.closedAfterMs).toBeGreaterThanOrEqual(LINGER_MS - 100);
    expect(got.closedAfterMs).toBeLessThan(LINGER_MS + 5_000);
  });
});
