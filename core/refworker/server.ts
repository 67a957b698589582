// The reference worker: a real gRPC server speaking the TokenSpeed or the vLLM protocol
// (tokenspeed.ts, vllm.ts), reading tensors exactly as real workers do (receive.ts, after
// docs/transport.md "Reading a tensor") and answering with a deterministic completion that
// states what it received. It advertises its real /dev/shm namespace token unless told
// otherwise, and everything it says about the model (vocabulary, context length, eos ids,
// model type) comes from the model directory (the bundled one by default), whose tokenizer
// also encodes the answer, so the router's detokenizer turns it back into the same text.
import * as grpc from '@grpc/grpc-js';
import { existsSync, unlinkSync } from 'node:fs';
import v8 from 'node:v8';
import vm from 'node:vm';
import { GRPC_CHANNEL_OPTIONS, REQUEST_MESSAGE_MAX_BYTES, WORKER_REPLY_MAX_BYTES } from '../engines/grpc.ts';
import { loadModelDirectory } from '../multimodal/model-dir.ts';
import type { TransportMetrics } from '../telemetry/metrics.ts';
import { TensorBufferPool, type BufferLease } from '../transport/buffer-pool.ts';
import { readNamespaceToken } from '../transport/namespace.ts';
import { TensorReader } from '../transport/shm-reader.ts';
import { DEFAULT_BOOTSTRAP_PORT, type WireRuntime } from '../config/schema.ts';
import { startBootstrapServer, type BootstrapServer } from './bootstrap.ts';
import type { GenerateServing, RoleServing, WorkerIdentity, WorkerRole } from './receive.ts';
import { addSglangService } from './sglang.ts';
import { addTokenSpeedService } from './tokenspeed.ts';
import { addVllmService } from './vllm.ts';
import { TamperingReader, type TamperMode, type TamperRecord } from './tamper.ts';
import { KV_CONNECTORS, type KvConnectorChoice } from './vllm-roles.ts';

export interface ReferenceWorkerOptions {
  runtime: WireRuntime;
  host?: string;
  port?: number;
  /** Listen on a unix socket instead of host:port. */
  socket?: string;
  /** Advertise this token instead of the real one; '' advertises none. */
  shmNamespaceId?: string;
  modelPath?: string;
  /** Hash every tensor's bytes for the completion text (off for benchmarks). */
  fingerprint?: boolean;
  reader?: TensorReader;
  /**
   * What each /dev/shm tensor is read into (when no reader is given): `pooled` (default), a
   * reused, pre-faulted buffer per size class; `fresh`, a new buffer per tensor that is never
   * reused by us, as the gateway's Python servicers read (docs/performance.md).
   */
  readBuffers?: ReadBuffers;
  /** Where SHM read latency is observed (smg_mm_shm_read_seconds). */
  metrics?: TransportMetrics;
  /** Hold each Generate this long before reading its tensors (a queued request, for demos and failure tests). */
  delayMs?: number;
  /** Its part in disaggregated serving (default regular: whole requests). */
  role?: WorkerRole;
  /** The bootstrap server's port of an encode or prefill worker (default 8998, as the gateway's; 0 picks a free one). */
  bootstrapPort?: number;
  /** Fault injection for an encode worker: answer accepted: false / accept but never hand the embedding over. */
  encodeAccept?: boolean;
  encodeDrop?: boolean;
  /** How long a prefill waits for an embedding (default 10 s), a decode for the KV (default 15 s). */
  embeddingTimeoutMs?: number;
  kvTimeoutMs?: number;
  /** A vLLM prefill or decode worker's KV connector (default nixl): vllm-roles.ts. */
  kvConnector?: KvConnectorChoice;
  /** The model dtype it advertises and, as TokenSpeed, attaches encoder inputs in (default: config.json torch_dtype, else bfloat16). */
  modelDtype?: string;
  /**
   * Its default_sampling_params_json (default: vLLM and SGLang publish generation_config.json's
   * temperature, top_p, top_k, min_p and repetition_penalty; TokenSpeed publishes its
   * --preferred-sampling-params, none unless given).
   */
  defaultSamplingParams?: string;
  /** Fault injection (tamper.ts): change a byte of every /dev/shm tensor file before reading it (when no reader is given), by write() or as through a shared map (its mtime kept); `onTamper` hears of each. */
  tamperShm?: boolean | TamperMode;
  onTamper?: (record: TamperRecord) => void;
}

