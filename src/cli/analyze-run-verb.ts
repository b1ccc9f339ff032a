/** `kvroute analyze run RECORDS` and `kvroute analyze compare A B` (declared in analyze-command.ts). */
import { existsSync } from 'node:fs';

import { checkSameTrace, compareRuns } from '../analysis/compare-runs.js';
import { readEngineStates } from '../analysis/engine-state-samples.js';
import { analyzeRun } from '../analysis/run-analysis.js';
import { cachedByRequest, runReuse, type CachedByRequest, type RunReuse } from '../analysis/run-reuse.js';
import { parseSlo } from '../analysis/slow-causes.js';
import { readTrace } from '../trace/read-trace.js';
import { readRecordFile, type RecordFile } from '../trace/record-file.js';
import type { RunHeader } from '../trace/records.js';
import { ANALYZE_DEFAULTS } from './defaults/analyze-defaults.js';
import { renderComparison, renderRun } from './analyze-tables.js';
import { integerFlag, stringFlag, type OptionValues } from './common.js';
import { checkInputFile, RECORD_FILE } from './input-file.js';
import { readerOptions, reportWarnings } from './trace-input.js';

/** Reads a record file; a truncated last record is reported, and the whole ones analysed. */
export function readRecordsReporting(verb: string, path: string): RecordFile {
  checkInputFile(verb, path, RECORD_FILE);
  const file = readRecordFile(path);
  if (file.truncated !== undefined)
    process.stderr.write(
      `kvroute ${verb}: warning: ${path}: the last record is truncated (${file.truncated.bytes} bytes at byte ${file.truncated.at}); analysed the ${file.records.length} whole records\n`,
    );
  return file;
}

export async function analyzeRunVerb(values: OptionValues, [path]: string[]): Promise<void> {
  const slo = parseSlo(stringFlag(values, 'slo') ?? ANALYZE_DEFAULTS.slo);
  const file = readRecordsReporting('analyze run', path!);
  const states = stringFlag(values, 'engine-state');
  const analysis = analyzeRun(file, slo, null, states === undefined ? undefined : readEngineStates(states));
  const cached = cachedByRequest(file.records);
  file.records.length = 0; // not needed past here: let the trace walk have the heap
  analysis.reuse = await reuseOf(values, file.header, cached);
  if (values.json) process.stdout.write(`${JSON.stringify(analysis)}\n`);
  else process.stdout.write(`${renderRun(file.header, analysis)}\n`);
}

/** The reuse split, from --trace or the header's trace when it is there; null (with a note) without. */
async function reuseOf(
  values: OptionValues,
  header: RunHeader | undefined,
  cached: CachedByRequest,
): Promise<RunReuse | null> {
  if (values['skip-reuse'] === true) return null;
  const given = stringFlag(values, 'trace');
  const fromHeader = header?.trace.path;
  const trace =
    given ?? (fromHeader !== undefined && fromHeader !== '-' && existsSync(fromHeader) ? fromHeader : undefined);
  if (trace === undefined) {
    process.stderr.write(
      `kvroute analyze run: note: no reuse split: ${fromHeader === undefined ? 'the records name no trace' : `the records' trace ${fromHeader} is not there`}; give --trace FILE\n`,
    );
    return null;
  }
  const options: Parameters<typeof runReuse>[4] = {
    sharedMinSessions: integerFlag(values, 'shared-min-sessions', 1) ?? ANALYZE_DEFAULTS.sharedMinSessions,
  };
  const workers = integerFlag(values, 'workers', 0);
  if (workers !== undefined) options.workers = workers;
  const reader = readTrace(trace, readerOptions(values));
  const reuse = await runReuse(trace, reader, cached, header, options);
  reportWarnings('analyze run', reader.stats);
  return reuse;
}

export function analyzeCompareVerb(values: OptionValues, [pathA, pathB]: string[]): void {
  const a = readRecordsReporting('analyze compare', pathA!);
  const b = readRecordsReporting('analyze compare', pathB!);
  checkSameTrace(pathA!, a, pathB!, b);
  const comparison = compareRuns(a.records, b.records);
  if (values.json) process.stdout.write(`${JSON.stringify(comparison)}\n`);
  else process.stdout.write(`${renderComparison(pathA!, pathB!, comparison)}\n`);
}
