/** `kvroute report`, declared; report-verb.ts runs it (and only it loads the charting libraries). */
import type { Command } from 'commander';

import { example, runs, subcommand, withDefault } from './command-kit.js';

export function addReportCommand(program: Command): void {
  const report = subcommand(
    program,
    'report',
    'one self-contained HTML report (and a Markdown summary) of a sweep directory, a record file or a policy evaluation',
  )
    .argument(
      '<IN>',
      'a sweep directory (with sweep.json; docs/report.md), one run’s record file, or a policy evaluation directory (<set>-seeds-<seeds>.json files)',
    )
    .option(
      '-o, --out <OUT.html>',
      withDefault('the HTML file to write; OUT.md is written beside it', 'DIR/report.html, or RECORDS.html'),
    );
  example(
    report,
    'kvroute trace synth --sessions 50 -o synth.jsonl',
    'kvroute sweep synth.jsonl --policies sticky,min_ttft --out sweep-1',
    'kvroute report sweep-1 -o sweep-1.html',
  );
  runs(report, async () => (await import('./report-verb.js')).reportVerb);
}
