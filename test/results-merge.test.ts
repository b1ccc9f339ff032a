/**
 * `npm run bench -- --update-results` merging its render into bench/RESULTS.md
 * (bench/lib/results-merge.mjs): what a run measured is refreshed, everything else on disk stays,
 * and text below a section's keep marker survives its refresh.
 */
import { describe, expect, it } from 'vitest';

import { KEEP_MARKER, mergeResults } from '../bench/lib/results-merge.mjs';

const doc = (...parts: string[]) => parts.join('\n');
const preamble = (date: string) => doc('# Benchmark results', '', `Recorded on ${date}.`, '');
const targets = (...entries: string[]) => doc('## Targets', '', '```', 'targets:', ...entries, '```', '');

describe('RESULTS.md merge', () => {
  it('writes the render as it is when there is no file', () => {
    const rendered = doc(preamble('today'), '## a', '', 'x', '');
    expect(mergeResults(rendered, '', rendered)).toBe(rendered);
  });

  it('refreshes the measured section, keeps the others and text below a keep marker', () => {
    const disk = doc(
      preamble('yesterday'),
      KEEP_MARKER,
      '',
      'Machines: noted by hand.',
      '',
      '## a',
      '',
      'old a',
      '',
      KEEP_MARKER,
      '',
      'a history row',
      '',
      '## hand',
      '',
      'a section no result renders',
      '',
      '## b',
      '',
      'b as edited by hand',
      '',
    );
    const rendered = doc(preamble('today'), '## a', '', 'new a', '', '## b', '', 'b rendered from saved results', '');
    const measured = doc(preamble('today'), '## a', '', 'new a', '');
    // Only the preamble's generated lines and section a's lines above its marker change.
    const expected = disk.replace(preamble('yesterday'), preamble('today')).replace('old a', 'new a');
    expect(expected).not.toBe(disk);
    expect(mergeResults(rendered, disk, measured)).toBe(expected);
  });

  it('puts a section the file lacks after the one before it in the render', () => {
    const disk = doc(preamble('d'), '## a', '', 'a', '', '## c', '', 'c', '');
    const rendered = doc(preamble('d'), '## a', '', 'a', '', '## b', '', 'b', '', '## c', '', 'c', '');
    const measured = doc(preamble('d'), '## b', '', 'b', '');
    expect(mergeResults(rendered, disk, measured)).toBe(rendered);
  });

  it('merges the Targets section entry by entry, continuation lines with their entry', () => {
    const disk = doc(
      preamble('d'),
      targets(
        '  MET   speed p50 <= 1 µs: 0.9 µs',
        '        median 0.8',
        '  FAIL  tracing adds <= 10 µs: 12.9 µs (by hand)',
        '  PASS  flow <= 2 µs: 1.279 µs (edited)',
      ),
    );
    const rendered = doc(
      preamble('d'),
      targets(
        '  MISS  speed p50 <= 1 µs: 1.2 µs',
        '        median 1.1',
        '  PASS  flow <= 2 µs: 1.56 µs (saved)',
        '  PASS  relay >= 1M/s: 1.1M/s',
      ),
    );
    const measured = doc(
      preamble('d'),
      targets('  MISS  speed p50 <= 1 µs: 1.2 µs', '        median 1.1', '  PASS  relay >= 1M/s: 1.1M/s'),
    );
    expect(mergeResults(rendered, disk, measured)).toBe(
      doc(
        preamble('d'),
        targets(
          '  MISS  speed p50 <= 1 µs: 1.2 µs',
          '        median 1.1',
          '  FAIL  tracing adds <= 10 µs: 12.9 µs (by hand)',
          '  PASS  flow <= 2 µs: 1.279 µs (edited)',
          '  PASS  relay >= 1M/s: 1.1M/s',
        ),
      ),
    );
  });

  it('tells entries of one name apart by their place among them', () => {
    const disk = doc(preamble('d'), targets('  MET   run: <= 60 s: 7.5 s', '  MET   run: peak RSS <= 2 GiB: 976 MiB'));
    const rendered = doc(
      preamble('d'),
      targets('  MET   run: <= 60 s: 8.1 s', '  MET   run: peak RSS <= 2 GiB: 990 MiB'),
    );
    expect(mergeResults(rendered, disk, rendered)).toBe(rendered);
  });
});

describe('RESULTS.md header', () => {
  it('names each machine with its workloads when a refresh ran on another machine, one machine otherwise', async () => {
    const { renderResults } = await import('../bench/lib/report.mjs');
    const { readFileSync } = await import('node:fs');
    const saved = JSON.parse(readFileSync(new URL('../bench/results.json', import.meta.url), 'utf8'));
    const header = (text: string) => text.split('\n').find((line) => /^- Machines?: /.test(line));
    // The saved results as one run made them (no result names a machine of its own).
    const results = saved.results.map(({ measured_on: _, ...r }: { measured_on?: string }) => r);
    expect(header(renderResults({ ...saved, results }, 'npm run bench'))).toMatch(/^- Machine: [^;]+$/);
    const [first, ...rest] = results;
    const mixed = { ...saved, results: [{ ...first, measured_on: 'Other CPU, 2 cores' }, ...rest] };
    const line = header(renderResults(mixed, 'npm run bench'))!;
    expect(line).toMatch(/^- Machines: /);
    expect(line).toContain(`Other CPU, 2 cores (${first.workload})`);
    expect(line.split('; ').length).toBe(2);
  });
});
