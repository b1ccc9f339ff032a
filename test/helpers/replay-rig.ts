/**
 * Plumbing for the replay tests: small session traces written to a temporary directory, and
 * node:http stubs that answer /v1/completions with an OpenAI SSE stream (fast, slow past a
 * capacity, failing on purpose, or slow).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { formatTraceLine } from '../../src/trace/write-trace.js';
import type { TraceRequest } from '../../src/trace/types.js';
import { startStub, type StubUpstream } from './proxy-harness.js';

export const BLOCK = 16;

/** A temporary directory for one test file's traces and records. */
export function scratch(): { dir: string; path(name: string): string } {
  const dir = mkdtempSync(join(tmpdir(), 'kvroute-replay-'));
  return { dir, path: (name) => join(dir, name) };
}

/**
 * `sessions` sessions of `turns` turns: turn t's prompt is (t + 1) × blocksPerTurn blocks, the
 * previous turn's ids plus new ones (chained, as an agent resends its history); ids are unique
 * per session. Session s starts at s × gap seconds; every turn of a session has the same arrival
 * (so completion alone orders the turns).
 */
export function sessionTrace(sessions: number, turns: number, blocksPerTurn = 4, output = 8, gap = 0): TraceRequest[] {
  const requests: TraceRequest[] = [];
  for (let t = 0; t < turns; t++)
    for (let s = 0; s < sessions; s++) {
      const blocks = (t + 1) * blocksPerTurn;
      requests.push({
        session: `s${s}`,
        turn: t + 1,
        arrival: s * gap,
        inputLength: blocks * BLOCK - 3,
        outputLength: output,
        hashIds: Array.from({ length: blocks }, (_, i) => s * 10_000 + i),
        blockSize: BLOCK,
      });
    }
  return requests.sort((a, b) => a.arrival - b.arrival || a.turn - b.turn);
}

/** Writes `requests` as a session JSONL trace. */
export function writeTraceFile(path: string, requests: readonly TraceRequest[]): string {
  writeFileSync(path, requests.map((r) => `${formatTraceLine(r, 'session')}\n`).join(''));
  return path;
}

/** An SSE completion: `tokens` text chunks, the usage chunk, [DONE]. */
export function sseBody(tokens: number, promptTokens: number, cached = 0): string {
  let text = '';
  for (let i = 0; i < tokens; i++) text += `data: {"choices":[{"index":0,"text":" t${i}","finish_reason":null}]}\n\n`;
  text += `data: {"choices":[],"usage":{"prompt_tokens":${promptTokens},"completion_tokens":${tokens},"total_tokens":${promptTokens + tokens},"prompt_tokens_details":{"cached_tokens":${cached}}}}\n\n`;
  return `${text}data: [DONE]\n\n`;
}

export function maxTokens(body: Buffer): number {
  return (JSON.parse(body.toString()) as { max_tokens: number }).max_tokens;
}

/** Answers every completion at once with `max_tokens` chunks. */
export function fastStub(): Promise<StubUpstream> {
  return startStub((_req: IncomingMessage, res: ServerResponse, body: Buffer) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' }).end(sseBody(maxTokens(body), 10));
  });
}

/**
 * A server with a capacity, its latency a function of the offered rate rather than of the wall
 * clock: while `offered()` is below `capacity` req/s it answers at once; at or above it every
 * answer comes `slowMs` late (its queue would grow without bound). An SLO limit well between the
 * two makes a trial's verdict depend on its rate alone, however busy the machine is.
 */
export function capacityStub(capacity: number, slowMs: number, offered: () => number): Promise<StubUpstream> {
  return startStub((_req, res, body) => {
    const answer = () => res.writeHead(200, { 'content-type': 'text/event-stream' }).end(sseBody(maxTokens(body), 10));
    if (offered() < capacity) answer();
    else setTimeout(answer, slowMs);
  });
}