/** The roles each protocol's reference worker can take (the protocol's own disaggregated serving). */
export const REFERENCE_ROLES: Readonly<Record<WireRuntime, readonly WorkerRole[]>> = {
  tokenspeed: ['regular', 'encode', 'prefill', 'decode'],
  vllm: ['regular', 'prefill', 'decode'],
  sglang: ['regular'],
};

export type ReadBuffers = 'pooled' | 'fresh';

// A young-generation collection frees a dead Buffer's memory at once, and cheaply; without it
// V8 frees it only when external memory has grown a lot (measured:
// docs/performance.md, "A young-generation collection in the reference worker"). (The flag is set only
// in a worker that reads into fresh buffers; the function comes from a fresh context.)
let collectGarbage: ((options: { type: 'minor' | 'major' }) => void) | undefined;
function minorCollector(): (options: { type: 'minor' | 'major' }) => void {
  if (!collectGarbage) {
    v8.setFlagsFromString('--expose-gc');
    collectGarbage = vm.runInNewContext('gc') as (options: { type: 'minor' | 'major' }) => void;
  }
  return collectGarbage;
}

/**
 * A new buffer for every tensor (malloc, untouched: its pages fault in as the file is read
 * into it), given back to the allocator as soon as the request is done with it, as a Python
 * servicer's array is freed when its last reference goes: nothing pre-faulted, nothing kept
 * by us. What the allocator then does with the memory (keep it for the next malloc, or return
 * it to the system) is its own business, as it is under Python.
 */
export class FreshBuffers extends TensorBufferPool {
  private collecting = false;
  private readonly collect = minorCollector();

  constructor() {
    super(0);
  }

  override acquire(n: number): BufferLease {
    return {
      bytes: Buffer.allocUnsafeSlow(n),
      release: () => {
        if (this.collecting) return;
        this.collecting = true;
        // Once the request's reads are over and nothing refers to the buffer any more.
        setImmediate(() => {
          this.collecting = false;
          this.collect({ type: 'minor' });
        });
      },
    };
  }
}

export interface ReferenceWorker {
  /** grpc://host:port or unix:///path, as a router's worker url. */
  url: string;
  runtime: WireRuntime;
  token: string | undefined;
  role: WorkerRole;
  /** Its bootstrap server's port (encode and prefill workers). */
  bootstrapPort: number | undefined;
  close(): Promise<void>;
}

const SERVICES: Readonly<Record<WireRuntime, (server: grpc.Server, s: GenerateServing, id: WorkerIdentity) => void>> = {
  tokenspeed: addTokenSpeedService,
  vllm: addVllmService,
  sglang: addSglangService,
};

/** The protocols `mmtc worker --runtime` serves. */
export const REFERENCE_RUNTIMES = Object.keys(SERVICES) as WireRuntime[];

/** The reader of a worker given none: pooled or fresh buffers, tampering with its files under --tamper-shm. */
function readerFor(options: ReferenceWorkerOptions): TensorReader {
  const buffers = options.readBuffers === 'fresh' ? { pool: new FreshBuffers() } : {};
  return options.tamperShm
    ? new TamperingReader({ ...buffers, keepMtime: options.tamperShm === 'map', ...(options.onTamper ? { onTamper: options.onTamper } : {}) })
    : new TensorReader(buffers);
}

