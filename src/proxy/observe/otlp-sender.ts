/**
 * Sending spans to an OTLP/HTTP collector (`<endpoint>/v1/traces`, protobuf) with the OTLP exporter's
 * own transport (@opentelemetry/otlp-exporter-base: timeouts, retries with backoff on 429/502/503/
 * 504, `OTEL_EXPORTER_OTLP_HEADERS`, `_TIMEOUT`, `_COMPRESSION` and their `_TRACES_` forms), given
 * kvroute's serializer (otlp-proto.ts) in place of the SDK's: the exporter base takes any. A
 * collector that takes only part of a batch (OTLP's partial success) is reported as a warning.
 */
import { ExportResultCode } from '@opentelemetry/core';
import { OTLPExporterBase } from '@opentelemetry/otlp-exporter-base';
import { convertLegacyHttpOptions, createOtlpHttpExportDelegate } from '@opentelemetry/otlp-exporter-base/node-http';

import { otlpProtoBody, type OtlpEnvelope } from './otlp-proto.js';
import { rejectedSpans } from './otlp-proto-read.js';
import type { TraceSender } from './trace-batch.js';

/**
 * Request bodies' buffers, reused: one per export in flight (the exporter keeps a body until its
 * last retry), returned when the export ends. A fresh megabyte per batch would cost its page
 * faults on every export.
 */
class BodyBuffers {
  private readonly free: Buffer[] = [];
  /** The buffer the last body was written to (encoding is synchronous within export()). */
  last: Buffer | undefined;

  readonly allocate = (bytes: number): Buffer => {
    let index = this.free.findIndex((b) => b.length >= bytes);
    if (index < 0 && this.free.length > 0) index = 0; // too small: replaced by a larger one
    const reused = index < 0 ? undefined : this.free.splice(index, 1)[0]!;
    this.last =
      reused !== undefined && reused.length >= bytes ? reused : Buffer.allocUnsafeSlow(Math.max(bytes, 1 << 20));
    return this.last;
  };

  release(buffer: Buffer | undefined): void {
    if (buffer !== undefined && this.free.length < 4) this.free.push(buffer);
  }
}

/**
 * Buffers for encoded chunks of requests' spans (encodeRequestSpans), recycled once a body holds
 * them. A new buffer per chunk, kept until its batch leaves, outlives two scavenges and is freed
 * only by a full collection: the server then ran 60% more mark-compacts (measured, --trace-gc).
 * A chunk larger than a slab gets a buffer of its own, not recycled.
 */
class ChunkSlabs {
  private static readonly SLAB_BYTES = 256 * 1024;
  private static readonly MAX_FREE = 64;
  private readonly free: ArrayBuffer[] = [];

  readonly allocate = (bytes: number): Buffer => {
    if (bytes > ChunkSlabs.SLAB_BYTES) return Buffer.allocUnsafe(bytes);
    const slab = this.free.pop() ?? new ArrayBuffer(ChunkSlabs.SLAB_BYTES);
    return Buffer.from(slab, 0, bytes);
  };

  /** The chunks' slabs are free again (their bytes were copied into a body). */
  release(chunks: readonly Uint8Array[]): void {
    for (const c of chunks)
      if (c.buffer.byteLength === ChunkSlabs.SLAB_BYTES && c.byteOffset === 0 && this.free.length < ChunkSlabs.MAX_FREE)
        this.free.push(c.buffer as ArrayBuffer);
  }
}

/**
 * A sender of requests' encoded spans (otlp-proto.ts, encodeRequestSpans) to the collector at
 * `url` (the full `/v1/traces` URL), and its shutdown.
 */
export function otlpSender(
  url: string,
  envelope: OtlpEnvelope,
  warn: (line: string) => void,
): { send: TraceSender<Uint8Array>; shutdown(): Promise<void>; allocateChunk: (bytes: number) => Buffer } {
  const buffers = new BodyBuffers();
  const slabs = new ChunkSlabs();
  const exporter = new OTLPExporterBase<Uint8Array[]>(
    createOtlpHttpExportDelegate(
      convertLegacyHttpOptions({ url }, 'TRACES', 'v1/traces', { 'Content-Type': 'application/x-protobuf' }),
      {
        serializeRequest: (requests: Uint8Array[]): Uint8Array => {
          const body = otlpProtoBody(requests, envelope, buffers.allocate);
          slabs.release(requests);
          return body;
        },
        deserializeResponse: (data: Uint8Array): object => {
          const partial = rejectedSpans(data);
          if (partial !== undefined)
            warn(`kvroute proxy: tracing: the collector rejected ${partial.rejected} spans: ${partial.message}`);
          return {};
        },
      },
      'kvroute_otlp_http_span_exporter',
      { name: 'span', countItems: (requests) => requests.length },
      undefined,
    ),
  );
  return {
    send: (batch) =>
      new Promise((resolve, reject) => {
        buffers.last = undefined;
        // export() encodes the body synchronously (into buffers.last); the buffer is free again
        // once the export ended, which may be before export() returns (a refusal).
        const held: { body: Buffer | undefined; ended: boolean } = { body: undefined, ended: false };
        exporter.export(batch, (result) => {
          held.ended = true;
          buffers.release(held.body);
          if (result.code === ExportResultCode.SUCCESS) resolve();
          else reject(result.error ?? new Error('the collector did not take the spans'));
        });
        if (held.ended) buffers.release(buffers.last);
        else held.body = buffers.last;
      }),
    shutdown: () => exporter.shutdown(),
    allocateChunk: slabs.allocate,
  };
}
