// Which transport mode and SHM threshold a worker gets, and why (docs/configuration.md,
// "Precedence").
//
// Highest first, separately for each knob:
//   1. worker   the worker's own multimodal_tensor_transport / multimodal_shm_min_bytes
//   2. router   router config (YAML, CLI flag or programmatic API)
//   3. env      SMG_MM_TENSOR_TRANSPORT / SMG_MM_SHM_MIN_BYTES
//      env_legacy  their deprecated SMG_TOKENSPEED_MM_* aliases (only when the canonical is unset/blank)
//   4. default  inline, 65536
//
// Whose overrides apply under disaggregation: an image's tensors follow the worker that
// reads them (its encode worker under EPD, the prefill worker under PD), each by its own
// settings. A worker that reads no pixels itself (a prefill next to encode workers, a decode)
// shows the settings of the worker that does (the first encode worker, else the first
// prefill worker), and says whose they are.
//
// Unlike SMG, which folds this once at start-up, every value keeps its provenance: the
// winning layer, the raw value of every layer (including those it beat), and warnings.
import type { EnvVariableReading, TransportEnvironment } from '../config/env-schema.ts';
import type { ConfigOrigins } from '../config/origins.ts';
import { TRANSPORT_KNOBS, type RouterConfig, type TransportKnob, type TransportKnobValues, type WorkerSpec } from '../config/schema.ts';
import { decideTransport, type TransportDecision } from './decision.ts';
import { readFailedReason } from './vocabulary.ts';
import type { LayerReading, LayerState, ResolvedKnob, ResolvedWorkerTransport, TransportLayer } from './resolution-schema.ts';

export interface TransportResolutionInput {
  /** The worker's own overrides; undefined resolves what a worker without overrides gets. */
  worker?: WorkerSpec;
  /** Every configured worker, for the disaggregation rule; defaults to [worker]. */
  workers?: readonly WorkerSpec[];
  router: Pick<RouterConfig, 'multimodal_tensor_transport' | 'multimodal_shm_min_bytes'>;
  /** Where router and worker values came from (see loadRouterConfig). */
  origins?: ConfigOrigins;
  env: TransportEnvironment;
  /** The worker's runtime, when its protocol has no /dev/shm lane (its engine says so): a note says its tensors travel inline. */
  inlineOnlyRuntime?: string;
}

/**
 * What resolution needs to know of a worker list, found once per list (a config snapshot's
 * list never changes): each entry's index, the first encode and prefill worker. Looking them
 * up per worker made resolving every worker quadratic (4,000 workers: 57 s).
 */
interface WorkerListIndex {
  index: Map<WorkerSpec, number>;
  encode: WorkerSpec | undefined;
  prefill: WorkerSpec | undefined;
}
const listIndexes = new WeakMap<readonly WorkerSpec[], WorkerListIndex>();

function listIndex(workers: readonly WorkerSpec[]): WorkerListIndex {
  let found = listIndexes.get(workers);
  if (!found) {
    found = { index: new Map(), encode: undefined, prefill: undefined };
    workers.forEach((w, i) => {
      if (!found!.index.has(w)) found!.index.set(w, i);
      if (w.worker_type === 'encode') found!.encode ??= w;
      if (w.worker_type === 'prefill') found!.prefill ??= w;
    });
    listIndexes.set(workers, found);
  }
  return found;
}

/** The worker whose overrides govern requests that involve `worker` (disaggregation, docs/configuration.md). */
export function transportOverrideWorker(worker: WorkerSpec, workers: readonly WorkerSpec[]): { worker: WorkerSpec; index: number; why?: string } {
  const list = listIndex(workers);
  const indexOf = (w: WorkerSpec) => list.index.get(w) ?? -1;
  if (worker.worker_type === 'encode' || worker.worker_type === 'regular') return { worker, index: indexOf(worker) };
  const encode = list.encode;
  if (encode) return { worker: encode, index: indexOf(encode), why: `tensors go to the encode worker; ${encode.url}'s overrides apply` };
  if (worker.worker_type === 'decode') {
    const prefill = list.prefill;
    if (prefill) return { worker: prefill, index: indexOf(prefill), why: `tensors go to the prefill worker; ${prefill.url}'s overrides apply` };
  }
  return { worker, index: indexOf(worker) };
}

