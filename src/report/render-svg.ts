/**
 * Vega-Lite spec → static SVG, in Node: `vega-lite` compiles the spec to Vega, `vega` runs it
 * headless (`renderer: 'none'`, no canvas needed for SVG) and serialises the scene graph.
 *
 * Both packages are imported here, on the first call, so only `kvroute report` pays for them
 * (about 350 ms and 15 MB of modules); nothing else in kvroute loads this file.
 *
 * Hazard: Vega's loader could fetch a URL named in a spec. The specs carry their data inline
 * (`data.values`), and the View gets a loader that refuses every load, so rendering never
 * touches the network or the file system.
 */
import type { VegaLiteSpec } from './report-figures.js';

type Vega = typeof import('vega');
type VegaLite = typeof import('vega-lite');

let modules: Promise<[Vega, VegaLite]> | undefined;

function load(): Promise<[Vega, VegaLite]> {
  modules ??= Promise.all([import('vega'), import('vega-lite')]);
  return modules;
}

/** The SVG markup of one figure. */
export async function renderSvg(spec: VegaLiteSpec): Promise<string> {
  const [vega, vegaLite] = await load();
  const compiled = vegaLite.compile(spec as unknown as Parameters<VegaLite['compile']>[0]).spec;
  const loader = vega.loader();
  loader.load = () => Promise.reject(new Error('kvroute report: figures carry their data inline; no loads'));
  const view = new vega.View(vega.parse(compiled), { renderer: 'none', loader });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}
