/**
 * The RunHeader a verb writes at the top of its record file: what ran, on what, when, by which kvroute.
 * Lives beside the record format (records.ts) so libraries (replay) and verbs alike can write it.
 */
import { kvrouteVersion } from '../core/version.js';
import { RECORDS_FORMAT, RECORDS_VERSION, type RunHeader } from './records.js';

export { kvrouteVersion };

type RunFacts = Omit<RunHeader, 'format' | 'version' | 'kvroute_version' | 'command' | 'started_at'>;

export function runHeader(facts: RunFacts, startedAt = new Date()): RunHeader {
  return {
    format: RECORDS_FORMAT,
    version: RECORDS_VERSION,
    ...facts,
    kvroute_version: kvrouteVersion(),
    command: process.argv.slice(2),
    started_at: startedAt.toISOString(),
  };
}
