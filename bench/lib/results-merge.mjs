// @ts-check
/**
 * bench/RESULTS.md rewritten by `--update-results` without losing what is on disk: a run refreshes
 * only what it measured, and text written by hand stays.
 *
 * The file is a preamble, then `## ` sections; the Targets section holds one entry per target (a
 * `  STATUS  name: figure` line and its indented continuation lines), known by its name (the text
 * before the first colon) and its place among the entries of that name. The merge:
 * - a section or target entry this run measured (its heading or name is one the run's own results
 *   render) is the fresh one, followed by whatever its disk version holds from a KEEP_MARKER line
 *   on (hand-written rows and notes go there);
 * - any other section or entry on disk is kept as it is, in its place, even one no result renders
 *   (hand-written sections, workloads whose results live only in the file);
 * - a fresh section or entry the file lacks is put after the one before it in the render (at the
 *   start when none is);
 * - the preamble (the machine, the dates) is always the fresh one, followed by its disk version
 *   from KEEP_MARKER on.
 */

/** Everything from this line to the section's end survives a refresh of its section. */
export const KEEP_MARKER = '<!-- kept by --update-results: written by hand -->';

const TARGET_ENTRY = /^ {2}(\S+) {2}([^:]+)/;

/**
 * @typedef {{ key: string, lines: string[] }} Part
 */

/**
 * The preamble's lines and the `## ` sections, each keyed by its heading line.
 * @param {string} text
 * @returns {{ preamble: string[], sections: Part[] }}
 */
function splitSections(text) {
  /** @type {string[]} */
  const preamble = [];
  /** @type {Part[]} */
  const sections = [];
  for (const line of text === '' ? [] : text.split('\n')) {
    if (line.startsWith('## ')) sections.push({ key: line, lines: [line] });
    else (sections.at(-1)?.lines ?? preamble).push(line);
  }
  return { preamble, sections };
}

/**
 * A Targets section's lines before its first entry, its entries keyed by target name, and the lines
 * after its last entry (the code fence's end and anything below it).
 * @param {string[]} lines
 */
function splitTargets(lines) {
  const first = lines.findIndex((l) => TARGET_ENTRY.test(l));
  if (first < 0) return { head: lines, entries: /** @type {Part[]} */ ([]), tail: /** @type {string[]} */ ([]) };
  let end = first;
  /** @type {Part[]} */
  const entries = [];
  /** How many entries of each name so far: several share one (a target's time and its peak RSS). */
  const seen = new Map();
  for (let i = first; i < lines.length; i++) {
    const line = /** @type {string} */ (lines[i]);
    const entry = TARGET_ENTRY.exec(line);
    if (entry !== null) {
      const name = /** @type {string} */ (entry[2]).trim();
      const nth = seen.get(name) ?? 0;
      seen.set(name, nth + 1);
      entries.push({ key: `${name} #${nth}`, lines: [line] });
    } else if (line.startsWith('    ') && entries.length > 0) entries.at(-1)?.lines.push(line);
    else break;
    end = i + 1;
  }
  return { head: lines.slice(0, first), entries, tail: lines.slice(end) };
}

/** The lines of `lines` from KEEP_MARKER on; none without one. @param {string[]} lines */
function kept(lines) {
  const at = lines.indexOf(KEEP_MARKER);
  return at < 0 ? [] : lines.slice(at);
}

/** `lines` without trailing empty lines. @param {string[]} lines */
function trimEnd(lines) {
  let end = lines.length;
  while (end > 0 && lines[end - 1] === '') end--;
  return lines.slice(0, end);
}

/**
 * Fresh lines followed by the disk version's kept lines (and one empty line when there are any).
 * @param {string[]} fresh
 * @param {string[]} disk
 */
function refreshed(fresh, disk) {
  const tail = kept(disk);
  return tail.length === 0 ? fresh : [...trimEnd(fresh), '', ...trimEnd(tail), ''];
}

/**
 * Disk's parts in order, those in `measured` replaced by `replace(fresh, disk)`, and fresh parts
 * disk lacks put after the fresh part before them.
 * @param {Part[]} disk
 * @param {Part[]} fresh
 * @param {ReadonlySet<string>} measured
 * @param {(fresh: Part, disk: Part) => string[]} replace
 * @returns {Part[]}
 */
function mergeParts(disk, fresh, measured, replace) {
  const freshByKey = new Map(fresh.map((p) => [p.key, p]));
  const out = disk.map((d) => {
    const f = freshByKey.get(d.key);
    return f !== undefined && measured.has(d.key) ? { key: d.key, lines: replace(f, d) } : d;
  });
  const onDisk = new Set(disk.map((d) => d.key));
  fresh.forEach((f, i) => {
    if (onDisk.has(f.key)) return;
    const before = fresh[i - 1];
    // After the fresh part before it (placed by now: disk's or inserted earlier), else at the start.
    const at = before === undefined ? 0 : out.findIndex((p) => p.key === before.key) + 1;
    out.splice(at, 0, f);
  });
  return out;
}

/**
 * The file to write: `rendered` (the whole file as this run's merged results render it) merged with
 * `onDisk` (the file as it is; '' when there is none). `measuredRender` is the render of this run's
 * own results alone: its headings and target names are what this run refreshes.
 * @param {string} rendered
 * @param {string} onDisk
 * @param {string} measuredRender
 */
export function mergeResults(rendered, onDisk, measuredRender) {
  if (onDisk === '') return rendered;
  const fresh = splitSections(rendered);
  const disk = splitSections(onDisk);
  const measured = splitSections(measuredRender);
  const measuredKeys = new Set(measured.sections.map((s) => s.key));
  const targetsOf = (/** @type {Part[]} */ parts) =>
    splitTargets(parts.find((s) => s.key === '## Targets')?.lines ?? []).entries;
  const measuredTargets = new Set(targetsOf(measured.sections).map((e) => e.key));

  const sections = mergeParts(disk.sections, fresh.sections, measuredKeys, (f, d) => {
    if (f.key !== '## Targets') return refreshed(f.lines, d.lines);
    // Targets: entry by entry, the fence and the text around the entries kept from disk.
    const onDiskTargets = splitTargets(d.lines);
    const entries = mergeParts(onDiskTargets.entries, splitTargets(f.lines).entries, measuredTargets, (fe) => fe.lines);
    return [...onDiskTargets.head, ...entries.flatMap((e) => e.lines), ...onDiskTargets.tail];
  });
  return [...refreshed(fresh.preamble, disk.preamble), ...sections.flatMap((s) => s.lines)].join('\n');
}
