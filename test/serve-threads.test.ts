/**
 * `kvroute serve --threads 2` (docs/scale-out.md): two event loops on one port share one routing
 * core and present one process. Checked end to end on the embedded simulated fleet: connections
 * land on both threads; one session's turns go to one engine whichever thread takes them; /metrics
 * counts every thread's requests once; the dashboard's tenants panel counts every thread's flow
 * decisions and sums a limited tenant's buckets over both threads; the admin API and the request
 * log answer from any thread;
 * SIGTERM stops every thread and the process exits 0. And the flag's bad values are refused.
 */
import { request as httpRequest } from 'node:http';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { DashboardFrame } from '../src/proxy/observe/dashboard/dashboard-frame.js';
import { serveFailure, startServe, type ServeChild } from './helpers/proxy-serve-child.js';
import { waitFor } from './helpers/wait-for.js';

const TOKEN = 'threads-test-admin-token';

/** One request on a fresh connection (no keep-alive), so the kernel picks a thread for each. */
function call(
  base: string,
  path: string,
  options: { method?: string; body?: unknown; headers?: Record<string, string> } = {},
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
  return new Promise((resolve, reject) => {
    const payload = options.body === undefined ? undefined : JSON.stringify(options.body);
    const req = httpRequest(
      `${base}${path}`,
      {
        method: options.method ?? (payload === undefined ? 'GET' : 'POST'),
        agent: false,
        headers: {
          connection: 'close',
          ...(payload === undefined ? {} : { 'content-type': 'application/json' }),
          ...options.headers,
        },
      },
      (res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
      },
    );
    req.on('error', reject);
    req.setTimeout(10_000, () => req.destroy(new Error(`${path} timed out`)));
    req.end(payload);
  });
}

const metricValues = (text: string, name: string): Map<string, number> => {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const at = line.lastIndexOf(' ');
    out.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return out;
};
const sum = (values: Map<string, number>) => [...values.values()].reduce((a, b) => a + b, 0);