function envLayer<T>(layer: 'env' | 'env_legacy', reading: EnvVariableReading, value: T | undefined, winnerFound: boolean): LayerReading<T> {
  const raw = reading.raw ?? null;
  if (reading.state === 'valid') return { layer, name: reading.name, raw, value: value ?? null, state: winnerFound ? 'beaten' : 'won' };
  return { layer, name: reading.name, raw, value: null, state: reading.state === 'not_consulted' ? 'not_consulted' : reading.state };
}

function resolveKnob<K extends TransportKnob>(
  knob: K,
  input: TransportResolutionInput,
  owner: { worker?: WorkerSpec; index: number },
): ResolvedKnob<TransportKnobValues[K]> {
  type V = TransportKnobValues[K];
  const layers: LayerReading<V>[] = [];
  let winner: { value: V; source: TransportLayer } | undefined;
  const take = (layer: TransportLayer, value: V | undefined): LayerState => {
    if (value === undefined) return 'unset';
    if (winner) return 'beaten';
    winner = { value, source: layer };
    return 'won';
  };

  const workerValue = owner.worker?.[knob] as V | undefined;
  const workerKey = owner.index >= 0 ? `workers[${owner.index}].${knob}` : `worker.${knob}`;
  layers.push({
    layer: 'worker',
    name: workerKey,
    origin: input.origins?.[workerKey],
    raw: workerValue ?? null,
    value: workerValue ?? null,
    state: take('worker', workerValue),
  });

  const routerValue = input.router[knob] as V | undefined;
  layers.push({
    layer: 'router',
    name: knob,
    origin: input.origins?.[knob],
    raw: routerValue ?? null,
    value: routerValue ?? null,
    state: take('router', routerValue),
  });

  const env = input.env[knob];
  const envValue = env.value as V | undefined;
  const canonical = envLayer<V>('env', env.canonical, env.source === 'env' ? envValue : undefined, winner !== undefined);
  if (canonical.state === 'won') winner = { value: envValue!, source: 'env' };
  layers.push(canonical);
  const legacy = envLayer<V>('env_legacy', env.legacy, env.source === 'env_legacy' ? envValue : undefined, winner !== undefined);
  if (legacy.state === 'won') winner = { value: envValue!, source: 'env_legacy' };
  layers.push(legacy);

  const defaultValue = TRANSPORT_KNOBS[knob].defaultValue as V;
  layers.push({ layer: 'default', name: 'built-in default', raw: defaultValue, value: defaultValue, state: take('default', defaultValue) });

  const decided = winner ?? { value: defaultValue, source: 'default' as const };
  for (const l of layers) if (l.origin === undefined) delete l.origin;
  return { value: decided.value, source: decided.source, layers, warnings: [...env.warnings] };
}

export function resolveWorkerTransport(input: TransportResolutionInput): ResolvedWorkerTransport {
  const workers = input.workers ?? (input.worker ? [input.worker] : []);
  const owner = input.worker ? transportOverrideWorker(input.worker, workers) : { worker: undefined, index: -1 };
  const notes: string[] = [];
  if ('why' in owner && owner.why) notes.push(owner.why);
  const mode = resolveKnob('multimodal_tensor_transport', input, owner);
  if (mode.value === 'rdma') notes.push('rdma has no lane in this router yet: tensors travel inline');
  if (input.inlineOnlyRuntime !== undefined && (mode.value === 'shm' || mode.value === 'auto')) {
    notes.push(
      `${input.inlineOnlyRuntime} carries tensors inline only (its TensorData has no /dev/shm handle): mode ${mode.value} travels inline (runtime_inline_only)`,
    );
  }
  const index = input.worker ? (listIndex(workers).index.get(input.worker) ?? -1) : -1;
  const origin = index >= 0 ? (input.origins?.[`workers[${index}]`] ?? input.origins?.[`workers[${index}].url`]) : undefined;
  return {
    url: input.worker?.url ?? '(any worker without overrides)',
    ...(origin !== undefined ? { origin } : {}),
    worker_type: input.worker?.worker_type ?? 'regular',
    overrides_from: owner.worker?.url ?? '(none)',
    multimodal_tensor_transport: mode,
    multimodal_shm_min_bytes: resolveKnob('multimodal_shm_min_bytes', input, owner),
    notes,
  };
}

