/**
 * The usage scanner against JSON.parse: random engine bodies (key order, whitespace, indentation,
 * cached tokens present, zero, null or absent) and SSE streams cut at random points must give
 * the usage that parsing them gives.
 */
import { describe, expect, it } from 'vitest';

import { SseUsageScanner, usageIn } from '../src/proxy/exchange/usage-scan.js';
import { Rng } from './helpers/random.js';

type Usage = { prompt_tokens: number; cached_tokens: number };

/** The usage a JSON parse of the body gives (the oracle). */
function parsedUsage(body: string): Usage | undefined {
  const usage = (JSON.parse(body) as { usage?: Record<string, unknown> | null }).usage;
  if (usage === undefined || usage === null) return undefined;
  const details = usage.prompt_tokens_details as { cached_tokens?: number } | null | undefined;
  return { prompt_tokens: usage.prompt_tokens as number, cached_tokens: details?.cached_tokens ?? 0 };
}

/** JSON with random spacing around the colons and commas (newlines too, unless on one SSE line). */
function spaced(rng: Rng, value: unknown, newlines = true): string {
  const spaces = newlines ? [' ', '', '\n', '\t', '  '] : [' ', '', '\t', '  '];
  const sp = () => spaces[rng.int(0, spaces.length - 1)]!;
  const write = (v: unknown): string => {
    if (v === null || typeof v !== 'object') return JSON.stringify(v);
    if (Array.isArray(v)) return `[${v.map(write).join(`,${sp()}`)}]`;
    return `{${Object.entries(v)
      .map(([k, x]) => `${sp()}${JSON.stringify(k)}${sp()}:${sp()}${write(x)}`)
      .join(',')}${sp()}}`;
  };
  return write(value);
}

function randomUsage(rng: Rng): Record<string, unknown> {
  const prompt = rng.int(0, 2_000_000);
  const fields: Array<[string, unknown]> = [
    ['prompt_tokens', prompt],
    ['completion_tokens', rng.int(0, 9999)],
    ['total_tokens', prompt + rng.int(0, 9999)],
  ];
  const detail = rng.int(0, 3);
  if (detail === 1) fields.push(['prompt_tokens_details', { cached_tokens: rng.int(0, prompt) }]);
  if (detail === 2) fields.push(['prompt_tokens_details', null]);
  if (detail === 3) fields.push(['prompt_tokens_details', { audio_tokens: 0, cached_tokens: 0 }]);
  if (rng.chance(0.5)) fields.reverse();
  return Object.fromEntries(fields);
}

describe('usage scanning', () => {
  it('reads what JSON.parse reads from 2,000 random non-streaming bodies', () => {
    const rng = new Rng(41);
    for (let n = 0; n < 2000; n++) {
      const body = {
        id: `cmpl-${n}`,
        object: 'chat.completion',
        choices: [{ index: 0, message: { role: 'assistant', content: 'x'.repeat(rng.int(0, 300)) } }],
        ...(rng.chance(0.9) ? { usage: randomUsage(rng) } : {}),
      };
      const text = rng.chance(0.5) ? spaced(rng, body) : JSON.stringify(body, null, rng.int(0, 4));
      expect(usageIn(Buffer.from(text)), text).toEqual(parsedUsage(text));
    }
  });

  it('follows 500 random SSE streams cut at random points', () => {
    const rng = new Rng(42);
    for (let n = 0; n < 500; n++) {
      const usage = randomUsage(rng);
      const chunk = (i: number) =>
        `data: ${JSON.stringify({ id: 'c', choices: [{ delta: { content: `t${i}` } }], usage: null })}\n\n`;
      const events = Array.from({ length: rng.int(1, 20) }, (_, i) => chunk(i));
      const usageEvent = `data: ${spaced(rng, { id: 'c', choices: [], usage }, false)}\n\n`;
      const stream = Buffer.from(`${events.join('')}${usageEvent}data: [DONE]\n\n`);
      const scanner = new SseUsageScanner();
      let at = 0;
      while (at < stream.length) {
        const cut = Math.min(stream.length, at + rng.int(1, 400));
        scanner.feed(stream.subarray(at, cut));
        at = cut;
      }
      expect(scanner.usage).toEqual(parsedUsage(JSON.stringify({ usage })));
    }
  });
});
