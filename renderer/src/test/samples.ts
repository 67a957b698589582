// What the console answers, as samples for the renderer's tests: each built through the
// contract's own schemas (a command's output, a stream's payload), so a sample is something
// the real console could send. Tests override what they are about.
import {
  commands,
  DECISION_REASONS,
  RouterConfigSchema,
  streams,
  type CommandOutput,
  type ConfigDraft,
  type ConfigView,
  type Overview,
  type RouterConfig,
  type SecondAggregate,
  type TensorEvent,
  type WorkerView,
} from '../../../core/console/contract.ts';

export const WORKER_A = 'grpc://127.0.0.1:50051';
export const WORKER_B = 'grpc://127.0.0.1:50052';

type Decision = WorkerView['decision'];
type Resolution = WorkerView['resolution'];
type Layer = Resolution['multimodal_tensor_transport']['layers'][number]['layer'];

/** A configuration with its defaults filled in, as config.get gives it. */
export function routerConfig(input: ConfigDraft = { workers: [{ url: WORKER_A }] }): RouterConfig {
  return RouterConfigSchema.parse({ port: 0, ...input });
}

/** An environment layer with neither variable set. */
function unsetEnvironment() {
  const knob = <K extends string>(knob: K, canonical: string, legacy: string) => ({
    knob,
    canonical: { name: canonical, state: 'unset' as const },
    legacy: { name: legacy, state: 'unset' as const },
    warnings: [],
  });
  return {
    multimodal_tensor_transport: knob('multimodal_tensor_transport', 'SMG_MM_TENSOR_TRANSPORT', 'SMG_TOKENSPEED_MM_TENSOR_TRANSPORT'),
    multimodal_shm_min_bytes: knob('multimodal_shm_min_bytes', 'SMG_MM_SHM_MIN_BYTES', 'SMG_TOKENSPEED_MM_SHM_MIN_BYTES'),
    warnings: [],
  };
}

/** config.get's answer. */
export function configView(over: Partial<ConfigView> = {}): ConfigView {
  const config = over.config ?? routerConfig();
  return commands['config.get'].output.parse({
    revision: 1,
    config,
    origins: Object.fromEntries(config.workers.map((w, i) => [`workers[${i}]`, `router.yaml:${3 + i}:5`])),
    env: unsetEnvironment(),
    appliedAt: 1_700_000_000_000,
    client: 'start',
    file: { path: '/home/op/.config/mmtc/router.yaml', drifted: false, driftDiff: [], driftIssues: [], driftWarnings: [] },
    restartOnly: ['host', 'port', 'model_path'],
    startFlags: [],
    defaults: RouterConfigSchema.parse({}),
    ...over,
  });
}

/** A decision for a worker's next request, in the backend's words for its reason. */
export function decision(reason: keyof typeof DECISION_REASONS = 'mode_inline', outcome: Decision['outcome'] = 'inline'): Decision {
  return { shmEnabled: outcome !== 'inline', reason, outcome, explanation: DECISION_REASONS[reason] };
}

/**
 * One knob resolved the way resolve.ts does for the layers given: the highest set layer wins,
 * the lower set ones are beaten, the built-in default is always set.
 */
export function knob<T extends string | number>(
  defaultValue: T,
  set: Partial<Record<Exclude<Layer, 'default' | 'env_legacy'>, T>>,
  names: Record<Layer, string>,
) {
  const order: Layer[] = ['worker', 'router', 'env', 'env_legacy', 'default'];
  const valueOf = (layer: Layer): T | undefined => (layer === 'default' ? defaultValue : layer === 'env_legacy' ? undefined : set[layer]);
  const source = order.find((l) => valueOf(l) !== undefined)!;
  return {
    value: valueOf(source)!,
    source,
    layers: order.map((layer) => {
      const value = valueOf(layer);
      return {
        layer,
        name: names[layer],
        ...(value !== undefined && layer !== 'default' ? { origin: layer === 'env' ? names.env : 'router.yaml:2:1' } : {}),
        raw: value ?? null,
        value: value ?? null,
        state: value === undefined ? ('unset' as const) : layer === source ? ('won' as const) : ('beaten' as const),
      };
    }),
    warnings: [],
  };
}

/** A worker's resolution: mode and threshold from the layers given (else the built-in defaults). */
export function resolution(
  url: string,
  mode: Parameters<typeof knob<string>>[1] = {},
  threshold: Parameters<typeof knob<number>>[1] = {},
  workerType: Resolution['worker_type'] = 'regular',
): Resolution {
  return commands['workers.list'].output.shape.workers.element.shape.resolution.parse({
    url,
    worker_type: workerType,
    overrides_from: url,
    multimodal_tensor_transport: knob('inline', mode, {
      worker: `workers["${url}"].multimodal_tensor_transport`,
      router: 'multimodal_tensor_transport',
      env: 'SMG_MM_TENSOR_TRANSPORT',
      env_legacy: 'SMG_TOKENSPEED_MM_TENSOR_TRANSPORT',
      default: 'built-in default',
    }),
    multimodal_shm_min_bytes: knob(65536, threshold, {
      worker: `workers["${url}"].multimodal_shm_min_bytes`,
      router: 'multimodal_shm_min_bytes',
      env: 'SMG_MM_SHM_MIN_BYTES',
      env_legacy: 'SMG_TOKENSPEED_MM_SHM_MIN_BYTES',
      default: 'built-in default',
    }),
    notes: [],
  });
}

