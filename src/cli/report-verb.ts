/** `kvroute report IN [-o OUT.html]` (declared in report-command.ts). */
import { statSync } from 'node:fs';

import { buildReport, defaultOutput } from '../report/build-report.js';
import { ReportError } from '../report/report-input.js';
import { stringFlag, type OptionValues } from './common.js';
import { kvrouteVersion } from './run-header.js';

export async function reportVerb(values: OptionValues, [input]: string[]): Promise<void> {
  let isDirectory: boolean;
  try {
    isDirectory = statSync(input!).isDirectory();
  } catch {
    throw new ReportError(`${input}: missing: give a sweep directory or a record file`);
  }
  const out = stringFlag(values, 'out') ?? defaultOutput(input!, isDirectory);
  const result = await buildReport(input!, out, kvrouteVersion());
  const omitted = result.omitted.length === 0 ? '' : `; not shown: ${result.omitted.map((f) => f.id).join(', ')}`;
  process.stderr.write(
    `kvroute report: wrote ${result.html} (${result.drawn.length} figures${omitted}) and ${result.markdown}\n`,
  );
}
