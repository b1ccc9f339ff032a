/**
 * A size in bytes as settings write it: `65536`, `512KiB`, `64MiB`, `1GiB`, `1.5 GB` (binary units
 * KiB/MiB/GiB and K/M/G, decimal KB/MB/GB, case-insensitive). Shared by serve's size settings and
 * `kvroute events relay --max-bytes`, which add their own bounds and messages.
 */
const SIZE_UNITS: Record<string, number> = {
  '': 1,
  b: 1,
  k: 1024,
  kb: 1000,
  kib: 1024,
  m: 2 ** 20,
  mb: 1e6,
  mib: 2 ** 20,
  g: 2 ** 30,
  gb: 1e9,
  gib: 2 ** 30,
};

/** The bytes `raw` names (whole bytes, rounded down), or NaN when it is not a size. */
export function parseByteSize(raw: unknown): number {
  const match = typeof raw === 'string' ? /^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$/.exec(raw) : null;
  const unit = match === null ? undefined : SIZE_UNITS[match[2]!.toLowerCase()];
  return match === null || unit === undefined ? NaN : Math.floor(Number(match[1]) * unit);
}
