/**
 * Where a backend's KV event endpoints and the tokenizers come from: YAML entries
 * ({url, kv_events, replay}), --kv-events/--kv-replay in backend order, --tokenizer; and every
 * bad value refused naming its source.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import { resolveProxyOptions } from '../src/proxy/proxy-options.js';
import { ConfigError, resolveServeConfig } from '../src/cli/serve-config.js';

const yaml = (text: string) => {
  const file = join(mkdtempSync(join(tmpdir(), 'kvroute-kv-config-')), 'kvroute.yaml');
  writeFileSync(file, text);
  return file;
};

describe('KV event endpoints in the configuration', () => {
  it('takes them from YAML entries and from --kv-events/--kv-replay in backend order', () => {
    const file = yaml(`backends:
  - url: http://10.0.0.1:8000
    kv_events: tcp://10.0.0.1:5557
    replay: tcp://10.0.0.1:5558
  - http://10.0.0.2:8000
`);
    expect(resolveServeConfig({ config: file }, {}).backends).toEqual([
      { url: 'http://10.0.0.1:8000', kvEvents: 'tcp://10.0.0.1:5557', kvReplay: 'tcp://10.0.0.1:5558' },
      { url: 'http://10.0.0.2:8000' },
    ]);
    const flags = resolveServeConfig(
      {
        backends: 'http://a:1,http://b:2,http://c:3',
        'kv-events': 'tcp://a:5557,,tcp://c:5557',
        'kv-replay': 'tcp://a:5558',
      },
      {},
    );
    expect(flags.backends).toEqual([
      { url: 'http://a:1', kvEvents: 'tcp://a:5557', kvReplay: 'tcp://a:5558' },
      { url: 'http://b:2' },
      { url: 'http://c:3', kvEvents: 'tcp://c:5557' },
    ]);
    expect(
      resolveServeConfig({}, { KVROUTE_BACKENDS: 'http://a:1', KVROUTE_KV_EVENTS: 'ipc:///tmp/a.sock' }).backends,
    ).toEqual([{ url: 'http://a:1', kvEvents: 'ipc:///tmp/a.sock' }]);
    // The options API names them in camelCase.
    expect(
      resolveProxyOptions({ backends: [{ url: 'http://a:1', kvEvents: 'tcp://a:5557', kvReplay: 'tcp://a:5558' }] })
        .backends,
    ).toEqual([{ id: 'http://a:1', models: undefined, kvEvents: 'tcp://a:5557', kvReplay: 'tcp://a:5558' }]);
  });

  it('refuses bad endpoints, more endpoints than backends, and a replay without events', () => {
    const refuse = (flags: Record<string, string>, pattern: RegExp) =>
      expect(() => resolveServeConfig(flags, {})).toThrow(pattern);
    refuse(
      { backends: 'http://a:1', 'kv-events': 'http://a:5557' },
      /--kv-events entry 1 must be a ZeroMQ endpoint, tcp:\/\/HOST:PORT/,
    );
    refuse({ backends: 'http://a:1', 'kv-events': 'tcp://a:70000' }, /port 1\.\.65535/);
    refuse({ backends: 'http://a:1', 'kv-events': 'tcp://a' }, /--kv-events entry 1 must be a ZeroMQ endpoint/);
    refuse(
      { backends: 'http://a:1', 'kv-events': 'tcp://a:1,tcp://b:1' },
      /--kv-events lists 2 endpoints for 1 backend: one per backend/,
    );
    refuse(
      { backends: 'http://a:1', 'kv-replay': 'tcp://a:5558' },
      /--kv-replay names tcp:\/\/a:5558 for http:\/\/a:1, which has no --kv-events endpoint/,
    );
    const file = yaml('backends:\n  - url: http://a:1\n    replay: tcp://a:5558\n');
    expect(() => resolveServeConfig({ config: file }, {})).toThrow(
      /backends\[0\]\.replay needs config .*backends\[0\]\.kv_events/,
    );
    const typo = yaml('backends:\n  - url: http://a:1\n    kv_event: tcp://a:5557\n');
    expect(() => resolveServeConfig({ config: typo }, {})).toThrow(
      /unknown key "kv_event"; known: url, models, kv_events, replay/,
    );
    expect(() => resolveServeConfig({ config: typo }, {})).toThrow(ConfigError);
  });
});

describe('tokenizers in the configuration', () => {
  it('takes one directory for every model, MODEL=DIR pairs, or a YAML map', () => {
    expect(resolveServeConfig({ tokenizer: 'qwen3' }, {}).tokenizers).toEqual({ '*': 'qwen3' });
    expect(resolveServeConfig({ tokenizer: 'Qwen/Qwen3-8B=/models/qwen3, *=/models/other' }, {}).tokenizers).toEqual({
      'Qwen/Qwen3-8B': '/models/qwen3',
      '*': '/models/other',
    });
    const file = yaml('tokenizer:\n  Qwen/Qwen3-8B: /models/qwen3\n');
    expect(resolveServeConfig({ config: file }, {}).tokenizers).toEqual({ 'Qwen/Qwen3-8B': '/models/qwen3' });
    expect(resolveServeConfig({}, {}).tokenizers).toBeUndefined();
  });

  it('refuses an empty value, an empty model name and a model named twice', () => {
    expect(() => resolveServeConfig({ tokenizer: ' , ' }, {})).toThrow(/--tokenizer must be a tokenizer directory/);
    expect(() => resolveServeConfig({ tokenizer: '=/x' }, {})).toThrow(/--tokenizer: an entry has an empty model name/);
    expect(() => resolveServeConfig({ tokenizer: 'm=/x,m=/y' }, {})).toThrow(
      /--tokenizer names a tokenizer for m twice/,
    );
    expect(() => resolveServeConfig({ tokenizer: 'm=' }, {})).toThrow(/the tokenizer of m must be a directory/);
  });
});
