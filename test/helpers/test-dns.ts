/**
 * A DNS server for discovery tests (UDP on 127.0.0.1, dns-packet) whose answers the test sets, and
 * a port free on several loopback addresses (engines at one port on 127.0.0.2…, as pods behind a
 * headless Service).
 */
import { createSocket, type Socket } from 'node:dgram';
import { createServer } from 'node:net';

import * as dnsPacket from 'dns-packet';

/** A DNS server whose answers the test sets: A records and SRV records by name, or a failure. */
export class TestDns {
  a = new Map<string, string[]>();
  srv = new Map<string, Array<{ target: string; port: number }>>();
  /** Answer SERVFAIL to everything (a broken DNS server). */
  failing = false;
  queries = 0;
  private socket!: Socket;

  static async start(): Promise<TestDns> {
    const dns = new TestDns();
    dns.socket = createSocket('udp4');
    dns.socket.on('message', (message, peer) => dns.answer(message, peer.port, peer.address));
    await new Promise<void>((resolve) => dns.socket.bind(0, '127.0.0.1', resolve));
    return dns;
  }

  get server(): string {
    return `127.0.0.1:${this.socket.address().port}`;
  }

  private answer(message: Buffer, port: number, address: string): void {
    const query = dnsPacket.decode(message);
    const question = query.questions![0]!;
    this.queries++;
    const answers: dnsPacket.Answer[] = [];
    let rcode = 0;
    if (this.failing)
      rcode = 2; // SERVFAIL
    else if (question.type === 'A' && this.a.has(question.name))
      for (const data of this.a.get(question.name)!) answers.push({ type: 'A', name: question.name, ttl: 1, data });
    else if (question.type === 'SRV' && this.srv.has(question.name))
      for (const r of this.srv.get(question.name)!)
        answers.push({ type: 'SRV', name: question.name, ttl: 1, data: { priority: 0, weight: 1, ...r } });
    else if (!this.a.has(question.name) && !this.srv.has(question.name)) rcode = 3; // NXDOMAIN
    const response = dnsPacket.encode({
      type: 'response',
      id: query.id,
      flags: dnsPacket.AUTHORITATIVE_ANSWER | rcode,
      questions: query.questions,
      answers,
    });
    this.socket.send(response, port, address);
  }

  close(): void {
    this.socket.close();
  }
}

/** A port free on each of the given loopback addresses. */
export async function portFreeOn(hosts: readonly string[]): Promise<number> {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 40_000);
    const free = await Promise.all(
      hosts.map(
        (host) =>
          new Promise<boolean>((resolve) => {
            const s = createServer();
            s.once('error', () => resolve(false));
            s.listen(port, host, () => s.close(() => resolve(true)));
          }),
      ),
    );
    if (free.every(Boolean)) return port;
  }
}
