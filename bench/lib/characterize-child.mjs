// @ts-check
// `node characterize-child.mjs TRACE WORKERS`: the same path as `kvroute analyze trace` (stream
// reader → characterizeTrace), in a process of its own so its peak RSS is the analysis's.
// Prints { seconds, peak_rss_bytes, workers, requests, blocks }.
import { characterizeTrace } from '../../dist/analysis/characterize.js';
import { defaultWorkers } from '../../dist/analysis/pipeline.js';
import { readTrace } from '../../dist/trace/read-trace.js';

const [trace, workersArg] = process.argv.slice(2);
if (trace === undefined || workersArg === undefined)
  throw new Error('usage: characterize-child.mjs TRACE WORKERS|default');
const workers = workersArg === 'default' ? defaultWorkers() : Number(workersArg);
const started = performance.now();
const summary = await characterizeTrace(readTrace(trace), { workers });
const seconds = (performance.now() - started) / 1000;
// maxRSS is in KiB and covers every thread of the process, the Piscina workers included.
const peak = process.resourceUsage().maxRSS * 1024;
process.stdout.write(
  JSON.stringify({ seconds, peak_rss_bytes: peak, workers, requests: summary.requests, blocks: summary.blocks }),
);
