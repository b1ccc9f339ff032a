#!/usr/bin/env node
// @ts-check
// A throwaway DNS server for trying `kvroute serve --discover` without a cluster
// (docs/discovery.md): answers A and SRV queries for the names given, NXDOMAIN for the rest,
// over UDP on loopback, until SIGINT or SIGTERM.
//
//   node scripts/toy-dns.mjs --port 5353 --a engines.local=127.0.0.1,127.0.0.2 \
//     [--srv _http._tcp.engines.local=localhost:8100,localhost:8101]
import { createSocket } from 'node:dgram';
import { parseArgs } from 'node:util';

import dnsPacket from 'dns-packet';

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '5353' },
    a: { type: 'string', multiple: true, default: [] },
    srv: { type: 'string', multiple: true, default: [] },
  },
});

/** @param {string[]} specs @returns {Map<string, string[]>} */
const table = (specs) => new Map(specs.map((s) => [s.split('=')[0] ?? '', (s.split('=')[1] ?? '').split(',')]));
const a = table(values.a);
const srv = table(values.srv);

const socket = createSocket('udp4');
socket.on('message', (message, peer) => {
  const query = dnsPacket.decode(message);
  const question = query.questions?.[0];
  if (question === undefined) return;
  /** @type {dnsPacket.Answer[]} */
  const answers = [];
  const known = a.has(question.name) || srv.has(question.name);
  if (question.type === 'A')
    for (const data of a.get(question.name) ?? []) answers.push({ type: 'A', name: question.name, ttl: 5, data });
  if (question.type === 'SRV')
    for (const entry of srv.get(question.name) ?? []) {
      const [target = '', port = '0'] = entry.split(':');
      answers.push({
        type: 'SRV',
        name: question.name,
        ttl: 5,
        data: { priority: 0, weight: 1, target, port: Number(port) },
      });
    }
  const flags = dnsPacket.AUTHORITATIVE_ANSWER | (known ? 0 : 3); // NXDOMAIN for unknown names
  socket.send(
    dnsPacket.encode({ type: 'response', id: query.id, flags, questions: query.questions, answers }),
    peer.port,
    peer.address,
  );
});
socket.bind(Number(values.port), '127.0.0.1', () => console.log(`toy-dns: listening on 127.0.0.1:${values.port}`));
for (const signal of /** @type {const} */ (['SIGINT', 'SIGTERM'])) process.on(signal, () => socket.close());