describe('kvroute serve --threads 2', () => {
  let serve: ServeChild;
  let model: string;
  const dir = mkdtempSync(join(tmpdir(), 'kvroute-threads-'));
  const log = join(dir, 'access.jsonl');
  const flow = join(dir, 'flow.json');
  // 60 a minute for the process: each thread's bucket holds 30.
  writeFileSync(flow, JSON.stringify({ tenants: { metered: { rpm: 60 } } }));

  beforeAll(async () => {
    // sticky: a session's pin lives in the one shared pin table, whichever thread reads it.
    serve = await startServe([
      '--threads',
      '2',
      '--port',
      '0',
      '--policy',
      'sticky',
      '--admin-token',
      TOKEN,
      '--access-log',
      log,
      '--flow',
      flow,
    ]);
    model = (JSON.parse((await call(serve.base, '/v1/models')).body) as { data: Array<{ id: string }> }).data[0]!.id;
  }, 30_000);
  afterAll(async () => {
    await serve?.stop();
  });

  it('spreads connections over both threads, keeps a session on one engine and counts each request once', async () => {
    const N = 48;
    const instances = new Map<string, Set<string>>();
    const histories = new Map<string, Array<{ role: string; content: string }>>();
    for (let k = 0; k < N; k++) {
      const session = `session-${k % 4}`;
      const messages = histories.get(session) ?? [{ role: 'system', content: `You are the agent of ${session}.` }];
      messages.push({ role: 'user', content: `turn ${k}` });
      histories.set(session, messages);
      const res = await call(serve.base, '/v1/chat/completions', {
        body: { model, messages, max_tokens: 2 },
        headers: { 'x-session-id': session },
      });
      expect(res.status, res.body).toBe(200);
      const seen = instances.get(session) ?? new Set<string>();
      seen.add(String(res.headers['x-kvroute-instance']));
      instances.set(session, seen);
    }
    for (const [session, seen] of instances) expect(seen.size, `${session} went to ${[...seen]}`).toBe(1);
    // The other thread's observer batches reach the main thread a little later: wait until
    // /metrics and the access log hold every request (then check that they hold no more).
    let seen = { threads: 0, requests: 0, logLines: 0 };
    const metrics = await waitFor(
      `/metrics and the access log to count all ${N} requests`,
      async () => {
        const text = (await call(serve.base, '/metrics')).body;
        seen = {
          threads: sum(metricValues(text, 'kvroute_thread_requests_total')),
          requests: sum(metricValues(text, 'kvroute_requests_total')),
          logLines: readFileSync(log, 'utf8').split('\n').length - 1,
        };
        return seen.threads >= N && seen.requests >= N && seen.logLines >= N && text;
      },
      { detail: () => seen },
    );
    const perThread = metricValues(metrics, 'kvroute_thread_requests_total');
    expect(perThread.get('kvroute_thread_requests_total{thread="0"}')).toBeGreaterThan(0);
    expect(perThread.get('kvroute_thread_requests_total{thread="1"}')).toBeGreaterThan(0);
    expect(sum(perThread)).toBe(N);
    expect(sum(metricValues(metrics, 'kvroute_requests_total'))).toBe(N);
    expect(sum(metricValues(metrics, 'kvroute_router_lock_calls_total'))).toBeGreaterThan(N);
    expect(metrics).toContain('kvroute_router_lock_waits_total');
    // Each thread's V8 heap: the main thread's read at the scrape, the other's from its reports.
    const used = metricValues(metrics, 'kvroute_thread_heap_used_bytes');
    const committed = metricValues(metrics, 'kvroute_thread_heap_total_bytes');
    for (const thread of ['0', '1']) {
      const inUse = used.get(`kvroute_thread_heap_used_bytes{thread="${thread}"}`) ?? 0;
      expect(inUse, `thread ${thread}'s heap in use`).toBeGreaterThan(1e6);
      expect(committed.get(`kvroute_thread_heap_total_bytes{thread="${thread}"}`)).toBeGreaterThanOrEqual(inUse);
    }
    // Each thread learns costs from its own requests; /metrics shows the main thread's learner
    // (docs/proxy.md "Learned costs"): its first tokens are one thread's requests.
    const observed = [...metricValues(metrics, 'kvroute_instance_cost_observations')]
      .filter(([key]) => key.includes('kind="ttft"'))
      .reduce((n, [, v]) => n + v, 0);
    expect([...perThread.values()]).toContain(observed);
    const lines = readFileSync(log, 'utf8').trim().split('\n');
    expect(lines).toHaveLength(N);
  });

  it('shows every thread’s flow decisions in the tenants panel, and a tenant’s buckets summed over threads', async () => {
    const tenants = ['acme', 'metered', 'acme', 'acme', 'metered', 'acme', 'metered', 'acme', 'metered', 'acme'];
    for (const [k, tenant] of tenants.entries()) {
      const res = await call(serve.base, '/v1/chat/completions', {
        body: { model, messages: [{ role: 'user', content: `tenant turn ${k}` }], max_tokens: 2 },
        headers: { 'x-kvroute-tenant': tenant },
      });
      expect(res.status, res.body).toBe(200);
    }
    let frame: DashboardFrame | undefined;
    const admitted = (tenant: string) =>
      frame?.tenants.rows.find((r) => r.tenant === tenant && r.priority === 'normal')?.outcomes.admitted;
    await waitFor(
      'the tenants panel to count both tenants’ requests',
      async () => {
        frame = JSON.parse((await call(serve.base, '/dashboard/frame')).body) as DashboardFrame;
        return admitted('acme') === 6 && admitted('metered') === 4;
      },
      { detail: () => frame?.tenants.rows },
    );
    const metered = frame!.tenants.rows.find((r) => r.tenant === 'metered')!;
    expect(frame!.tenants.enabled).toBe(true);
    expect(metered.limits).toMatchObject({ rpm: 60, tpm: null });
    // The main thread's bucket alone holds at most 30: more means the other thread's is added.
    expect(metered.limits!.rpmRemaining).toBeGreaterThan(50);
    expect(metered.limits!.rpmRemaining).toBeLessThan(60);
  });

  it('answers the admin API and /ready alike from every thread', async () => {
    for (let k = 0; k < 8; k++) {
      const admin = await call(serve.base, '/admin/instances', { headers: { authorization: `Bearer ${TOKEN}` } });
      expect(admin.status, admin.body).toBe(200);
      expect((JSON.parse(admin.body) as { instances: unknown[] }).instances).toHaveLength(4);
      const ready = await call(serve.base, '/ready');
      expect(JSON.parse(ready.body)).toMatchObject({ ready: true, routable_backends: 4 });
      expect((await call(serve.base, '/admin/instances')).status).toBe(401);
    }
  });

  it('stops every thread on SIGTERM and exits 0', async () => {
    expect(await serve.stop()).toBe(0);
    expect(serve.stderr()).toContain('2 threads sharing one routing core');
  });
});

describe('--threads refuses bad values, naming the flag', () => {
  for (const bad of ['0', 'two', '1000'])
    it(`--threads ${bad}`, async () => {
      const { code, stderr } = await serveFailure(['--threads', bad, '--backends', 'http://127.0.0.1:9']);
      expect(code).toBe(2);
      expect(stderr).toMatch(/--threads must be an integer from 1 to 256, or auto/);
    });
});