/** One worker of workers.list: healthy, TokenSpeed, sharing our /dev/shm, inline by default. */
export function workerView(url: string = WORKER_A, over: Partial<WorkerView> = {}): WorkerView {
  return commands['workers.list'].output.shape.workers.element.parse({
    url,
    spec: { url, runtime: 'tokenspeed', worker_type: 'regular', labels: {}, priority: 50 },
    origin: 'router.yaml:3:5',
    embedded: false,
    runtime: 'tokenspeed',
    health: 'healthy',
    lastError: null,
    lastCheckedAt: 1_700_000_000_000,
    discoveredLabels: {},
    labels: {},
    token: 'boot-1:dev-1',
    tokenMatch: 'equal',
    inFlight: 0,
    drainedAt: null,
    trafficShare: 0,
    resolution: resolution(url),
    decision: decision(),
    shmLane: null,
    samplingDefaults: null,
    encoderDtype: { dtype: 'bfloat16', source: 'default', warning: null },
    kvHandoff: null,
    model: null,
    ...over,
  });
}

/** workers.list's answer. */
export function workersList(workers: WorkerView[] = [workerView()], revision = 1): CommandOutput<'workers.list'> {
  return commands['workers.list'].output.parse({ revision, workers });
}

type Verdict = Overview['verdicts'][number];
/** One worker's line in the overview's verdicts. */
export function verdict(url: string = WORKER_A, over: Partial<Verdict> = {}): Verdict {
  return { url, health: 'healthy', embedded: false, role: 'regular', readsPixels: true, mode: 'inline', minBytes: 65536, decision: decision(), ...over };
}

/** The overview command's answer (and the overview stream's payload): one healthy worker, nothing outstanding, no warning. */
export function overview(over: Partial<Overview> = {}): Overview {
  return streams.overview.parse({
    host: {
      token: 'boot-1:dev-1',
      tokenProblem: null,
      shmDir: '/dev/shm',
      shmWritable: true,
      shmError: null,
      shmFreeBytes: 8 * 2 ** 30,
      shmTotalBytes: 16 * 2 ** 30,
    },
    files: {
      count: 0,
      bytes: 0,
      cacheFiles: 0,
      cacheBytes: 0,
      otherFiles: 0,
      otherBytes: 0,
      orphans: 0,
      orphanBytes: 0,
      suspicious: 0,
      outstandingBytes: 0,
      maxOutstandingBytes: 4 * 2 ** 30,
    },
    router: { url: 'http://127.0.0.1:30000', model: 'demo-vl', family: 'Qwen2-VL, Qwen2.5-VL', pid: 4242 },
    config: { file: '/home/op/.config/mmtc/router.yaml', revision: 1, drifted: false, restartChanges: [] },
    verdicts: [verdict()],
    workers: { total: 1, healthy: 1, unhealthy: 0, discovering: 0, draining: 0 },
    pixelCache: null,
    warnings: [],
    health: 'ok',
    critical: [],
    ...over,
  });
}

/** One traffic event: an inline encoder tensor of an API request. */
export function tensorEvent(over: Partial<TensorEvent> = {}): TensorEvent {
  return streams.traffic.shape.events.element.parse({
    time: 1_700_000_000_000,
    revision: 1,
    requestId: 'chatcmpl-1',
    source: 'api',
    worker: WORKER_A,
    runtime: 'tokenspeed',
    tensor: 'encoder_input',
    shape: [1, 3, 448, 448],
    dtype: 'float32',
    nbytes: 2_408_448,
    path: 'inline',
    reason: 'mode_inline',
    writeMicros: 0,
    leg: 'regular',
    ...over,
  });
}

/** One second's aggregate with `inline` tensors (bytes likewise) and nothing else. */
export function secondAggregate(second: number, inline: number): SecondAggregate {
  return streams.traffic.shape.seconds.element.parse({
    second,
    tensors: { inline, shm: 0, remote: 0 },
    bytes: { inline, shm: 0, remote: 0 },
    shmWriteFailures: 0,
  });
}

type Step = CommandOutput<'workers.diagnose'>['steps'][number];
/** One step of the auto checklist. */
export function diagnosisStep(id: Step['id'], ok: boolean | null, detail: string, remedy?: string): Step {
  return { id, label: id.replace(/_/g, ' '), ok, detail, ...(remedy ? { remedy } : {}) };
}

/** What an apply answers: the new revision and its diff. */
export function applyResult(revision: number, over: Partial<CommandOutput<'config.apply'>> = {}): CommandOutput<'config.apply'> {
  return commands['config.apply'].output.parse({ revision, diff: [], file: '/home/op/.config/mmtc/router.yaml', untilRestart: [], ...over });
}
