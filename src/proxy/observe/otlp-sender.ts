/**
 * Sending spans to an OTLP/HTTP collector (`<endpoint>/v1/traces`, protobuf) with the OTLP exporter's
 * own transport (@opentelemetry/otlp-exporter-base: timeouts, retries with backoff on 429/502/503/
 * 504, `OTEL_EXPORTER_OTLP_HEADERS`, `_TIMEOUT`, `_COMPRESSION` and their `_TRACES_` forms), given
 * bodies kvroute encoded (otlp-body.ts) in place of the SDK's serializer: the exporter base takes
 * any. A collector that takes only part of a batch (OTLP's partial success) is reported as a warning.
 */
import { ExportResultCode } from '@opentelemetry/core';
import { OTLPExporterBase } from '@opentelemetry/otlp-exporter-base';
import { convertLegacyHttpOptions, createOtlpHttpExportDelegate } from '@opentelemetry/otlp-exporter-base/node-http';

import type { BufferPool, OtlpBody } from './otlp-body.js';
import { otlpProtoBody, type OtlpEnvelope } from './otlp-proto.js';
import { rejectedSpans } from './otlp-proto-read.js';
import type { TraceSender } from './trace-batch.js';

/**
 * Bodies' buffers, reused: a body's from its first chunk until its export ended (the exporter keeps
 * it for its retries). A fresh megabyte per body would cost its page faults on every export.
 */
class BodyBuffers implements BufferPool {
  private static readonly MAX_FREE = 4;
  private readonly free: Buffer[] = [];

  /** The last released buffer that is large enough: the memory most recently touched. */
  allocate(bytes: number): Buffer {
    const index = this.free.findLastIndex((b) => b.length >= bytes);
    if (index >= 0) return this.free.splice(index, 1)[0]!;
    this.free.shift(); // none is large enough: one small buffer fewer in the pool
    return Buffer.allocUnsafeSlow(bytes);
  }

  release(buffer: Buffer): void {
    if (this.free.length < BodyBuffers.MAX_FREE) this.free.push(buffer);
  }
}

/**
 * A sender of finished bodies to the collector at `url` (the full `/v1/traces` URL), the pool
 * their buffers come from, and its shutdown. Bodies sent together (a timed flush of several) are
 * merged into one request.
 */
export function otlpSender(
  url: string,
  envelope: OtlpEnvelope,
  warn: (line: string) => void,
): { send: TraceSender<OtlpBody>; buffers: BufferPool; shutdown(): Promise<void> } {
  const buffers = new BodyBuffers();
  const exporter = new OTLPExporterBase<OtlpBody[]>(
    createOtlpHttpExportDelegate(
      convertLegacyHttpOptions({ url }, 'TRACES', 'v1/traces', { 'Content-Type': 'application/x-protobuf' }),
      {
        serializeRequest: (bodies: OtlpBody[]): Uint8Array =>
          bodies.length === 1
            ? bodies[0]!.bytes
            : otlpProtoBody(
                bodies.map((b) => b.spans),
                envelope,
              ),
        deserializeResponse: (data: Uint8Array): object => {
          const partial = rejectedSpans(data);
          if (partial !== undefined)
            warn(`kvroute proxy: tracing: the collector rejected ${partial.rejected} spans: ${partial.message}`);
          return {};
        },
      },
      'kvroute_otlp_http_span_exporter',
      { name: 'span', countItems: (bodies) => bodies.reduce((sum, b) => sum + b.requests, 0) },
      undefined,
    ),
  );
  return {
    send: (bodies) =>
      new Promise((resolve, reject) => {
        exporter.export(bodies, (result) => {
          for (const body of bodies) buffers.release(body.buffer);
          if (result.code === ExportResultCode.SUCCESS) resolve();
          else reject(result.error ?? new Error('the collector did not take the spans'));
        });
      }),
    buffers,
    shutdown: () => exporter.shutdown(),
  };
}
