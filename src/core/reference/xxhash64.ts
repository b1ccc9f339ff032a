/**
 * XXH64 in BigInt arithmetic: the TypeScript twin of native/util/xxhash64.cc,
 * written from the public xxHash specification. Slow (BigInt) and simple on
 * purpose: it is the oracle the addon is tested against, not a hot path.
 */

const MASK = (1n << 64n) - 1n;
const P1 = 0x9e3779b185ebca87n;
const P2 = 0xc2b2ae3d27d4eb4fn;
const P3 = 0x165667b19e3779f9n;
const P4 = 0x85ebca77c2b2ae63n;
const P5 = 0x27d4eb2f165667c5n;

const rotl = (x: bigint, r: bigint): bigint => ((x << r) | (x >> (64n - r))) & MASK;

function round(acc: bigint, input: bigint): bigint {
  acc = (acc + input * P2) & MASK;
  return (rotl(acc, 31n) * P1) & MASK;
}

function mergeRound(acc: bigint, val: bigint): bigint {
  acc ^= round(0n, val);
  return (acc * P1 + P4) & MASK;
}

export function xxhash64(bytes: Uint8Array, seed: bigint): bigint {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const len = bytes.length;
  let p = 0;
  let h: bigint;
  if (len >= 32) {
    let v1 = (seed + P1 + P2) & MASK;
    let v2 = (seed + P2) & MASK;
    let v3 = seed;
    let v4 = (seed - P1) & MASK;
    while (p + 32 <= len) {
      v1 = round(v1, view.getBigUint64(p, true));
      v2 = round(v2, view.getBigUint64(p + 8, true));
      v3 = round(v3, view.getBigUint64(p + 16, true));
      v4 = round(v4, view.getBigUint64(p + 24, true));
      p += 32;
    }
    h = (rotl(v1, 1n) + rotl(v2, 7n) + rotl(v3, 12n) + rotl(v4, 18n)) & MASK;
    h = mergeRound(h, v1);
    h = mergeRound(h, v2);
    h = mergeRound(h, v3);
    h = mergeRound(h, v4);
  } else {
    h = (seed + P5) & MASK;
  }
  h = (h + BigInt(len)) & MASK;
  while (p + 8 <= len) {
    h ^= round(0n, view.getBigUint64(p, true));
    h = (rotl(h, 27n) * P1 + P4) & MASK;
    p += 8;
  }
  if (p + 4 <= len) {
    h ^= (BigInt(view.getUint32(p, true)) * P1) & MASK;
    h = (rotl(h, 23n) * P2 + P3) & MASK;
    p += 4;
  }
  while (p < len) {
    h ^= (BigInt(bytes[p]!) * P5) & MASK;
    h = (rotl(h, 11n) * P1) & MASK;
    p += 1;
  }
  h ^= h >> 33n;
  h = (h * P2) & MASK;
  h ^= h >> 29n;
  h = (h * P3) & MASK;
  h ^= h >> 32n;
  return h;
}

const encoder = new TextEncoder();

/** XXH64 of a string's UTF-8 bytes (lone surrogates become U+FFFD, as in the addon). */
export function xxhash64String(text: string, seed: bigint): bigint {
  return xxhash64(encoder.encode(text), seed);
}

/** XXH64 of a 64-bit id's eight little-endian bytes. */
export function xxhash64Id(id: bigint): bigint {
  const bytes = new Uint8Array(8);
  new DataView(bytes.buffer).setBigUint64(0, id, true);
  return xxhash64(bytes, 0n);
}
