/** Reads a whole trace through `readTrace`: its requests in order, and the reader's stats. */
import { readTrace, type ReadTraceOptions } from '../../src/trace/read-trace.js';
import type { TraceRequest } from '../../src/trace/types.js';

export async function readAll(path: string, options?: ReadTraceOptions) {
  const reader = readTrace(path, options);
  const requests: TraceRequest[] = [];
  for await (const request of reader) requests.push(request);
  return { requests, stats: reader.stats };
}
