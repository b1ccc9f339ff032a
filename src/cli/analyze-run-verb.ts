/** `kvroute analyze run RECORDS` and `kvroute analyze compare A B` (declared in analyze-command.ts). */
import { checkSameTrace, compareRuns } from '../analysis/compare-runs.js';
import { analyzeRun } from '../analysis/run-analysis.js';
import { parseSlo } from '../analysis/slow-causes.js';
import { readRecordFile, type RecordFile } from '../trace/record-file.js';
import { ANALYZE_DEFAULTS } from './analyze-command.js';
import { renderComparison, renderRun } from './analyze-tables.js';
import { stringFlag, type OptionValues } from './common.js';

/** Reads a record file; a truncated last record is reported, and the whole ones analysed. */
export function readRecordsReporting(verb: string, path: string): RecordFile {
  const file = readRecordFile(path);
  if (file.truncated !== undefined)
    process.stderr.write(
      `kvroute ${verb}: warning: ${path}: the last record is truncated (${file.truncated.bytes} bytes at byte ${file.truncated.at}); analysed the ${file.records.length} whole records\n`,
    );
  return file;
}

export function analyzeRunVerb(values: OptionValues, [path]: string[]): void {
  const slo = parseSlo(stringFlag(values, 'slo') ?? ANALYZE_DEFAULTS.slo);
  const file = readRecordsReporting('analyze run', path!);
  const analysis = analyzeRun(file, slo);
  if (values.json) process.stdout.write(`${JSON.stringify(analysis)}\n`);
  else process.stdout.write(`${renderRun(file.header, analysis)}\n`);
}

export function analyzeCompareVerb(values: OptionValues, [pathA, pathB]: string[]): void {
  const a = readRecordsReporting('analyze compare', pathA!);
  const b = readRecordsReporting('analyze compare', pathB!);
  checkSameTrace(pathA!, a, pathB!, b);
  const comparison = compareRuns(a.records, b.records);
  if (values.json) process.stdout.write(`${JSON.stringify(comparison)}\n`);
  else process.stdout.write(`${renderComparison(pathA!, pathB!, comparison)}\n`);
}
