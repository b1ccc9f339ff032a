/**
 * The event plane's parts without NATS: engine subject tokens (reversible for any URL), NATS
 * event sources, the relay's seq rules on an engine's messages (what it publishes, and where it
 * puts reset markers), and every bad flag of `kvroute events relay` and of serve's `events`.
 */
import { spawnSync } from 'node:child_process';
import { join, resolve } from 'node:path';

import { describe, expect, it } from 'vitest';

import { resolveServeConfig } from '../src/cli/serve-config.js';
import { parseDuration, parseSize, relayedEngines } from '../src/cli/events-relay-verb.js';
import { EngineRelay, type EventPublisher } from '../src/events/nats/engine-relay.js';
import { engineFromToken, engineToken, eventSubject } from '../src/events/nats/event-subjects.js';
import { parseNatsEventSource } from '../src/events/nats/nats-event-source.js';
import { streamCreateRaceAffected } from '../src/events/nats/stream-ready.js';
import { Rng } from './helpers/random.js';

const CLI = join(resolve(import.meta.dirname, '..'), 'dist/cli.js');

describe('engine subject tokens', () => {
  it('are NATS tokens and decode back to the engine, for random strings', () => {
    const rng = new Rng(7);
    const alphabet = 'aZ09-_.:/?#%é ☃*>';
    for (let k = 0; k < 500; k++) {
      const engine = Array.from({ length: rng.int(1, 30) }, () => alphabet[rng.int(0, alphabet.length - 1)]).join('');
      const token = engineToken(engine);
      expect(token).toMatch(/^[A-Za-z0-9_-]+$/);
      expect(engineFromToken(token)).toBe(engine);
    }
    expect(eventSubject('prod', 'http://10.0.0.5:8000')).toBe('kvroute.prod.events.http_3A_2F_2F10_2E0_2E0_2E5_3A8000');
    expect(engineFromToken('bad_ZZ')).toBeUndefined();
  });
});

describe('nats-server versions that exit on a stream read mid-creation', () => {
  it('are those before 2.9.15, and an unknown version counts as one', () => {
    for (const v of ['2.9.10', 'v2.9.14', '2.8.4', '1.4.1', '2.9.14-beta.1', '', 'nats', undefined])
      expect(streamCreateRaceAffected(v), String(v)).toBe(true);
    for (const v of ['2.9.15', '2.9.25', 'v2.10.0', '2.10.22-RC.1', '2.11.0', '3.0.0'])
      expect(streamCreateRaceAffected(v), v).toBe(false);
  });
});

describe('NATS event sources', () => {
  it('read the server and the fleet, defaulting the fleet', () => {
    expect(parseNatsEventSource('nats://127.0.0.1:4222', 'f')).toEqual({ server: 'nats://127.0.0.1:4222', fleet: 'f' });
    expect(parseNatsEventSource('nats://n1:4222/prod', 'f')).toEqual({ server: 'nats://n1:4222', fleet: 'prod' });
    for (const bad of ['tcp://h:1', 'nats://h', 'nats://h:1/a.b', 'nats://u:p@h:1', 'nats://h:1?x=1', 42])
      expect(parseNatsEventSource(bad, 'f')).toBeUndefined();
  });
});

/** A publisher that records what the relay published. */
function recorder(): EventPublisher & { log: string[] } {
  const log: string[] = [];
  return {
    log,
    publish: (_subject, _engine, message) =>
      void log.push('reset' in message ? `reset:${message.reset}` : `${message.seq}`),
    ready: () => undefined,
  };
}

const frames = (seq: number, payload = `p${seq}`): Uint8Array[] => {
  const s = Buffer.alloc(8);
  s.writeBigInt64BE(BigInt(seq));
  return [Buffer.alloc(0), s, Buffer.from(payload)];
};

function relayWith(lastPublished = -1n): { relay: EngineRelay; log: string[] } {
  const publisher = recorder();
  const relay = new EngineRelay({
    engine: 'http://e:1',
    subject: 's',
    endpoint: 'tcp://127.0.0.1:1',
    lastPublished,
    publisher,
    log: () => {},
  });
  return { relay, log: publisher.log };
}

describe("the relay's seq rules (no replay socket)", () => {
  it('publishes in order, skips stale, marks restarts and gaps', () => {
    const { relay, log } = relayWith();
    for (const seq of [0, 1, 2, 2, 1, 0, 1, 5, 6]) relay.take(frames(seq));
    expect(log).toEqual(['0', '1', '2', 'reset:engine-restart', '0', '1', 'reset:gap', '5', '6']);
    relay.take([Buffer.alloc(0)]);
    relay.take([Buffer.alloc(0), Buffer.alloc(4), Buffer.alloc(1)]);
    expect(relay.stats()).toMatchObject({ malformed: 2, stale: 2, resets: 2, published: 7 });
  });

  it('resumes from the stream: the next seq is published as is, a lower first one is a restart', () => {
    const resumed = relayWith(41n);
    resumed.relay.take(frames(42));
    expect(resumed.log).toEqual(['42']);
    const restarted = relayWith(41n);
    restarted.relay.take(frames(7));
    expect(restarted.log).toEqual(['reset:engine-restart', '7']);
  });

  it('a failed publish makes the next message a reset marker', () => {
    const { relay, log } = relayWith();
    relay.take(frames(0));
    relay.publishFailed();
    relay.take(frames(1));
    relay.take(frames(2));
    expect(log).toEqual(['0', 'reset:publish-failed', '1', '2']);
  });
});

