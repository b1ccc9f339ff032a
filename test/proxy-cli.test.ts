/**
 * `kvroute serve`: configuration layers (flags > environment > YAML file > defaults), errors that
 * name the flag, variable or key, and the command itself end to end: the embedded default (4
 * simulated engines) answers a request and SIGTERM exits 0; real --backends are proxied.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, describe, expect, it } from 'vitest';

import { ConfigError, resolveServeConfig } from '../src/cli/serve-config.js';
import { MODEL, post, refusingUrl, startStub } from './helpers/proxy-harness.js';
import { CLI, serveFailure, startServe } from './helpers/proxy-serve-child.js';

const dir = mkdtempSync(join(tmpdir(), 'kvroute-serve-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const file = (name: string, text: string): string => {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
};

describe('serve configuration', () => {
  it('defaults: no backends, 127.0.0.1:8000, min_ttft', () => {
    const c = resolveServeConfig({}, {});
    expect(c).toMatchObject({ backends: [], port: 8000, host: '127.0.0.1', proxy: { policy: 'min_ttft' } });
  });

  it('takes a tuned policy setting as NAME:KEY=VALUE… or, in the file, as { name, … }', () => {
    expect(resolveServeConfig({ policy: 'min_ttft:batchWeight=0.3:kvWeight=8' }, {}).proxy.policy).toEqual({
      name: 'min_ttft',
      batchWeight: 0.3,
      kvWeight: 8,
    });
    const config = file('tuned.yaml', 'policy: {name: unified, overloadFactor: 1.5}\n');
    expect(resolveServeConfig({ config }, {}).proxy.policy).toEqual({ name: 'unified', overloadFactor: 1.5 });
  });

  it('flags beat environment variables, which beat the file', () => {
    const config = file(
      'layers.yaml',
      [
        'backends: [http://a:1, {url: "http://b:2/", models: [A, B]}]',
        'port: 9000',
        'policy: sticky',
        'retries: 5',
        'max-body: 1MiB',
        'strip-extensions: true',
        'engine-state: shm:feed',
        'first-byte-timeout: 1234',
        'offload-prefill-timeout: 2500',
      ].join('\n'),
    );
    const fromFile = resolveServeConfig({ config }, {});
    expect(fromFile.backends).toEqual([{ url: 'http://a:1' }, { url: 'http://b:2', models: ['A', 'B'] }]);
    expect(fromFile.port).toBe(9000);
    expect(fromFile.proxy).toMatchObject({
      policy: 'sticky',
      retries: 5,
      maxBodyBytes: 2 ** 20,
      stripExtensions: true,
      engineState: { shm: 'feed' },
      firstByteTimeoutMs: 1234,
      offloadPrefillTimeoutMs: 2500,
    });
    const env = {
      KVROUTE_CONFIG: config,
      KVROUTE_PORT: '9100',
      KVROUTE_RETRIES: '0',
      KVROUTE_STRIP_EXTENSIONS: 'no',
      KVROUTE_OFFLOAD_PREFILL_TIMEOUT: '0',
    };
    const fromEnv = resolveServeConfig({}, env);
    expect(fromEnv.port).toBe(9100);
    expect(fromEnv.proxy).toMatchObject({ policy: 'sticky', retries: 0, stripExtensions: false });
    expect(fromEnv.proxy.offloadPrefillTimeoutMs).toBe(0);
    const fromFlags = resolveServeConfig(
      { port: '9200', backends: 'http://c:3,http://d:4', 'offload-prefill-timeout': '900' },
      env,
    );
    expect(fromFlags.port).toBe(9200);
    expect(fromFlags.backends).toEqual([{ url: 'http://c:3' }, { url: 'http://d:4' }]);
    expect(fromFlags.proxy.retries).toBe(0);
    expect(fromFlags.proxy.offloadPrefillTimeoutMs).toBe(900);
    expect(resolveServeConfig({}, {}).proxy.offloadPrefillTimeoutMs).toBeUndefined(); // createProxy's 60,000
    expect(
      resolveServeConfig({ discover: 'dns:engines:8000', 'discover-dns-server': '10.0.0.10:53' }, {}).proxy.discovery,
    ).toEqual({ spec: 'dns:engines:8000', servers: ['10.0.0.10:53'] });
    expect(resolveServeConfig({}, { KVROUTE_DISCOVER: 'dns-srv:_http._tcp.e' }).backends).toEqual([]);
    // Agent session headers: a list from a flag, a variable or YAML; none: an empty list.
    expect(resolveServeConfig({ 'agent-session-headers': 'X-A, x-b' }, {}).proxy.agentSessionHeaders).toEqual([
      'x-a',
      'x-b',
    ]);
    expect(resolveServeConfig({}, { KVROUTE_AGENT_SESSION_HEADERS: 'none' }).proxy.agentSessionHeaders).toEqual([]);
    const agents = file('agents.yaml', 'agent-session-headers: [x-claude-code-session-id]\n');
    expect(resolveServeConfig({ config: agents }, {}).proxy.agentSessionHeaders).toEqual(['x-claude-code-session-id']);
    expect(resolveServeConfig({}, {}).proxy.agentSessionHeaders).toBeUndefined(); // createProxy's default list
  });

  it('every bad value names its flag, variable or key, and the reason', () => {
    const bad = (flags: Record<string, string | boolean>, env: NodeJS.ProcessEnv, pattern: RegExp): void => {
      expect(() => resolveServeConfig(flags, env)).toThrow(ConfigError);
      expect(() => resolveServeConfig(flags, env)).toThrow(pattern);
    };
    bad({ port: 'eighty' }, {}, /^--port must be a TCP port/);
    bad({ port: '70000' }, {}, /^--port must be a TCP port/);
    bad({}, { KVROUTE_RETRIES: '-1' }, /^KVROUTE_RETRIES must be an integer ≥ 0/);
    bad({ 'max-body': '0' }, {}, /^--max-body must be a size/);
    bad({ 'max-body': '12 parsecs' }, {}, /^--max-body must be a size/);
    bad({ policy: 'fastest' }, {}, /^--policy must be one of .*unified/);
    bad({ policy: 'min_ttft:overloadFactor=2' }, {}, /^--policy must be a tunable min_ttft reads/);
    bad({}, { KVROUTE_POLICY: 'min_ttft:kvWeight=-1' }, /^KVROUTE_POLICY\.kvWeight must be a number in \[0, 1000\]/);
    bad(
      { config: file('spec.yaml', 'policy: {name: min_ttft, tieTolerance: 2}\n') },
      {},
      /spec\.yaml: policy\.tieTolerance must be a number in \[0, 1\]/,
    );
    bad({ backends: 'ftp://x' }, {}, /^--backends must be an http/);
    bad({ backends: 'http://a:1,http://a:1/' }, {}, /--backends lists the same backend twice/);
    bad(
      { config: file('models.yaml', 'backends: [{url: "http://a:1", models: A}]\n') },
      {},
      /^config .*models\.yaml: backends\[0\]\.models must be a list of model names, got "A"/,
    );
    bad(
      { config: file('modelkey.yaml', 'backends: [{url: "http://a:1", model: [A]}]\n') },
      {},
      /backends\[0\] has an unknown key "model"; known: url, models/,
    );
    bad({ http: 'h2' }, {}, /^--http must be uws or node/);
    bad({ 'health-failures': '0' }, {}, /^--health-failures must be an integer ≥ 1/);
    bad({}, { KVROUTE_BACKEND_API_KEY: 'has space' }, /^KVROUTE_BACKEND_API_KEY must be a key without spaces/);
    bad({ 'max-body-memory': 'lots' }, {}, /^--max-body-memory must be a size/);
    bad({ 'engine-state': 'redis' }, {}, /^--engine-state must be shadow or shm:NAME/);
    bad({ 'session-header': 'bad header' }, {}, /^--session-header must be an HTTP header name/);
    bad(
      { 'agent-session-headers': 'x-a,bad header' },
      {},
      /^--agent-session-headers must be HTTP header names .*"bad header"/,
    );
    bad({}, { KVROUTE_STRIP_EXTENSIONS: 'maybe' }, /^KVROUTE_STRIP_EXTENSIONS must be true or false/);
    bad({ 'connect-timeout': '0' }, {}, /^--connect-timeout must be an integer ≥ 1 \(milliseconds\)/);
    bad({ 'offload-prefill-timeout': '-5' }, {}, /^--offload-prefill-timeout must be an integer ≥ 0 \(milliseconds\)/);
    bad({ config: join(dir, 'absent.yaml') }, {}, /cannot read config .*absent\.yaml: ENOENT/);
    bad({ config: file('typo.yaml', 'prot: 80\n') }, {}, /unknown key "prot"/);
    bad({ config: file('badval.yaml', 'retries: lots\n') }, {}, /^config .*badval\.yaml: retries must be an integer/);
    bad({ config: file('broken.yaml', 'port: [1,\n') }, {}, /is not valid YAML/);
    bad({ config: file('list.yaml', '- 1\n- 2\n') }, {}, /must be a mapping/);
  });
});

describe('kvroute serve', () => {
  it("prints the proxy's warnings as its own lines, without Node's warning boilerplate", async () => {
    const serve = await startServe(['--port', '0', '--backends', await refusingUrl()]);
    try {
      const deadline = Date.now() + 10_000;
      const started = () => serve.stderr().includes('health probe') && serve.stderr().includes('admin API');
      while (!started() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      expect(serve.stderr()).toMatch(/^kvroute serve: warning: backend \S+ failed its first health probe/m);
      expect(serve.stderr()).not.toMatch(/\(node:\d+\)|Warning:|--trace-warnings/);
    } finally {
      await serve.stop(); // its exit code is another test's concern
    }
  });

  it('with no backends: the embedded default answers, prints its examples, and SIGTERM exits 0', async () => {
    const serve = await startServe(['--port', '0']);
    try {
      expect(serve.stdout()).toMatch(/^kvroute serve: listening on http:\/\/127\.0\.0\.1:\d+\n$/);
      const response = await post(serve.base, '/v1/chat/completions', {
        model: MODEL,
        messages: [{ role: 'user', content: 'Hello!' }],
        max_tokens: 2,
      });
      expect(response.status).toBe(200);
      expect(((await response.json()) as { usage: { completion_tokens: number } }).usage.completion_tokens).toBe(2);
      expect(response.headers.get('x-kvroute-instance')).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(serve.stderr()).toMatch(/embedded default: 4 simulated vLLM engines/);
      expect(serve.stderr()).toContain(`curl -s ${serve.base}/v1/chat/completions`);
      expect(serve.stderr()).toContain(`baseURL: '${serve.base}/v1'`);
    } finally {
      expect(await serve.stop()).toBe(0);
    }
  });

  it('proxies to --backends given in the environment', async () => {
    const upstream = await startStub((_req, res) =>
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}'),
    );
    const serve = await startServe(['--port', '0', '--policy', 'round_robin'], { KVROUTE_BACKENDS: upstream.url });
    try {
      const response = await post(serve.base, '/v1/completions', { model: MODEL, prompt: 'p' });
      expect(response.status).toBe(200);
      expect(response.headers.get('x-kvroute-instance')).toBe(upstream.url);
      expect(response.headers.get('x-kvroute-reason')).toBe('round_robin');
      expect(upstream.requests).toHaveLength(1);
    } finally {
      expect(await serve.stop()).toBe(0);
      await upstream.close();
    }
  });

  it('--help prints every flag and exits 0', () => {
    const help = spawnSync(process.execPath, [CLI, 'serve', '--help'], { encoding: 'utf8' });
    expect(help.status).toBe(0);
    for (const flag of [
      '--backends',
      '--http',
      '--health-interval',
      '--max-body-memory',
      '--request-timeout',
      '--offload-prefill-timeout',
    ])
      expect(help.stdout).toContain(flag);
  });

  it('a bad value is a usage error: exit 2, the flag named', async () => {
    const { code, stderr } = await serveFailure(['--port', 'x']);
    expect(code).toBe(2);
    expect(stderr).toMatch(/^kvroute serve: --port must be a TCP port/);
    const env = await serveFailure([], { KVROUTE_IDLE_TIMEOUT: 'soon' });
    expect(env.code).toBe(2);
    expect(env.stderr).toMatch(/KVROUTE_IDLE_TIMEOUT must be an integer/);
    const unknown = await serveFailure(['--bogus']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/--bogus/);
    const events = await serveFailure(['--backends', 'http://127.0.0.1:9', '--kv-events', 'http://127.0.0.1:5557']);
    expect(events.code).toBe(2);
    expect(events.stderr).toMatch(/--kv-events entry 1 must be a ZeroMQ endpoint/);
  });

  it('a tokenizer that fails to load is a startup error naming the file: exit 2', async () => {
    const { code, stderr } = await serveFailure([
      '--backends',
      'http://127.0.0.1:9',
      '--health-interval',
      '0',
      '--tokenizer',
      '/nonexistent/tok',
    ]);
    expect(code).toBe(2);
    expect(stderr).toMatch(/kvroute serve: \/nonexistent\/tok\/tokenizer\.json: missing/);
  });
});
