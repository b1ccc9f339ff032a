/**
 * One simulated vLLM or SGLang engine over HTTP (Node's `http`): an EngineModel run in real time
 * behind the engine's OpenAI-compatible routes (docs/sim-serve.md; the flavours in engine-flavor.ts).
 *
 *   POST /v1/chat/completions, /v1/completions   streaming (SSE) and not
 *   POST /v1/messages, /v1/responses              Anthropic's and OpenAI's, served as chat (api-answers.ts)
 *   GET  /v1/models, /health, /metrics
 *   POST /reset_prefix_cache                      vLLM's (dev mode) route: drops the cached blocks
 *   GET  /health_generate, /get_model_info        SGLang's
 *   POST /flush_cache (or GET)                    SGLang's prefix-cache reset
 *
 * With `kvEvents`, the engine publishes its block pool's changes as vLLM KV cache events
 * (docs/kv-events.md). With `tokenizer`, text prompts are tokenized and cached by token blocks.
 *
 * Disaggregated prefill (docs/sim-serve.md): a request with `kv_transfer_params.do_remote_decode`
 * is prefilled and answered with the params a decode engine needs (its KV held in `holds`); one
 * with `do_remote_prefill` naming an engine of `peers` (the fleet) claims that KV, waits the
 * transfer time (remote-prefill.ts), then is served holding it as cached.
 *
 * Every failure is answered with vLLM's error body and the process never throws on input: a
 * body that is not JSON or fails a check is a 400 naming the field, a body over `maxBodyBytes`
 * a 413, another model a 404, an unknown path a 404 and a known path with the wrong method a
 * 405. An unexpected exception in a handler becomes a 500 and is logged.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

import { isKvrouteError } from '../core/errors.js';
import { CompletionExchange } from './completion-exchange.js';
import {
  ApiError,
  parseCompletionRequest,
  tokenizerInput,
  type Endpoint,
  type PromptTokenizer,
} from './completion-request.js';
import { anthropicErrorBody } from '../tokenize/api-requests.js';
import { modelList } from './completion-response.js';
import { flavorErrorBody, metricLabels, type EngineFlavor } from './engine-flavor.js';
import { EngineMetrics } from './engine-metrics.js';
import { EngineModel, type Sequence } from './engine-model.js';
import type { EnginePreset } from './engine-preset.js';
import { EngineKvEvents } from './engine-kv-events.js';
import type { KvEventEncoding } from './kv-event-encoding.js';
import { KvEventPublisher } from './kv-event-publisher.js';
import { KvHolds, DEFAULT_KV_HOLD_TIMEOUT_S } from './kv-holds.js';
import { KvTransferPeers } from './kv-peers.js';
import type { RemoteDecodeParams } from './kv-transfer-params.js';
import { kvTransferCounters, registerKvTransferMetrics, type KvTransferCounters } from './kv-transfer-metrics.js';
import { RealtimeEngine } from './realtime-engine.js';
import { awaitTransfer, claimRemotePrefill } from './remote-prefill.js';

/** Response ids by route: OpenAI's `chatcmpl-`/`cmpl-`/`resp_`, Anthropic's `msg_`. */
const ID_PREFIX = { chat: 'chatcmpl-', completion: 'cmpl-', messages: 'msg_', responses: 'resp_' } as const;

/** Request bodies above this are refused with 413 (agentic prompts reach a few MB). */
export const DEFAULT_MAX_BODY_BYTES = 64 * 2 ** 20;

export interface EngineServerOptions {
  /** Position in the fleet: the `engine` metric label, and part of response ids. */
  index: number;
  host: string;
  /** 0 picks a free port. */
  port: number;
  preset: EnginePreset;
  /** Tokens per KV block. */
  blockSize: number;
  /** Virtual seconds per wall second. */
  speed: number;
  /** The served model name (`/v1/models`, the `model_name` label). */
  model: string;
  maxBodyBytes?: number;
  /** Publish KV cache events (docs/kv-events.md); none when absent. */
  kvEvents?: EngineKvEventOptions;
  /** Tokenizes text prompts, so they are cached by token blocks; none when absent. */
  tokenizer?: PromptTokenizer;
  /** The fleet's engines as KV transfer peers (and its link); default: a fleet of this engine alone. */
  peers?: KvTransferPeers;
  /** Engine seconds prefilled KV is held for a decode engine before it is freed (default 480, vLLM's). */
  kvHoldTimeoutS?: number;
  /** The engine it speaks as (engine-flavor.ts; default vllm). */
  flavor?: EngineFlavor;
}