describe('bad relay flags', () => {
  const engines = (values: Record<string, string>) => () => relayedEngines(values);
  it('names the flag and the reason', () => {
    expect(engines({ 'kv-events': 'tcp://h:1' })).toThrow(/--backends is required/);
    expect(engines({ backends: 'http://a:1' })).toThrow(/--kv-events is required/);
    expect(engines({ backends: 'http://a:1,http://b:1', 'kv-events': 'tcp://h:1' })).toThrow(
      /--kv-events lists 1 endpoints for 2 backends/,
    );
    expect(engines({ backends: 'ftp://a', 'kv-events': 'tcp://h:1' })).toThrow(/--backends entry 1 must be an http/);
    expect(engines({ backends: 'http://a:1', 'kv-events': 'nats://h:1' })).toThrow(
      /--kv-events entry 1 must be a ZeroMQ/,
    );
    expect(engines({ backends: 'http://a:1', 'kv-events': 'tcp://h:1', 'kv-replay': 'tcp://h' })).toThrow(
      /--kv-replay entry 1 must be a ZeroMQ/,
    );
    expect(engines({ backends: 'http://a:1,http://a:1/', 'kv-events': 'tcp://h:1,tcp://h:2' })).toThrow(/twice/);
    expect(relayedEngines({ backends: 'http://a:1/', 'kv-events': 'tcp://h:1', 'kv-replay': '' })).toEqual([
      { engine: 'http://a:1', endpoint: 'tcp://h:1' },
    ]);
    expect(parseDuration('15m', 'max-age')).toBe(900_000);
    expect(() => parseDuration('10', 'max-age')).toThrow(/--max-age must be a duration of at least 1 s/);
    expect(() => parseDuration('1 week', 'max-age')).toThrow(/--max-age/);
    expect(parseSize('512MiB', 'max-bytes')).toBe(512 * 2 ** 20);
    expect(() => parseSize('12', 'max-bytes')).toThrow(/--max-bytes must be a size of at least 64KiB/);
    expect(() => parseSize('1 parsec', 'max-bytes')).toThrow(/--max-bytes/);
  });

  it('exits 2 with the reason from the command line', () => {
    const run = (...args: string[]) =>
      spawnSync(process.execPath, [CLI, 'events', 'relay', ...args], { encoding: 'utf8' });
    const missing = run('--backends', 'http://a:1', '--kv-events', 'tcp://h:1');
    expect(missing.status).toBe(2);
    expect(missing.stderr).toMatch(/--nats is required/);
    const bad = run('--nats', 'http://h:1', '--backends', 'http://a:1', '--kv-events', 'tcp://h:1');
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/--nats must be nats:\/\/HOST:PORT/);
  });
});

describe("serve's events setting", () => {
  it('feeds every backend without its own kv_events from NATS, with the cluster fleet', () => {
    const config = resolveServeConfig(
      {
        backends: 'http://a:1,http://b:1',
        'kv-events': ',tcp://h:5557',
        events: 'nats://n:4222',
        cluster: 'nats://n:4222',
      },
      {},
    );
    expect(config.backends.map((b) => b.kvEvents)).toEqual(['nats://n:4222/default', 'tcp://h:5557']);
    const named = resolveServeConfig({ backends: 'http://a:1', events: 'nats://n:4222/prod' }, {});
    expect(named.backends[0]!.kvEvents).toBe('nats://n:4222/prod');
  });

  it('refuses a bad source, and a replay endpoint for events that come over NATS', () => {
    expect(() => resolveServeConfig({ backends: 'http://a:1', events: 'tcp://h:1' }, {})).toThrow(
      /--events must be nats:\/\/HOST:PORT/,
    );
    expect(() => resolveServeConfig({ backends: 'http://a:1', events: 'nats://h:1/a.b' }, {})).toThrow(/--events/);
    expect(() =>
      resolveServeConfig({ backends: 'http://a:1', 'kv-events': 'nats://h:1', 'kv-replay': 'tcp://h:2' }, {}),
    ).toThrow(/whose events come over NATS/);
    expect(() => resolveServeConfig({ backends: 'http://a:1', 'kv-events': 'nats://h' }, {})).toThrow(
      /--kv-events entry 1 must be .*nats:\/\/HOST:PORT/,
    );
  });
});
