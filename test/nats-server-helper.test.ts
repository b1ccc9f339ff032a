import { connect } from '@nats-io/transport-node';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { describe, expect, it } from 'vitest';

import { NATS_SKIP_REASON, natsServerPath, startNatsServer } from './helpers/nats-server.js';

const binary = natsServerPath();
if (binary === undefined) console.warn(`test/nats-server-helper.test.ts: ${NATS_SKIP_REASON}`);

describe.skipIf(binary === undefined)('the nats-server test helper', () => {
  it('starts JetStream, keeps a stream across a restart, and stops by pid', async () => {
    const server = await startNatsServer();
    try {
      let nc = await connect({ servers: server.url });
      const jsm = await jetstreamManager(nc);
      await jsm.streams.add({ name: 'probe', subjects: ['probe.>'] });
      await jetstream(nc).publish('probe.a', 'one');
      await nc.close();
      const pid = server.pid;
      await server.restart();
      expect(server.pid).not.toBe(pid);
      expect(() => process.kill(pid, 0)).toThrow();
      nc = await connect({ servers: server.url });
      const info = await (await jetstreamManager(nc)).streams.info('probe');
      expect(info.state.messages).toBe(1);
      await nc.close();
    } finally {
      await server.dispose();
    }
    expect(() => process.kill(server.pid, 0)).toThrow();
  });
});
