/**
 * The only place that loads the addon (and the only `any` in the codebase).
 *
 * Search order: $KVROUTE_ADDON, then the cmake-js build (`npm ci` makes it),
 * then the node-gyp build (`npm run build:gyp`), then the prebuilt binary the
 * npm package ships (prebuilds/<platform>-<arch>/kvroute.node, made by
 * prebuildify at pack time; scripts/install-native.mjs builds from source when
 * it does not load). The first that loads wins; if none does, one error lists
 * every path tried and how to build.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import type { BlockTrie } from './block-trie.js';
import { OFFLOAD_OUTCOMES, POLICY_KINDS, REASONS } from './codes.js';
import { layoutMismatch, type CoreRouterConstructor } from './core-router.js';
import { stateError, type KvrouteError } from './errors.js';

/** The shared-memory feed's writer (native/bindings/js-shm-feed.h); values as FEED_FIELDS in src/state. */
export interface NativeFeedWriter {
  publish(slot: number, values: Float64Array, instance: string): void;
  /** [slot count, generation] */
  info(): [number, bigint];
  close(): void;
}

/** The shared-memory feed's reader (native/bindings/js-shm-feed.h). */
export interface NativeFeedReader {
  /** Re-checks the file when due (or `force`); returns the status code. */
  refresh(force: boolean): number;
  /** [status code, slot count, generation] */
  info(): [number, number, bigint];
  /** Fills `out` and returns the instance id, or null without a consistent snapshot. */
  read(slot: number, out: Float64Array): string | null;
  close(): void;
}

/** What RequestScanner.scanAsync resolves to (native/bindings/js-request-scan.h). */
export interface NativeScanResult {
  outcome: number;
  code: number;
  param: number;
  fallback: number;
  message?: string;
  model?: string;
  user?: string;
  stream?: boolean;
  priority?: number;
  maxTokens?: number;
  idsKind?: number;
  ids?: BigUint64Array | Float64Array;
  inputTokens?: number;
  blockTokens?: number;
  forward?: Uint8Array;
}

/** The request scanner (native/bindings/js-request-scan.h); results of scan() land in `out` and `values`. */
export interface NativeRequestScanner {
  scan(
    bytes: Uint8Array,
    endpoint: number,
    chunkBytes: number,
    strip: boolean,
  ): BigUint64Array | Float64Array | undefined;
  scanAsync(bytes: Uint8Array, endpoint: number, chunkBytes: number, strip: boolean): Promise<NativeScanResult>;
}

/**
 * The prefix trie of trace analysis (native/bindings/js-prefix-trie.h): src/trace/prefix-trie.ts's
 * results, ids checked (safe integers in a Float64Array; a bad argument throws a TypeError or
 * RangeError naming it and changes nothing).
 */
export interface NativePrefixTrie extends BlockTrie {
  /** Bytes held: node records and table. */
  readonly bytes: number;
}

/**
 * The native half of the proxy's OTLP span encoder (native/bindings/js-otlp-spans.h): spans written
 * from requests' rows (or an op stream) and pre-encoded blocks (src/proxy/observe/otlp-native.ts
 * drives it).
 */
export interface NativeOtlpSpanWriter {
  /** Keeps `bytes` (1 to 65,536 of them) as block `id` (below 65,536). */
  block(id: number, bytes: Uint8Array): void;
  /** Forgets every block. */
  clear(): void;
  /** Writes the spans of ops[0, opCount) into `out` from `at`: where they end, or -1 when they do not fit. */
  write(ops: Float64Array, opCount: number, ids: Uint8Array, out: Uint8Array, at: number): number;
  /**
   * Writes the spans of the requests' rows in rows[0, rowCount) (native/otlp/request-rows.h) into
   * `out` from `at`, with `layout`'s block ids and ids[0, idBytes): where they end, or -1 when they
   * do not fit.
   */
  writeRequests(
    rows: Float64Array,
    rowCount: number,
    layout: Float64Array,
    ids: Uint8Array,
    idBytes: number,
    out: Uint8Array,
    at: number,
  ): number;
}

