/**
 * The request scanner's fuzz corpus against the JavaScript path: every committed input of the
 * libFuzzer target request-scan (native/fuzz/corpus/request-scan/, seeds and merged discoveries,
 * and native/fuzz/regressions/request-scan/, the inputs that once found a bug) is decoded as the
 * target decodes it (byte 0: bit 0 completions, bit 1 strip, bits 2-4 chunkBytes; the rest is the
 * body) and run through scanRequest (sync and threadpool) and hashParsedRequest(parseRequest(...)).
 * Both must agree: the same error (status, code, param, message; JSON syntax detail excepted) or
 * the same model, stream, session, ids (bit for bit), token counts and forwarded bytes. The fuzzer
 * itself checks the scanner's own invariants (native/fuzz/request-scan-fuzz.cc); this is the
 * comparison it cannot make without JavaScript. docs/fuzzing.md.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { hashParsedRequest, parseRequest } from '../src/proxy/exchange/request-inputs.js';
import { scanRequest, scanRequestAsync } from '../src/proxy/exchange/request-scan.js';

import { difference, settle, settleAsync } from './helpers/scan-outcome.js';

/** native/fuzz/request-scan-fuzz.cc's kChunks, in its order. */
const CHUNKS = [128, 16, 1, 7, 4096, 64, 3, 128] as const;
const ROOT = join(import.meta.dirname, '..', 'native', 'fuzz');

function inputs(kind: 'corpus' | 'regressions'): { name: string; bytes: Buffer }[] {
  const dir = join(ROOT, kind, 'request-scan');
  let names: string[];
  try {
    names = readdirSync(dir).filter((name) => !name.startsWith('.'));
  } catch {
    return [];
  }
  return names.sort().map((name) => ({ name: `${kind}/${name}`, bytes: readFileSync(join(dir, name)) }));
}

describe('request scanner fuzz corpus: native and JavaScript paths agree', () => {
  const corpus = inputs('corpus');
  const regressions = inputs('regressions');

  it('has a corpus to replay', () => {
    expect(corpus.length).toBeGreaterThan(10);
  });

  it.each([...corpus, ...regressions].map((input) => [input.name, input.bytes] as const))(
    '%s',
    async (_name, input) => {
      const choice = input.length > 0 ? input[0]! : 0;
      const endpoint = (choice & 1) !== 0 ? 'completions' : 'chat';
      const strip = (choice & 2) !== 0;
      const chunk = CHUNKS[(choice >> 2) & 7]!;
      // A copy: the forwarded body must be these very bytes when nothing is stripped.
      const bytes = Buffer.from(input.subarray(1));
      const expected = settle(() => hashParsedRequest(parseRequest(endpoint, bytes, '', strip), chunk));
      expect(
        difference(
          expected,
          settle(() => scanRequest(endpoint, bytes, '', strip, chunk)),
          bytes,
          strip,
        ),
      ).toBe('');
      expect(
        difference(
          expected,
          await settleAsync(() => scanRequestAsync(endpoint, bytes, '', strip, chunk)),
          bytes,
          strip,
        ),
      ).toBe('');
    },
  );
});
