/**
 * Every marked example in the docs runs as a reader would paste it (helpers/doc-examples.ts):
 * servers started in the background, a client request through them, the output it shows.
 */
import { describe, expect, it } from 'vitest';

import { docExamples, runDocExample } from './helpers/doc-examples.js';

const DOCS = ['docs/sim-serve.md', 'docs/proxy.md', 'docs/api-formats.md', 'docs/tracing.md', 'docs/discovery.md'];

describe('the docs’ examples', () => {
  const examples = DOCS.flatMap((doc) => {
    try {
      return docExamples(doc);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw error;
    }
  });

  it('there are some, each with a distinct name', () => {
    expect(examples.length).toBeGreaterThan(0);
    expect(new Set(examples.map((e) => e.name)).size).toBe(examples.length);
  });

  for (const example of examples)
    it(`${example.doc}: ${example.name}`, async () => {
      const { code, output } = await runDocExample(example, 60_000);
      expect(code, output).toBe(0);
      expect(output).toMatch(example.expect);
    }, 90_000);
});
