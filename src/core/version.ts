/** kvroute's own version, for what it writes (record headers, trace resources). */
import { readFileSync } from 'node:fs';

let version: string | undefined;

/** kvroute's version, from package.json (read once). */
export function kvrouteVersion(): string {
  version ??= (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string })
    .version;
  return version;
}