export interface NativeAddon {
  NativeRouter: CoreRouterConstructor;
  FeedWriter: new (path: string, slots: number, recreate: boolean) => NativeFeedWriter;
  FeedReader: new (path: string, recheckMs: number) => NativeFeedReader;
  RequestScanner: new (out: Float64Array, values: unknown[]) => NativeRequestScanner;
  PrefixTrie: new () => NativePrefixTrie;
  OtlpSpanWriter: new () => NativeOtlpSpanWriter;
  /** simdjson's kernel for this CPU. */
  scanKernel: string;
  /** Chained XXH64 ids of `text`'s UTF-8 bytes in `chunkBytes` chunks. */
  hashPrompt(text: string, chunkBytes: number): BigUint64Array;
  xxhash64(bytes: Uint8Array, seed: bigint): bigint;
  /** Token block keys (docs/hashing.md); arguments checked by src/core/hashing.ts. */
  hashTokenBlocks(tokens: Uint32Array, blockSize: number, parentKey?: bigint): BigUint64Array;
  reasonCount: number;
  policyKindCount: number;
  offloadOutcomeCount: number;
  /** The typed-array layouts, by their names in src/core/core-router.ts (CORE_LAYOUT). */
  layout: Record<string, number | Record<string, number>>;
  /** malloc_trim(0) on the threadpool: the C heap's free pages back to the system; false where there is none (not glibc). */
  trimHeap(): Promise<boolean>;
}

let loaded: { addon: NativeAddon; path: string } | KvrouteError | undefined;

/** The package root: the nearest ancestor of this file holding package.json. */
function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json'))) {
    const parent = dirname(dir);
    if (parent === dir) throw new Error('kvroute: package.json not found above ' + fileURLToPath(import.meta.url));
    dir = parent;
  }
  return dir;
}

export function addonCandidates(): string[] {
  const root = packageRoot();
  const paths = [
    join(root, 'build-cmake', 'Release', 'kvroute.node'),
    join(root, 'build', 'Release', 'kvroute.node'),
    join(root, 'prebuilds', `${process.platform}-${process.arch}`, 'kvroute.node'),
  ];
  const override = process.env.KVROUTE_ADDON;
  return override ? [override, ...paths] : paths;
}

function tryLoad(): { addon: NativeAddon; path: string } | KvrouteError {
  const require = createRequire(import.meta.url);
  const failures: string[] = [];
  for (const path of addonCandidates()) {
    if (!existsSync(path)) {
      failures.push(`${path}: not built`);
      continue;
    }
    try {
      // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the addon's exports are untyped
      const addon: any = require(path);
      if (
        addon.reasonCount !== REASONS.length ||
        addon.policyKindCount !== POLICY_KINDS.length ||
        addon.offloadOutcomeCount !== OFFLOAD_OUTCOMES.length
      ) {
        failures.push(`${path}: built from other sources (reason, policy or offload tables differ); rebuild it`);
        continue;
      }
      const layout = layoutMismatch(addon.layout);
      if (layout !== null) {
        failures.push(`${path}: its buffer layouts differ from src/core/core-router.ts (${layout}); rebuild it`);
        continue;
      }
      return { addon: addon as NativeAddon, path };
    } catch (error) {
      failures.push(`${path}: ${(error as Error).message}`);
    }
  }
  return stateError(
    'ERR_KVROUTE_NATIVE_UNAVAILABLE',
    `kvroute: the native addon could not be loaded (run \`npm run build:native\`, or pass { native: false } / ` +
      `KVROUTE_NATIVE=0 for the TypeScript reference):\n  ${failures.join('\n  ')}`,
  );
}

/** The addon, loaded once per thread; throws ERR_KVROUTE_NATIVE_UNAVAILABLE if it cannot load. */
export function loadNative(): NativeAddon {
  loaded ??= tryLoad();
  if (loaded instanceof Error) throw loaded;
  return loaded.addon;
}

/** Where the addon was loaded from, or null when it is unavailable. */
export function nativePath(): string | null {
  loaded ??= tryLoad();
  return loaded instanceof Error ? null : loaded.path;
}

/** Whether `KVROUTE_NATIVE` asks for the TypeScript reference. */
export function nativeDisabledByEnv(): boolean {
  return process.env.KVROUTE_NATIVE === '0';
}
