// Talking to a worker before any request: which protocol it speaks and what it advertises.
//
// Runtime detection: HealthCheck on both services at once; a worker that answers only one is
// that runtime (the other answers UNIMPLEMENTED). GetModelInfo and GetServerInfo then become
// labels the way the gateway makes them; the one transport cares about is shm_namespace_id
// (vLLM: GetServerInfoResponse field 10; TokenSpeed: the key inside scheduler_info).
import * as grpc from '@grpc/grpc-js';
import { TokenSpeedSchedulerClient } from '../gen/tokenspeed/grpc/scheduler.ts';
import { VllmEngineClient } from '../gen/vllm/grpc/engine.ts';

export type WireRuntime = 'tokenspeed' | 'vllm';

/** Inline tensors of a few hundred MB must fit: raise gRPC's 4 MiB default both ways. */
export const GRPC_CHANNEL_OPTIONS: grpc.ChannelOptions = {
  'grpc.max_receive_message_length': 1024 * 1024 * 1024,
  'grpc.max_send_message_length': 1024 * 1024 * 1024,
  'grpc.keepalive_time_ms': 30_000,
};

/** grpc://host:port -> host:port; unix:///path stays as is (grpc-js understands it). */
export function grpcTarget(url: string): string {
  if (url.startsWith('grpc://')) return url.slice('grpc://'.length);
  if (url.startsWith('unix://')) return url;
  throw new Error(`unsupported worker url '${url}': expected grpc://host:port or unix:///path`);
}

export type WorkerClient = { runtime: 'tokenspeed'; client: TokenSpeedSchedulerClient } | { runtime: 'vllm'; client: VllmEngineClient };

export function connectWorker(url: string, runtime: WireRuntime): WorkerClient {
  const target = grpcTarget(url);
  const creds = grpc.credentials.createInsecure();
  return runtime === 'tokenspeed'
    ? { runtime, client: new TokenSpeedSchedulerClient(target, creds, GRPC_CHANNEL_OPTIONS) }
    : { runtime, client: new VllmEngineClient(target, creds, GRPC_CHANNEL_OPTIONS) };
}

function unary<Req, Res>(fn: (req: Req, md: grpc.Metadata, opts: Partial<grpc.CallOptions>, cb: (err: grpc.ServiceError | null, res: Res) => void) => unknown, req: Req, timeoutMs: number): Promise<Res> {
  return new Promise((resolve, reject) => {
    fn(req, new grpc.Metadata(), { deadline: Date.now() + timeoutMs }, (err, res) => (err ? reject(err) : resolve(res)));
  });
}

export interface WorkerProbe {
  url: string;
  reachable: boolean;
  runtime?: WireRuntime;
  healthy?: boolean;
  healthMessage?: string;
  /** Labels as discovery derives them (operator labels are merged over these by the registry). */
  labels: Record<string, string>;
  error?: string;
}

function describeGrpcError(err: unknown): string {
  const e = err as grpc.ServiceError;
  if (typeof e?.code === 'number') return `${grpc.status[e.code] ?? e.code}: ${e.details || e.message}`;
  return String((err as Error)?.message ?? err);
}

function setLabel(labels: Record<string, string>, key: string, value: unknown): void {
  if (value === undefined || value === null || value === '') return;
  if (Array.isArray(value)) {
    if (value.length) labels[key] = value.join(',');
    return;
  }
  labels[key] = String(value);
}

/** One HealthCheck on an already connected client (both protocols share the message shapes). */
export async function healthOf(c: WorkerClient, timeoutMs: number): Promise<{ healthy: boolean; message: string }> {
  return c.runtime === 'tokenspeed' ? unary(c.client.healthCheck.bind(c.client), {}, timeoutMs) : unary(c.client.healthCheck.bind(c.client), {}, timeoutMs);
}

/** The labels GetModelInfo and GetServerInfo give, per the gateway's conventions. */
export async function discoverLabels(c: WorkerClient, timeoutMs: number): Promise<Record<string, string>> {
  const labels: Record<string, string> = {};
  const model = c.runtime === 'tokenspeed' ? await unary(c.client.getModelInfo.bind(c.client), {}, timeoutMs) : await unary(c.client.getModelInfo.bind(c.client), {}, timeoutMs);
  setLabel(labels, 'model_path', model.modelPath);
  setLabel(labels, 'served_model_name', model.servedModelName);
  setLabel(labels, 'model_type', model.modelType);
  setLabel(labels, 'architectures', model.architectures);
  setLabel(labels, 'supports_vision', model.supportsVision ? 'true' : undefined);
  if (c.runtime === 'tokenspeed') {
    const server = await unary(c.client.getServerInfo.bind(c.client), {}, timeoutMs);
    if ('modelDtype' in model) {
      setLabel(labels, 'model_dtype', model.modelDtype);
      setLabel(labels, 'multimodal_encoder_dtype', model.multimodalEncoderDtype);
    }
    setLabel(labels, 'shm_namespace_id', server.schedulerInfo?.shm_namespace_id);
    setLabel(labels, 'tokenspeed_version', server.tokenspeedVersion);
  } else {
    const server = await unary(c.client.getServerInfo.bind(c.client), {}, timeoutMs);
    setLabel(labels, 'server_type', server.serverType);
    setLabel(labels, 'shm_namespace_id', server.shmNamespaceId);
  }
  return labels;
}

/**
 * Detect the runtime (unless given) and read the worker's labels. Never throws: an
 * unreachable or confused worker comes back with `reachable: false` and the reason.
 */
export async function probeWorker(url: string, options: { runtime?: WireRuntime; timeoutMs?: number } = {}): Promise<WorkerProbe> {
  const timeoutMs = options.timeoutMs ?? 3000;
  const candidates: WireRuntime[] = options.runtime ? [options.runtime] : ['tokenspeed', 'vllm'];
  let clients: WorkerClient[];
  try {
    clients = candidates.map((r) => connectWorker(url, r));
  } catch (err) {
    return { url, reachable: false, labels: {}, error: (err as Error).message };
  }
  try {
    const answers = await Promise.allSettled(clients.map((c) => healthOf(c, timeoutMs)));
    const answered = answers.flatMap((a, i) => (a.status === 'fulfilled' ? [{ client: clients[i]!, health: a.value }] : []));
    if (answered.length === 0) {
      const reasons = answers.map((a, i) => `${candidates[i]}: ${describeGrpcError((a as PromiseRejectedResult).reason)}`);
      return { url, reachable: false, labels: {}, error: `no worker protocol answered HealthCheck (${reasons.join('; ')})` };
    }
    if (answered.length > 1) {
      return { url, reachable: true, labels: {}, error: 'the worker answers both the TokenSpeed and the vLLM HealthCheck; set runtime in its worker entry' };
    }
    const { client, health } = answered[0]!;
    try {
      const labels = await discoverLabels(client, timeoutMs);
      return { url, reachable: true, runtime: client.runtime, healthy: health.healthy, healthMessage: health.message, labels };
    } catch (err) {
      return { url, reachable: true, runtime: client.runtime, healthy: health.healthy, healthMessage: health.message, labels: {}, error: `reading model/server info failed: ${describeGrpcError(err)}` };
    }
  } finally {
    for (const c of clients) c.client.close();
  }
}
