#!/usr/bin/env node
// @ts-check
/**
 * A repro of a soak finding (docs/reliability.md, "Findings"): an oversized upload whose client
 * writes the body right after the head, as HTTP clients do, often never sees the proxy's 413. The
 * proxy answers from Content-Length and closes at once, the unread body bytes make the kernel
 * reset the connection, and the reset discards the 413 before the client reads it.
 *
 *   node scripts/soak/early-413-check.mjs http://127.0.0.1:8000 [attempts 40] [bytes 1572864]
 *
 * against `kvroute serve --max-body 1MiB`. Prints how many uploads got their 413 and how many saw
 * the connection close without a status (or be reset). One connection at a time, loopback, each bounded to 10 s.
 */
import { connect } from 'node:net';

const base = new URL(process.argv[2] ?? 'http://127.0.0.1:8000');
const attempts = Number(process.argv[3] ?? 40);
const size = Number(process.argv[4] ?? 1572864);
const body = Buffer.alloc(size, 97);
let answered = 0;
let none = 0;
for (let i = 0; i < attempts; i++) {
  await new Promise((resolve) => {
    const socket = connect(Number(base.port), base.hostname, () => {
      socket.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: ${base.host}\r\nContent-Type: application/json\r\n`);
      socket.write(`Content-Length: ${size}\r\n\r\n`);
      socket.write(body);
    });
    let answer = '';
    const timer = setTimeout(() => socket.destroy(), 10_000);
    socket.on('data', (chunk) => {
      answer += chunk.toString('latin1');
      // A whole head is the answer: no need to wait for the proxy's close (uWS lets the client close).
      if (answer.includes('\r\n\r\n')) socket.destroy();
    });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(timer);
      if (/^HTTP\/1\.1 413/.test(answer)) answered++;
      else none++;
      resolve(undefined);
    });
  });
}
console.log(`${attempts} uploads of ${size} bytes: ${answered} answered 413, ${none} closed without a status`);
