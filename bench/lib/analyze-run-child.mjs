// @ts-check
// `node analyze-run-child.mjs RECORDS reuse|no-reuse WORKERS`: what `kvroute analyze run --json`
// runs (read the records, metrics, slow causes, then walk the header's trace for the reuse split), in
// a process of its own so its peak RSS is the analysis's. Prints { seconds, peak_rss_bytes,
// records, n_slow }.
import { analyzeRun } from '../../dist/analysis/run-analysis.js';
import { cachedByRequest, runReuse } from '../../dist/analysis/run-reuse.js';
import { readRecordFile } from '../../dist/trace/record-file.js';
import { readTrace } from '../../dist/trace/read-trace.js';

const [path, mode, workersArg] = process.argv.slice(2);
if (path === undefined || mode === undefined || workersArg === undefined)
  throw new Error('usage: analyze-run-child.mjs RECORDS reuse|no-reuse WORKERS');
const started = performance.now();
const file = readRecordFile(path);
const trace = file.header?.trace.path;
const analysis = analyzeRun(file);
if (mode === 'reuse' && trace !== undefined) {
  const cached = cachedByRequest(file.records);
  file.records.length = 0;
  analysis.reuse = await runReuse(trace, readTrace(trace), cached, file.header, { workers: Number(workersArg) });
}
JSON.stringify(analysis);
const seconds = (performance.now() - started) / 1000;
// maxRSS is in KiB and covers every thread of the process, the Piscina workers included.
const peak = process.resourceUsage().maxRSS * 1024;
process.stdout.write(
  JSON.stringify({ seconds, peak_rss_bytes: peak, records: analysis.requests, n_slow: analysis.slow.n_slow }),
);
