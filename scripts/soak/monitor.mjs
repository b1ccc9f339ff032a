// @ts-check
/**
 * Samples the proxy process over time: VmRSS (and its anonymous, file and shared parts) from
 * /proc/PID/status, its open file descriptors and sockets from /proc/PID/fd, and from its /metrics
 * the Node.js gauges (the main thread's V8 heap in use, every thread's V8 heap in use and committed,
 * external memory, event-loop delay p99), and from /admin/state the router's native index size
 * (its instances' index bytes plus the fleet index) and its session count: memory that grows with
 * the distinct prompts seen, up to each instance's KV capacity, and is no leak.
 */
import { readFileSync, readdirSync, readlinkSync } from 'node:fs';
import { clearInterval, setInterval } from 'node:timers';

import { request } from 'undici';

import { ADMIN_TOKEN } from './fleet.mjs';

const MIB = 2 ** 20;

/** @param {number} pid */
export function procStatus(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (/** @type {string} */ key) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
  let fds = 0;
  let sockets = 0;
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    fds++;
    try {
      if (readlinkSync(`/proc/${pid}/fd/${fd}`).startsWith('socket:')) sockets++;
    } catch {
      // closed between the listing and the readlink
    }
  }
  return {
    rssMiB: kib('VmRSS') / 1024,
    rssAnonMiB: kib('RssAnon') / 1024,
    rssFileMiB: kib('RssFile') / 1024,
    rssShmemMiB: kib('RssShmem') / 1024,
    threads: Number(/^Threads:\s+(\d+)/m.exec(status)?.[1] ?? NaN),
    fds,
    sockets,
  };
}

/**
 * The proxy's /metrics as `name{labels}` → value (histogram buckets left out).
 * @param {string} base
 * @returns {Promise<Map<string, number>>}
 */
export async function scrape(base) {
  const res = await request(`${base}/metrics`, { headersTimeout: 10_000, bodyTimeout: 10_000 });
  const text = await res.body.text();
  const out = new Map();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#') || line.includes('_bucket{')) continue;
    const space = line.lastIndexOf(' ');
    out.set(line.slice(0, space), Number(line.slice(space + 1)));
  }
  return out;
}

/**
 * The sum of every series of `name` whose labels contain `labelPart` (all series when empty).
 * @param {Map<string, number>} metrics
 * @param {string} name
 * @param {string} [labelPart]
 */
export function metricSum(metrics, name, labelPart = '') {
  let sum = 0;
  for (const [key, value] of metrics) {
    const base = key.split('{')[0];
    if (base === name && key.includes(labelPart)) sum += value;
  }
  return sum;
}

/** Samples every `everyMs` until stopped; each sample is timestamped in seconds since `t0`. */
export class Monitor {
  /**
   * @param {number} pid
   * @param {string} base
   * @param {number} t0
   */
  constructor(pid, base, t0) {
    this.pid = pid;
    this.base = base;
    this.t0 = t0;
    /** @type {{ t: number, phase: string, rssMiB: number, rssAnonMiB: number, rssFileMiB: number, rssShmemMiB: number, threads: number, fds: number, sockets: number, heapMiB: number, heapsUsedMiB: number, heapsTotalMiB: number, externalMiB: number, loopP99Ms: number, indexMiB: number, indexBlocks: number, sessions: number }[]} */
    this.samples = [];
    this.phase = 'start';
    /** @type {ReturnType<typeof setInterval> | null} */
    this.timer = null;
  }

  async sample() {
    const proc = procStatus(this.pid);
    let heapMiB = NaN;
    let heapsUsedMiB = NaN;
    let heapsTotalMiB = NaN;
    let externalMiB = NaN;
    let loopP99Ms = NaN;
    try {
      const metrics = await scrape(this.base);
      heapMiB = (metrics.get('nodejs_heap_size_used_bytes') ?? NaN) / MIB;
      // Every thread's heap (kvroute_thread_heap_*_bytes, under --threads N), else the main thread's.
      const threadsUsed = metricSum(metrics, 'kvroute_thread_heap_used_bytes');
      const threadsTotal = metricSum(metrics, 'kvroute_thread_heap_total_bytes');
      heapsUsedMiB = threadsUsed > 0 ? threadsUsed / MIB : heapMiB;
      heapsTotalMiB = (threadsTotal > 0 ? threadsTotal : (metrics.get('nodejs_heap_size_total_bytes') ?? NaN)) / MIB;
      externalMiB = (metrics.get('nodejs_external_memory_bytes') ?? NaN) / MIB;
      loopP99Ms = (metrics.get('nodejs_eventloop_lag_p99_seconds') ?? NaN) * 1000;
    } catch {
      // a scrape that fails under a fault leaves the gauges out of this sample
    }
    let indexMiB = NaN;
    let indexBlocks = NaN;
    let sessions = NaN;
    try {
      const res = await request(`${this.base}/admin/state`, {
        headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
        headersTimeout: 10_000,
        bodyTimeout: 10_000,
      });
      const router = /** @type {any} */ (await res.body.json()).router;
      const instances = /** @type {{ bytes: number | null, blocks: number }[]} */ (router.instances);
      indexMiB = (instances.reduce((sum, i) => sum + (i.bytes ?? 0), 0) + (router.fleetBytes ?? 0)) / MIB;
      indexBlocks = instances.reduce((sum, i) => sum + i.blocks, 0);
      sessions = router.sessions;
    } catch {
      // as above
    }
    const sample = {
      t: (Date.now() - this.t0) / 1000,
      phase: this.phase,
      ...proc,
      heapMiB,
      heapsUsedMiB,
      heapsTotalMiB,
      externalMiB,
      loopP99Ms,
      indexMiB,
      indexBlocks,
      sessions,
    };
    this.samples.push(sample);
    return sample;
  }

  /** @param {number} everyMs */
  start(everyMs) {
    this.timer = setInterval(() => void this.sample().catch(() => undefined), everyMs);
  }

  stop() {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }
}
