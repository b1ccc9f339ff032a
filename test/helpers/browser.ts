/**
 * The one place the tests launch a browser: headless Chromium driven by playwright-core.
 *
 * Which Chromium: Debian's /usr/bin/chromium when it is installed (CI's apt step brings it),
 * otherwise the one the `@sparticuz/chromium` dev dependency ships inside its npm package, so
 * `npm ci && npm test` needs no system browser. The package's binary is unpacked (brotli, ~4 s)
 * into the OS temporary directory on first use and reused after; vitest's global setup
 * (test/helpers/browser-setup.ts) unpacks it once before the test files run in parallel, so no
 * two test processes race to write it.
 *
 * That binary links a few shared libraries (NSS, NSPR, expat). Where the system lacks one (`ldd`
 * says "not found"), the copies the package ships for Amazon Linux are unpacked beside it and
 * put on the browser's LD_LIBRARY_PATH (KVROUTE_TEST_BROWSER_LIBS=bundled forces that, to test it).
 *
 * KVROUTE_TEST_BROWSER=npm forces the npm package's Chromium and =debian forces Debian's (a
 * missing one then fails the test): a way to check both paths on one machine, not a skip.
 *
 * Pages open with locale 'en-US': without one, the npm Chromium reports navigator.language as
 * `en-US@posix`, which Intl rejects (the dashboard's locale guard copes; a test that means to
 * check that passes its own locale).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { brotliDecompressSync } from 'node:zlib';

import { chromium, type Browser, type BrowserContextOptions, type Page } from 'playwright-core';

export const DEBIAN_CHROMIUM = '/usr/bin/chromium';

export type BrowserSource = 'debian' | 'npm';

/** The Chromium the tests use: forced by KVROUTE_TEST_BROWSER, else Debian's when present. */
export function browserSource(): BrowserSource {
  const forced = process.env.KVROUTE_TEST_BROWSER;
  if (forced === 'npm' || forced === 'debian') return forced;
  if (forced !== undefined && forced !== '')
    throw new Error(`KVROUTE_TEST_BROWSER=${forced}: expected "npm" or "debian"`);
  return existsSync(DEBIAN_CHROMIUM) ? 'debian' : 'npm';
}

const DEBIAN_ARGS = [
  '--headless=new',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export interface LaunchSpec {
  executablePath: string;
  args: string[];
  env?: Record<string, string>;
}

/** The shared libraries `executable` needs that the system lacks. */
function missingLibraries(executable: string): string[] {
  const out = execFileSync('ldd', [executable], { encoding: 'utf8' });
  return out.split('\n').filter((line) => line.includes('not found'));
}

/** Unpacks the package's Amazon Linux libraries (bin/al2023.tar.br) once; their directory. */
function bundledLibraries(): string {
  const dir = join(tmpdir(), 'kvroute-chromium-al2023');
  if (existsSync(join(dir, 'lib', 'libnss3.so'))) return join(dir, 'lib');
  // The package exports no package.json: its root is two levels above its entry (build/<format>/).
  const pkg = join(dirname(createRequire(import.meta.url).resolve('@sparticuz/chromium')), '..', '..');
  mkdirSync(dir, { recursive: true });
  const tar = join(dir, 'al2023.tar');
  writeFileSync(tar, brotliDecompressSync(readFileSync(join(pkg, 'bin', 'al2023.tar.br'))));
  execFileSync('tar', ['-xf', tar, '-C', dir]);
  return join(dir, 'lib');
}

/** The executable and arguments for `source`; unpacks the npm package's binary on first use. */
export async function browserLaunchSpec(source: BrowserSource = browserSource()): Promise<LaunchSpec> {
  if (source === 'debian') {
    if (!existsSync(DEBIAN_CHROMIUM))
      throw new Error(`${DEBIAN_CHROMIUM} is missing (KVROUTE_TEST_BROWSER=debian): apt-get install chromium`);
    return { executablePath: DEBIAN_CHROMIUM, args: DEBIAN_ARGS };
  }
  const { default: packaged } = await import('@sparticuz/chromium');
  const spec: LaunchSpec = { executablePath: await packaged.executablePath(), args: packaged.args };
  const forced = process.env.KVROUTE_TEST_BROWSER_LIBS === 'bundled';
  if (forced || missingLibraries(spec.executablePath).length > 0) {
    const libs = bundledLibraries();
    spec.env = { LD_LIBRARY_PATH: [libs, process.env.LD_LIBRARY_PATH].filter(Boolean).join(':') };
  }
  return spec;
}

/** A headless Chromium; close it in a `finally`. Playwright gives it a fresh temporary profile. */
export async function launchBrowser(source: BrowserSource = browserSource()): Promise<Browser> {
  const spec = await browserLaunchSpec(source);
  const env = spec.env === undefined ? undefined : { ...(process.env as Record<string, string>), ...spec.env };
  return chromium.launch({ executablePath: spec.executablePath, args: spec.args, env, timeout: 30_000 });
}

/** A page in a fresh context with locale 'en-US' unless `options` says otherwise. */
export async function newPage(browser: Browser, options: BrowserContextOptions = {}): Promise<Page> {
  const context = await browser.newContext({ locale: 'en-US', ...options });
  return context.newPage();
}