export async function startReferenceWorker(options: ReferenceWorkerOptions): Promise<ReferenceWorker> {
  const identity: WorkerIdentity = {
    token: options.shmNamespaceId !== undefined ? options.shmNamespaceId || undefined : readNamespaceToken().token,
    started: Date.now(),
  };
  const model = await loadModelDirectory(options.modelPath);
  const fromGeneration = Object.keys(model.generationDefaults).length > 0 && options.runtime !== 'tokenspeed' ? JSON.stringify(model.generationDefaults) : '';
  const serving: GenerateServing = {
    runtime: options.runtime,
    model,
    modelDtype: options.modelDtype ?? model.torchDtype ?? 'bfloat16',
    samplingDefaults: options.defaultSamplingParams ?? fromGeneration,
    reader: options.reader ?? readerFor(options),
    fingerprint: options.fingerprint ?? true,
    ...(options.metrics ? { metrics: options.metrics } : {}),
    delayMs: options.delayMs ?? 0,
    active: new Set(),
  };
  const role = options.role ?? 'regular';
  if (!REFERENCE_ROLES[options.runtime].includes(role))
    throw new Error(
      `--role ${role} needs --runtime ${Object.entries(REFERENCE_ROLES)
        .filter(([, roles]) => roles.includes(role))
        .map(([r]) => r)
        .join(' or ')} (a ${options.runtime} reference worker is ${REFERENCE_ROLES[options.runtime].join(', ')})`,
    );
  if (options.bootstrapPort !== undefined && role !== 'encode' && role !== 'prefill')
    throw new Error(`--bootstrap-port is for an encode or prefill worker (this one is ${role})`);
  let bootstrap: BootstrapServer | undefined;
  if (role === 'encode' || role === 'prefill')
    bootstrap = await startBootstrapServer(options.host ?? '127.0.0.1', options.bootstrapPort ?? DEFAULT_BOOTSTRAP_PORT);
  const roleServing: RoleServing | undefined =
    role === 'regular'
      ? undefined
      : {
          role,
          ...(bootstrap ? { bootstrap } : {}),
          url: '',
          encodeAccept: options.encodeAccept ?? true,
          encodeDrop: options.encodeDrop ?? false,
          embeddingTimeoutMs: options.embeddingTimeoutMs ?? 10_000,
          kvTimeoutMs: options.kvTimeoutMs ?? 15_000,
          kvConnector: KV_CONNECTORS[options.kvConnector ?? 'nixl'],
        };
  if (roleServing) serving.role = roleServing;
  // It takes what a router sends (inline tensors) and answers within what a router takes.
  const server = new grpc.Server({
    ...GRPC_CHANNEL_OPTIONS,
    'grpc.max_receive_message_length': REQUEST_MESSAGE_MAX_BYTES,
    'grpc.max_send_message_length': WORKER_REPLY_MAX_BYTES,
  });
  SERVICES[options.runtime](server, serving, identity);

  let url: string;
  try {
    if (options.socket) {
      if (existsSync(options.socket)) unlinkSync(options.socket);
      await bind(server, `unix://${options.socket}`);
      url = `unix://${options.socket}`;
    } else {
      const host = options.host ?? '127.0.0.1';
      const hostPart = host.includes(':') ? `[${host}]` : host;
      const port = await bind(server, `${hostPart}:${options.port ?? 0}`);
      url = `grpc://${hostPart}:${port}`;
    }
  } catch (err) {
    await bootstrap?.close();
    throw err;
  }
  if (roleServing) roleServing.url = url;
  return {
    url,
    runtime: options.runtime,
    token: identity.token,
    role,
    bootstrapPort: bootstrap?.port,
    close: async () => {
      await new Promise<void>((resolve) => {
        server.tryShutdown(() => resolve());
        setTimeout(() => server.forceShutdown(), 2000).unref();
      });
      await bootstrap?.close();
    },
  };
}

function bind(server: grpc.Server, address: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (err, port) =>
      err ? reject(new Error(`cannot listen on ${address}: ${err.message}`)) : resolve(port),
    );
  });
}
