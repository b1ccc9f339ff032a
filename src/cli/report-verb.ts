/** `kvroute report IN [-o OUT.html]` (declared in report-command.ts). */
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';

import { buildReport, defaultOutput, markdownPath } from '../report/build-report.js';
import { evaluationFiles } from '../report/evaluation-input.js';
import { buildEvaluationReport } from '../report/evaluation-report.js';
import { ReportError } from '../report/report-input.js';
import { stringFlag, type OptionValues } from './common.js';
import { kvrouteVersion } from '../trace/run-header.js';

export async function reportVerb(values: OptionValues, [input]: string[]): Promise<void> {
  let isDirectory: boolean;
  try {
    isDirectory = statSync(input!).isDirectory();
  } catch {
    throw new ReportError(`${input}: missing: give a sweep directory, a record file or a policy evaluation directory`);
  }
  const out = stringFlag(values, 'out') ?? defaultOutput(input!, isDirectory);
  // A policy evaluation directory (scripts/policy-eval.mjs) has evaluation files and no sweep.json.
  if (isDirectory && !existsSync(join(input!, 'sweep.json')) && evaluationFiles(input!).length > 0) {
    const result = await buildEvaluationReport(input!, out, markdownPath(out), kvrouteVersion());
    process.stderr.write(
      `kvroute report: wrote ${result.html} (${result.drawn.length} evaluation figures) and ${result.markdown}
`,
    );
    return;
  }
  const result = await buildReport(input!, out, kvrouteVersion());
  const omitted = result.omitted.length === 0 ? '' : `; not shown: ${result.omitted.map((f) => f.id).join(', ')}`;
  process.stderr.write(
    `kvroute report: wrote ${result.html} (${result.drawn.length} figures${omitted}) and ${result.markdown}\n`,
  );
}