/** Every configured worker's resolution (or, with none configured, what any worker would get). */
export function resolveConfiguredWorkers(
  config: RouterConfig,
  env: TransportEnvironment,
  origins: ConfigOrigins,
  /** What each worker's runtime says of its lane, when known (the engine table's laneFacts of its declared runtime). */
  runtimeOf: (worker: WorkerSpec) => { name: string; shmLane: boolean } | undefined,
  /** The note for a worker whose runtime is not known here, under shm or auto (the runtime decides, once detected). */
  unknownRuntimeNote?: string,
): ResolvedWorkerTransport[] {
  if (config.workers.length === 0) return [resolveWorkerTransport({ router: config, env, origins })];
  return config.workers.map((worker) => {
    const runtime = runtimeOf(worker);
    const resolved = resolveWorkerTransport({
      worker,
      workers: config.workers,
      router: config,
      env,
      origins,
      ...(runtime && !runtime.shmLane ? { inlineOnlyRuntime: runtime.name } : {}),
    });
    const mode = resolved.multimodal_tensor_transport.value;
    if (!runtime && unknownRuntimeNote && (mode === 'shm' || mode === 'auto')) resolved.notes.push(unknownRuntimeNote);
    return resolved;
  });
}

/** What the router knows about its own side of the /dev/shm lane. */
export interface ShmHostFacts {
  shmWritable: boolean;
  routerToken: string | undefined;
}

export interface WorkerTransport {
  resolved: ResolvedWorkerTransport;
  decision: TransportDecision;
  minBytes: number;
}

/**
 * The transport one request uses for one worker: the precedence over the request's own
 * config snapshot, then the per-request decision from the worker's advertised token.
 */
export function transportForWorker(input: {
  spec: WorkerSpec;
  config: RouterConfig;
  env: TransportEnvironment;
  origins?: ConfigOrigins;
  labels: Readonly<Record<string, string>>;
  reachable: boolean;
  host: ShmHostFacts;
  /** What the worker's engine says about its protocol; undefined while its runtime is not known (discovery decides). */
  runtime?: { name: string; shmLane: boolean } | undefined;
  /** The worker failed to read our /dev/shm files (its error): its lane stays inline until reset. */
  shmLaneBroken?: string | undefined;
}): WorkerTransport {
  const inlineOnly = input.runtime && !input.runtime.shmLane ? input.runtime.name : undefined;
  const resolved = resolveWorkerTransport({
    worker: input.spec,
    workers: input.config.workers,
    router: input.config,
    env: input.env,
    ...(input.origins ? { origins: input.origins } : {}),
    ...(inlineOnly ? { inlineOnlyRuntime: inlineOnly } : {}),
  });
  const decision = decideTransport({
    mode: resolved.multimodal_tensor_transport.value,
    shmLane: input.runtime?.shmLane ?? true,
    shmWritable: input.host.shmWritable,
    routerToken: input.host.routerToken,
    workers: [{ url: input.spec.url, worker_type: input.spec.worker_type, shm_namespace_id: input.labels.shm_namespace_id, reachable: input.reachable }],
  });
  if (decision.shmEnabled && input.shmLaneBroken !== undefined) {
    const reason = readFailedReason(resolved.multimodal_tensor_transport.value);
    return {
      resolved,
      decision: { shmEnabled: false, reason, worker: input.spec.url, detail: input.shmLaneBroken },
      minBytes: resolved.multimodal_shm_min_bytes.value,
    };
  }
  return { resolved, decision, minBytes: resolved.multimodal_shm_min_bytes.value };
}