export interface EngineKvEventOptions {
  /** PUB endpoint to bind: `tcp://HOST:PORT`, or `tcp://HOST:*` for a free port. */
  endpoint: string;
  /** ROUTER endpoint for replay requests; none when absent. */
  replayEndpoint?: string;
  encoding: KvEventEncoding;
  /** Messages kept for replay (default 10,000). */
  bufferSteps?: number;
}

type Route =
  'chat' | 'completion' | 'messages' | 'responses' | 'models' | 'health' | 'metrics' | 'reset' | 'model-info';
type Routes = Record<string, { methods: readonly ('GET' | 'POST')[]; route: Route }>;

const SHARED_ROUTES: Routes = {
  '/v1/chat/completions': { methods: ['POST'], route: 'chat' },
  '/v1/completions': { methods: ['POST'], route: 'completion' },
  // Anthropic's Messages API and OpenAI's Responses API, which vLLM serves as chat.
  '/v1/messages': { methods: ['POST'], route: 'messages' },
  '/v1/responses': { methods: ['POST'], route: 'responses' },
  '/v1/models': { methods: ['GET'], route: 'models' },
  '/health': { methods: ['GET'], route: 'health' },
  '/metrics': { methods: ['GET'], route: 'metrics' },
};

const ROUTES: Record<EngineFlavor, Routes> = {
  vllm: { ...SHARED_ROUTES, '/reset_prefix_cache': { methods: ['POST'], route: 'reset' } },
  sglang: {
    ...SHARED_ROUTES,
    // SGLang's health check that runs one token through the model; the simulated one always can.
    '/health_generate': { methods: ['GET'], route: 'health' },
    '/get_model_info': { methods: ['GET'], route: 'model-info' },
    '/flush_cache': { methods: ['GET', 'POST'], route: 'reset' },
  },
};

export class EngineServer {
  readonly engine: EngineModel;
  readonly realtime: RealtimeEngine;
  readonly metrics: EngineMetrics;
  /** This engine's `remote_engine_id` in its fleet. */
  readonly engineId: string;
  /** KV this engine prefilled for decode engines (the prefill side). */
  readonly holds: KvHolds;
  /** KV transfers it received (the decode side). */
  readonly transfers: KvTransferCounters = kvTransferCounters();
  private readonly peers: KvTransferPeers;
  readonly flavor: EngineFlavor;
  /** vLLM's max_model_len: the preset's, capped at what the KV cache holds. */
  readonly maxModelLen: number;
  private readonly server: Server;
  private readonly created = Math.floor(Date.now() / 1000);
  private readonly maxBodyBytes: number;
  private nextRequest = 0;
  private address: AddressInfo | undefined;
  /** The KV event publisher and the pool listener feeding it, with `kvEvents`. */
  private kv: { publisher: KvEventPublisher; events: EngineKvEvents } | undefined;

  private constructor(private readonly options: EngineServerOptions) {
    this.engine = new EngineModel({ preset: options.preset, blockSize: options.blockSize });
    this.realtime = new RealtimeEngine(this.engine, { speed: options.speed });
    this.flavor = options.flavor ?? 'vllm';
    this.metrics = new EngineMetrics(
      this.engine,
      this.realtime,
      this.flavor,
      metricLabels(this.flavor, options.model, options.index),
    );
    this.peers = options.peers ?? new KvTransferPeers();
    this.engineId = this.peers.engineId(options.index);
    this.holds = new KvHolds(this.realtime, options.kvHoldTimeoutS ?? DEFAULT_KV_HOLD_TIMEOUT_S);
    registerKvTransferMetrics(this.metrics.registry, this.transfers, this.holds);
    this.maxModelLen = Math.min(options.preset.maxModelLen, this.engine.pool.capacity * options.blockSize);
    this.maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
    this.server = createServer((req, res) => {
      this.handle(req, res).catch((error: unknown) => this.fail(res, error));
    });
  }

