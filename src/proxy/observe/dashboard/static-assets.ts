/**
 * The files the dashboard page loads, read into memory once when the dashboard is created:
 * uPlot's browser build and stylesheet from node_modules, and the page's own HTML, CSS, locale
 * guard and script (string modules, so `tsc` alone ships them; it copies no other files).
 *
 * uPlot's paths carry its version, so the browser may cache them for a long time: a new
 * version is a new URL. The page's own files change with kvroute and are revalidated.
 *
 * Hazard: resolution goes through Node's resolver from this file (createRequire), so it finds
 * the uPlot that kvroute depends on, also when kvroute is installed as a dependency; a missing
 * uPlot throws one clear error at createDashboard(), never a 404 later.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

import { LOCALE_GUARD_SCRIPT } from './locale-guard.js';
import { PAGE_CSS } from './page-css.js';
import { pageHtml } from './page-html.js';
import { PAGE_SCRIPT } from './page-script.js';

export interface StaticAsset {
  readonly path: string;
  readonly contentType: string;
  readonly cacheControl: string;
  readonly body: Buffer;
}

const IMMUTABLE = 'public, max-age=31536000, immutable';
const REVALIDATE = 'no-cache';

function uplotFiles(): { version: string; js: Buffer; css: Buffer } {
  const require = createRequire(import.meta.url);
  try {
    const version = (require('uplot/package.json') as { version: string }).version;
    const js = readFileSync(require.resolve('uplot/dist/uPlot.iife.min.js'));
    const css = readFileSync(require.resolve('uplot/dist/uPlot.min.css'));
    return { version, js, css };
  } catch (error) {
    throw new Error(`kvroute dashboard: cannot load the uplot package (is it installed?): ${String(error)}`, {
      cause: error,
    });
  }
}

/** Every static file of the dashboard, keyed by URL path. */
export function loadStaticAssets(): Map<string, StaticAsset> {
  const uplot = uplotFiles();
  const paths = {
    uplotJs: `/dashboard/uplot-${uplot.version}.min.js`,
    uplotCss: `/dashboard/uplot-${uplot.version}.min.css`,
    localeGuard: '/dashboard/locale.js',
    script: '/dashboard/app.js',
    css: '/dashboard/app.css',
  };
  const assets: StaticAsset[] = [
    {
      path: '/',
      contentType: 'text/html; charset=utf-8',
      cacheControl: REVALIDATE,
      body: Buffer.from(pageHtml(paths)),
    },
    { path: paths.uplotJs, contentType: 'text/javascript; charset=utf-8', cacheControl: IMMUTABLE, body: uplot.js },
    { path: paths.uplotCss, contentType: 'text/css; charset=utf-8', cacheControl: IMMUTABLE, body: uplot.css },
    {
      path: paths.localeGuard,
      contentType: 'text/javascript; charset=utf-8',
      cacheControl: REVALIDATE,
      body: Buffer.from(LOCALE_GUARD_SCRIPT),
    },
    {
      path: paths.script,
      contentType: 'text/javascript; charset=utf-8',
      cacheControl: REVALIDATE,
      body: Buffer.from(PAGE_SCRIPT),
    },
    { path: paths.css, contentType: 'text/css; charset=utf-8', cacheControl: REVALIDATE, body: Buffer.from(PAGE_CSS) },
  ];
  return new Map(assets.map((a) => [a.path, a]));
}