  /** Starts an engine and resolves once it listens (and its KV event sockets are bound). */
  static async start(options: EngineServerOptions): Promise<EngineServer> {
    const engine = new EngineServer(options);
    if (options.kvEvents !== undefined) {
      const publisher = await KvEventPublisher.start(options.kvEvents);
      const events = new EngineKvEvents(options.blockSize, (batch) => publisher.publish(batch));
      engine.engine.pool.listener = events;
      engine.kv = { publisher, events };
    }
    try {
      await new Promise<void>((resolve, reject) => {
        engine.server.once('error', reject);
        engine.server.listen(options.port, options.host, () => {
          engine.server.off('error', reject);
          resolve();
        });
      });
    } catch (error) {
      await engine.closeKvEvents();
      throw error;
    }
    engine.address = engine.server.address() as AddressInfo;
    engine.peers.add({
      engineId: engine.engineId,
      host: options.host,
      port: engine.port,
      engine: engine.engine,
      holds: engine.holds,
    });
    return engine;
  }

  /** The KV event publisher, with `kvEvents`. */
  get kvEventPublisher(): KvEventPublisher | undefined {
    return this.kv?.publisher;
  }

  get model(): string {
    return this.options.model;
  }

  get port(): number {
    return this.address!.port;
  }

  /** `http://host:port`, IPv6 hosts in brackets. */
  get url(): string {
    const host = this.options.host.includes(':') ? `[${this.options.host}]` : this.options.host;
    return `http://${host}:${this.port}`;
  }

  /** Stops the engine's clock, drops every connection (aborting what runs) and stops listening. */
  async close(): Promise<void> {
    this.peers.remove(this.engineId);
    this.holds.close();
    this.realtime.close();
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeAllConnections();
    await closed;
    await this.closeKvEvents();
  }

  /** Publishes what is pending, then closes the sockets. */
  private async closeKvEvents(): Promise<void> {
    if (this.kv === undefined) return;
    this.kv.events.flushNow();
    this.kv.events.close();
    this.engine.pool.listener = undefined;
    await this.kv.publisher.close();
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?', 1)[0]!;
    const entry = ROUTES[this.flavor][path];
    if (entry === undefined) return this.error(res, 404, 'NotFoundError', `Not Found: no route ${path}`);
    // HEAD is GET without a body (Node drops the body of a HEAD response).
    const method = req.method === 'HEAD' && entry.methods.includes('GET') ? 'GET' : req.method;
    if (!entry.methods.includes(method as 'GET' | 'POST')) {
      res.setHeader('Allow', entry.methods.join(', '));
      const takes = entry.methods.join(' or ');
      return this.error(res, 405, 'MethodNotAllowedError', `Method Not Allowed: ${path} takes ${takes}`);
    }
    switch (entry.route) {
      case 'health':
        res.writeHead(200).end();
        return;
      case 'models':
        return this.json(res, 200, modelList(this.options.model, this.created, this.maxModelLen, this.flavor));
      case 'model-info':
        // SGLang's: the served model's path and what kind it is.
        return this.json(res, 200, {
          model_path: this.options.model,
          tokenizer_path: this.options.model,
          is_generation: true,
          weight_version: 'default',
        });
      case 'metrics': {
        const text = await this.metrics.text();
        res.writeHead(200, { 'Content-Type': this.metrics.contentType }).end(text);
        return;
      }
      case 'reset':
        req.resume();
        // vLLM refuses while requests hold blocks and logs; the simulator answers 409 so a client
        // knows (SGLang answers 400 while requests run).
        if (!this.engine.pool.resetPrefixCache())
          return this.error(
            res,
            this.flavor === 'sglang' ? 400 : 409,
            this.flavor === 'sglang' ? 'BadRequestError' : 'ConflictError',
            `cannot reset the prefix cache: ${this.engine.pool.referenced} blocks are held by running requests`,
          );
        res.writeHead(200).end();
        return;
      default:
        return this.complete(req, res, entry.route);
    }
  }

  private async complete(req: IncomingMessage, res: ServerResponse, endpoint: Endpoint): Promise<void> {
    let body: unknown;
    try {
      body = JSON.parse((await readBody(req, this.maxBodyBytes)).toString('utf8'));
    } catch (error) {
      if (error instanceof ApiError) throw error;
      if (req.destroyed && !req.complete) return; // the client went away mid-upload
      throw new ApiError(400, 'BadRequestError', `the request body is not valid JSON: ${(error as Error).message}`);
    }
    const limits = { model: this.options.model, blockSize: this.options.blockSize, maxModelLen: this.maxModelLen };
    const session = req.headers['x-session-id'];
    const tokenized = await this.tokenize(endpoint, body, typeof session === 'string' ? session : undefined);
    if (res.destroyed) return; // the client went away while the prompt was tokenized
    const request = parseCompletionRequest(endpoint, body, limits, tokenized);
    const n = this.nextRequest++;
    const head = {
      endpoint,
      id: `${ID_PREFIX[endpoint]}${this.options.index}-${n}`,
      created: Math.floor(Date.now() / 1000),
      model: request.model,
    };
    const context = { realtime: this.realtime, metrics: this.metrics };
    const { kvTransfer } = request;
    if (kvTransfer.kind === 'remote-decode') {
      const remoteDecode = (sequence: Sequence) => this.holdForRemoteDecode(head.id, sequence);
      new CompletionExchange(res, request, head, n, context, { remoteDecode }).start();
      return;
    }
    if (kvTransfer.kind === 'none') {
      new CompletionExchange(res, request, head, n, context).start();
      return;
    }
    const arrivedAt = this.realtime.now();
    const plan = claimRemotePrefill(kvTransfer, request, this, this.peers);
    awaitTransfer(
      plan,
      res,
      this.realtime,
      () => {
        const connection = plan.cold ? 'cold' : 'warm';
        this.transfers.transfers[connection]++;
        this.transfers.seconds[connection] += plan.seconds;
        this.transfers.tokens += plan.tokens;
        new CompletionExchange(res, request, head, n, context, { transferred: { arrivedAt } }).start();
      },
      () => this.transfers.aborted++,
    );
  }

  /** Holds a finished prefill's KV for a decode engine; the params that name it (vLLM's NIXL shape). */
  private holdForRemoteDecode(requestId: string, sequence: Sequence): RemoteDecodeParams {
    const hold = this.holds.hold(requestId, sequence);
    return {
      do_remote_prefill: true,
      do_remote_decode: false,
      remote_engine_id: this.engineId,
      remote_block_ids: [...hold.blockIds],
      remote_request_id: requestId,
      remote_host: this.options.host,
      remote_port: this.port,
      tp_size: 1,
    };
  }

  /** The prompt's token ids from the tokenizer, when the engine has one and the prompt is text. */
  private async tokenize(
    endpoint: Endpoint,
    body: unknown,
    session: string | undefined,
  ): Promise<Uint32Array | undefined> {
    const { tokenizer } = this.options;
    if (tokenizer === undefined) return undefined;
    const input = tokenizerInput(endpoint, body);
    if (input === undefined) return undefined;
    if (input.kind === 'chat' && session !== undefined) input.session = session;
    try {
      return await tokenizer(input);
    } catch (error) {
      throw new ApiError(400, 'BadRequestError', `the prompt could not be tokenized: ${(error as Error).message}`);
    }
  }

  private fail(res: ServerResponse, error: unknown): void {
    if (error instanceof ApiError) {
      if (error.status === 413) res.setHeader('Connection', 'close');
      return this.error(res, error.status, error.type, error.message);
    }
    if (isKvrouteError(error)) return this.error(res, 400, 'BadRequestError', error.message);
    process.stderr.write(`kvroute sim serve: engine ${this.options.index}: ${(error as Error).stack ?? error}\n`);
    if (!res.headersSent) this.error(res, 500, 'InternalServerError', 'internal error in the simulated engine');
    else res.destroy();
  }

  /** The engine's error body; on the Messages route, Anthropic's (as vLLM answers there). */
  private error(res: ServerResponse, status: number, type: string, message: string): void {
    const anthropic = (res.req?.url ?? '').split('?', 1)[0] === '/v1/messages';
    this.json(
      res,
      status,
      anthropic ? anthropicErrorBody(status, message) : flavorErrorBody(this.flavor, status, type, message),
    );
  }

  private json(res: ServerResponse, status: number, value: object): void {
    if (res.destroyed || res.headersSent) return;
    res.writeHead(status, { 'Content-Type': 'application/json' }).end(JSON.stringify(value));
  }
}

/** The whole body, or an ApiError 413 as soon as it passes `limit` bytes (the rest is drained). */
function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const tooLarge = () => new ApiError(413, 'PayloadTooLargeError', `the request body exceeds ${limit} bytes`);
    if (Number(req.headers['content-length']) > limit) {
      req.resume();
      reject(tooLarge());
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > limit) {
        req.off('data', onData);
        req.resume();
        reject(tooLarge());
        return;
      }
      chunks.push(chunk);
    };
    req.on('data', onData);
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
    // Settles the promise when the client disconnects mid-upload; a no-op after `end`.
    req.on('close', () => reject(new Error('the client closed the connection')));
  });
}
