// The configuration surface of the router, as zod schemas: each schema is at once the
// TypeScript type, the run-time validation and the operator-facing error text
// ("expected inline, shm, auto or rdma"). Field names follow the gateway we interoperate
// with (SMG), so a worker entry can be posted to it unchanged.
//
// The two transport knobs are optional on purpose, at router and worker level: "not set"
// must stay distinguishable from "set to the default", or the env layer below could never
// win and provenance would lie (docs/configuration.md, "Precedence").
import { PixelCacheMbSchema } from './pixel-cache-setting.ts';
import { z } from 'zod';

export const TRANSPORT_MODES = ['inline', 'shm', 'auto', 'rdma'] as const;
export const TRANSPORT_MODES_EXPECTED = 'expected inline, shm, auto or rdma';

export const TransportModeSchema = z.enum(TRANSPORT_MODES, { error: TRANSPORT_MODES_EXPECTED });
export type TransportMode = z.infer<typeof TransportModeSchema>;

export const SHM_MIN_BYTES_EXPECTED = 'expected a non-negative integer number of bytes (e.g. 65536)';

/** Tensors with nbytes >= this go through /dev/shm; 0 means every tensor, even empty ones. */
export const ShmMinBytesSchema = z.int({ error: SHM_MIN_BYTES_EXPECTED }).min(0, { error: SHM_MIN_BYTES_EXPECTED });

export const DEFAULT_TRANSPORT_MODE: TransportMode = 'inline';
export const DEFAULT_SHM_MIN_BYTES = 65536;

/**
 * The gRPC protocols this router speaks, by name: the one list of them. It lives here, in the
 * lowest layer, because a worker's `runtime` is a configuration value; everything a runtime
 * means (its wire format, its /dev/shm lane, its encoder dtype) is its engine's
 * (core/engines/table.ts), and nothing outside core/engines/ and core/refworker/ names one.
 */
export const WIRE_RUNTIMES = ['tokenspeed', 'vllm', 'sglang'] as const;
export type WireRuntime = (typeof WIRE_RUNTIMES)[number];

export const RUNTIMES = [...WIRE_RUNTIMES, 'unspecified'] as const;
export const RuntimeSchema = z.enum(RUNTIMES, { error: `expected ${RUNTIMES.slice(0, -1).join(', ')} or ${RUNTIMES.at(-1)}` });
export type Runtime = z.infer<typeof RuntimeSchema>;

/**
 * A worker's runtime as far as it is known: its entry's, else the one the router detected on it
 * (discovery), else `unspecified`. What exports write (the YAML, the gateway's runtime_type), so
 * a detected worker is not exported as `unspecified`.
 */
export function knownRuntime(runtime: Runtime, detected: WireRuntime | undefined): Runtime {
  return runtime === 'unspecified' ? (detected ?? 'unspecified') : runtime;
}

export const WORKER_TYPES = ['regular', 'prefill', 'decode', 'encode'] as const;
export const WorkerTypeSchema = z.enum(WORKER_TYPES, { error: 'expected regular, prefill, decode or encode' });
export type WorkerType = z.infer<typeof WorkerTypeSchema>;

export const POLICIES = ['round_robin', 'least_load'] as const;
export const PolicySchema = z.enum(POLICIES, { error: 'expected round_robin or least_load' });

/**
 * How requests are served (the gateway's start-up routing modes): `none`, by one regular worker
 * each; `pd`, by a prefill and a decode worker; `epd`, with every image encoded by an encode
 * worker first (docs/router.md, "Disaggregated serving").
 */
export const DISAGGREGATION_MODES = ['none', 'pd', 'epd'] as const;
export const DisaggregationSchema = z.enum(DISAGGREGATION_MODES, { error: 'expected none, pd or epd' });
export type Disaggregation = z.infer<typeof DisaggregationSchema>;

/** How an image's encode worker is picked (the gateway's --encode-policy choices; consistent_hashing keeps an image on one encode worker). */
export const ENCODE_POLICIES = ['consistent_hashing', 'round_robin', 'random'] as const;
export const EncodePolicySchema = z.enum(ENCODE_POLICIES, { error: 'expected consistent_hashing, round_robin or random' });

/** The gateway's default bootstrap port for a prefill or encode worker given without one. */
export const DEFAULT_BOOTSTRAP_PORT = 8998;
const BOOTSTRAP_PORT_EXPECTED = 'expected an integer port 1-65535';

const WORKER_URL_EXPECTED =
  'expected grpc://host:port or unix:///path/to/socket (an absolute path without . or .. segments, empty segments or control characters)';

/** grpc://host:port (host may be a [v6] literal) or unix:///absolute/path. */
export const WorkerUrlSchema = z.string({ error: WORKER_URL_EXPECTED }).refine(isWorkerUrl, { error: WORKER_URL_EXPECTED });

function isWorkerUrl(url: string): boolean {
  if (url.startsWith('unix:///')) {
    // The path is what gRPC connects to as written: `unix:///../../var/run/docker.sock` or a
    // newline inside would name another socket than the one the operator reads in the list.
    const segments = url.slice('unix:///'.length).split('/');
    // eslint-disable-next-line no-control-regex -- control characters are exactly what a socket path may not hold
    return url.length <= 4096 && !/[\u0000-\u001f\u007f]/.test(url) && segments.every((s) => s !== '' && s !== '.' && s !== '..');
  }
  const m = /^grpc:\/\/(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9._-]+):(\d{1,5})$/.exec(url);
  return m !== null && Number(m[2]) >= 1 && Number(m[2]) <= 65535;
}

/** Labels one worker may carry, and their sizes: what discovery advertises is a handful. */
export const MAX_LABELS = 32;
const LABEL_NAME_EXPECTED = 'expected a string label name of 1 to 63 characters';
const LABEL_VALUE_EXPECTED = 'expected a string label value of at most 256 characters (quote numbers and booleans)';

export const LabelsSchema = z
  .record(
    z.string({ error: LABEL_NAME_EXPECTED }).min(1, { error: LABEL_NAME_EXPECTED }).max(63, { error: LABEL_NAME_EXPECTED }),
    z.string({ error: LABEL_VALUE_EXPECTED }).max(256, { error: LABEL_VALUE_EXPECTED }),
    { error: 'expected a map of string labels' },
  )
  .refine((labels) => Object.keys(labels).length <= MAX_LABELS, { error: `expected at most ${MAX_LABELS} labels` });

export const WorkerSpecSchema = z.strictObject({
  url: WorkerUrlSchema,
  runtime: RuntimeSchema.default('unspecified'),
  worker_type: WorkerTypeSchema.default('regular'),
  labels: LabelsSchema.default({}),
  priority: z
    .int({ error: 'expected an integer priority 0-100' })
    .min(0, { error: 'expected an integer priority 0-100' })
    .max(100, { error: 'expected an integer priority 0-100' })
    .default(50),
  multimodal_tensor_transport: TransportModeSchema.optional(),
  multimodal_shm_min_bytes: ShmMinBytesSchema.optional(),
  /** A prefill or encode worker's bootstrap server (where decode takes the KV, prefill the embeddings); DEFAULT_BOOTSTRAP_PORT when unset. */
  bootstrap_port: z
    .int({ error: BOOTSTRAP_PORT_EXPECTED })
    .min(1, { error: BOOTSTRAP_PORT_EXPECTED })
    .max(65535, { error: BOOTSTRAP_PORT_EXPECTED })
    .optional(),
});
export type WorkerSpec = z.output<typeof WorkerSpecSchema>;
export type WorkerSpecInput = z.input<typeof WorkerSpecSchema>;

const PORT_EXPECTED = 'expected an integer port 0-65535 (0 picks a free one)';
export const PortSchema = z.int({ error: PORT_EXPECTED }).min(0, { error: PORT_EXPECTED }).max(65535, { error: PORT_EXPECTED });

/**
 * Every duration's accepted range, in seconds: the one place it is stated (validation, the
 * error text, docs/configuration.md). A degenerate value is refused rather than obeyed:
 * `health_check_interval_secs: 1e-300` ran health checks back to back (a core busy), a
 * request or body timeout of 1e-300 failed every request, and a huge one is a timer that
 * never fires (Node clamps timers past 2^31 ms to 1 ms).
 */
export const DURATION_RANGES = {
  request_timeout_secs: { min: 1, max: 86_400 },
  health_check_interval_secs: { min: 0.1, max: 3_600 },
  body_timeout_secs: { min: 1, max: 3_600 },
  media_fetch_timeout_secs: { min: 1, max: 600 },
} as const;
export type DurationKey = keyof typeof DURATION_RANGES;

export function durationExpected(key: DurationKey): string {
  const { min, max } = DURATION_RANGES[key];
  return `expected a number of seconds from ${min} to ${max}`;
}

const seconds = (key: DurationKey) => {
  const expected = durationExpected(key);
  return z.number({ error: expected }).min(DURATION_RANGES[key].min, { error: expected }).max(DURATION_RANGES[key].max, { error: expected });
};

/**
 * Workers one configuration may list. A single-box console routes to dozens; 10,000 took a
 * 53 s apply with /health unanswered throughout, two descriptors per worker, and a file the
 * next start could not get through (docs/reliability.md). Past this the whole configuration
 * is refused before any worker is looked at.
 */
export const MAX_WORKERS = 128;
export const MAX_WORKERS_EXPECTED = `expected at most ${MAX_WORKERS} workers (MAX_WORKERS, docs/configuration.md)`;
const BYTES_EXPECTED = 'expected a positive integer number of bytes';
const bytes = () => z.int({ error: BYTES_EXPECTED }).positive({ error: BYTES_EXPECTED });

/**
 * The smallest a request limit in bytes may be: 1 KiB. The smallest chat request that names a
 * model and carries one short message with one image reference is a few hundred bytes
 * (`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://…"}}]}]}`),
 * and the smallest real image file is about as large; a limit under that (`max_body_bytes: 5`)
 * refuses every request with a 413 that names a meaningless limit.
 */
export const MIN_LIMIT_BYTES = 1024;
const limitBytes = (what: string) => {
  const expected = `expected an integer number of bytes of at least ${MIN_LIMIT_BYTES} (1 KiB): a smaller limit refuses every ${what}`;
  return z.int({ error: expected }).min(MIN_LIMIT_BYTES, { error: expected });
};

const PIXELS_EXPECTED = 'expected a positive integer number of pixels (width × height, e.g. 64000000)';
const pixels = () => z.int({ error: PIXELS_EXPECTED }).positive({ error: PIXELS_EXPECTED });

const MEDIA_DOMAIN_EXPECTED = 'expected a host name such as images.example.com (no scheme, port, path or wildcard)';
/** A host name (or IP literal) as an allowlist entry: what the URL's host must equal. */
export const MediaDomainSchema = z
  .string({ error: MEDIA_DOMAIN_EXPECTED })
  .refine((d) => /^(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.?$/i.test(d) || /^\[?[0-9a-f:.]+\]?$/i.test(d), {
    error: MEDIA_DOMAIN_EXPECTED,
  });

/** Items of each modality one request may carry (vLLM's --limit-mm-per-prompt). */
export const LimitMmPerPromptSchema = z.strictObject({
  image: z
    .int({ error: 'expected a whole number of images, 0 or more' })
    .min(0, { error: 'expected a whole number of images, 0 or more' })
    .max(1000, { error: 'expected at most 1000 images' }),
});

/** The request limits every request is admitted against (docs/router.md, "Limits"). */
export const DEFAULT_LIMITS = {
  limit_mm_per_prompt: { image: 16 },
  max_request_image_pixels: 64_000_000,
  max_image_bytes: 20 * 1024 * 1024,
  max_request_image_bytes: 64 * 1024 * 1024,
  max_body_bytes: 64 * 1024 * 1024,
  body_timeout_secs: 30,
  media_fetch_timeout_secs: 10,
  preprocess_memory_bytes: 1024 * 1024 * 1024,
} as const;

/** The worker types each serving mode routes requests to (a worker of another type takes no part). */
export const ROLES_ROUTED: Record<Disaggregation, readonly WorkerType[]> = {
  none: ['regular'],
  pd: ['prefill', 'decode'],
  epd: ['encode', 'prefill', 'decode'],
};

/** Whether a worker of this type gets pixel tensors under the mode: all but the decode, and the prefill next to encode workers (its own tensors are then the images' metadata, a few bytes). */
export function readsPixelTensors(mode: Disaggregation, type: WorkerType): boolean {
  return !((mode !== 'none' && type === 'decode') || (mode === 'epd' && type === 'prefill'));
}

/** Whether a worker of this type runs a bootstrap server (where decode takes the KV, prefill the embeddings): prefill and encode workers. */
export function hasBootstrapServer(type: WorkerType): boolean {
  return type === 'prefill' || type === 'encode';
}

/** Where a worker's bootstrap server is: its URL's host, and its bootstrap_port or the default. */
export function bootstrapAddress(worker: Pick<WorkerSpec, 'url' | 'bootstrap_port'>): { host: string; port: number } | undefined {
  const m = /^grpc:\/\/(\[[0-9a-fA-F:.]+\]|[^:/]+):\d+$/.exec(worker.url);
  return m ? { host: m[1]!.replace(/^\[|\]$/g, ''), port: worker.bootstrap_port ?? DEFAULT_BOOTSTRAP_PORT } : undefined;
}

/** Which rule of a disaggregated topology an issue breaks (its zod params' `topology`), so the flags' loader can say it in flags (core/config/load.ts). */
export type TopologyProblem =
  | { kind: 'bootstrap_port_unused' }
  | { kind: 'role_not_routed' }
  | { kind: 'needs_grpc_url' }
  | { kind: 'shared_bootstrap' }
  | { kind: 'missing_role'; role: WorkerType };

/**
 * What a disaggregated configuration must hold (each issue at the key to fix): the roles its
 * mode needs, no worker of a role it does not use, a bootstrap server only where one exists
 * (prefill, encode), reachable at a host (a grpc:// URL), and not shared by two workers.
 */
function topologyIssues(config: {
  disaggregation: Disaggregation;
  workers: readonly WorkerSpec[];
}): Array<{ path: (string | number)[]; message: string; problem: TopologyProblem }> {
  const issues: Array<{ path: (string | number)[]; message: string; problem: TopologyProblem }> = [];
  const mode = config.disaggregation;
  const count = (t: WorkerType) => config.workers.filter((w) => w.worker_type === t).length;
  const bootstrapped = new Map<string, number>();
  config.workers.forEach((w, i) => {
    const hasServer = hasBootstrapServer(w.worker_type);
    if (w.bootstrap_port !== undefined && !hasServer)
      issues.push({
        path: ['workers', i, 'bootstrap_port'],
        message: `bootstrap_port is for prefill and encode workers (their bootstrap server); this worker is ${w.worker_type}`,
        problem: { kind: 'bootstrap_port_unused' },
      });
    if (mode === 'none') return;
    if (!ROLES_ROUTED[mode].includes(w.worker_type)) {
      issues.push({
        path: ['workers', i, 'worker_type'],
        message: `${w.worker_type === 'encode' ? 'an' : 'a'} ${w.worker_type} worker takes no part under disaggregation ${mode}, which routes to ${ROLES_ROUTED[mode].join(', ')} workers: give it one of those types, or remove it`,
        problem: { kind: 'role_not_routed' },
      });
      return;
    }
    if (!hasServer) return;
    const at = bootstrapAddress(w);
    if (!at) {
      issues.push({
        path: ['workers', i, 'url'],
        message: `${w.worker_type === 'encode' ? 'an' : 'a'} ${w.worker_type} worker under disaggregation ${mode} needs a grpc://host:port URL: its bootstrap server is reached at that host`,
        problem: { kind: 'needs_grpc_url' },
      });
      return;
    }
    const key = `${at.host}:${at.port}`;
    const first = bootstrapped.get(key);
    if (first !== undefined) {
      issues.push({
        path: ['workers', i, w.bootstrap_port === undefined ? 'url' : 'bootstrap_port'],
        message: `workers[${first}] already has its bootstrap server at ${key}${w.bootstrap_port === undefined ? ` (${DEFAULT_BOOTSTRAP_PORT}, the default)` : ''}: each prefill or encode worker on one host needs a bootstrap_port of its own`,
        problem: { kind: 'shared_bootstrap' },
      });
    } else bootstrapped.set(key, i);
  });
  if (mode !== 'none') {
    for (const role of ROLES_ROUTED[mode]) {
      if (count(role) === 0)
        issues.push({
          path: ['disaggregation'],
          message: `disaggregation ${mode} needs at least one ${role} worker (worker_type ${role}); the configuration has none`,
          problem: { kind: 'missing_role', role },
        });
    }
  }
  return issues;
}

export const RouterConfigSchema = z
  .strictObject({
    host: z.string({ error: 'expected a host name or address' }).min(1, { error: 'expected a host name or address' }).default('127.0.0.1'),
    port: PortSchema.default(30000),
    model_path: z.string({ error: 'expected a directory path' }).min(1, { error: 'expected a directory path' }).optional(),
    policy: PolicySchema.default('round_robin'),
    disaggregation: DisaggregationSchema.default('none'),
    /** The policy among prefill (decode) workers; unset: `policy`. */
    prefill_policy: PolicySchema.optional(),
    decode_policy: PolicySchema.optional(),
    encode_policy: EncodePolicySchema.default('consistent_hashing'),
    multimodal_tensor_transport: TransportModeSchema.optional(),
    multimodal_shm_min_bytes: ShmMinBytesSchema.optional(),
    /** Bytes of our files in /dev/shm at once; default: half of /dev/shm's free space at start. */
    multimodal_shm_max_outstanding_bytes: bytes().optional(),
    /** The pixel cache's budget in MiB (0: off); unset: SMG_MM_PIXEL_CACHE_MB, then 512 (pixel-cache-setting.ts). */
    multimodal_pixel_cache_mb: PixelCacheMbSchema.optional(),
    /** How an SHM hit reaches its worker: a hard link to the entry, or a copy of its own (docs/performance.md, "The pixel cache"). */
    multimodal_pixel_cache_shm: z.enum(['link', 'copy'], { error: 'expected link or copy' }).default('link'),
    request_timeout_secs: seconds('request_timeout_secs').default(600),
    health_check_interval_secs: seconds('health_check_interval_secs').default(10),
    limit_mm_per_prompt: LimitMmPerPromptSchema.default({ ...DEFAULT_LIMITS.limit_mm_per_prompt }),
    /** Width × height summed over a request's images, read from their headers before decoding. */
    max_request_image_pixels: pixels().default(DEFAULT_LIMITS.max_request_image_pixels),
    max_image_bytes: limitBytes('image').default(DEFAULT_LIMITS.max_image_bytes),
    max_request_image_bytes: limitBytes('request with an image').default(DEFAULT_LIMITS.max_request_image_bytes),
    max_body_bytes: limitBytes('request').default(DEFAULT_LIMITS.max_body_bytes),
    body_timeout_secs: seconds('body_timeout_secs').default(DEFAULT_LIMITS.body_timeout_secs),
    media_fetch_timeout_secs: seconds('media_fetch_timeout_secs').default(DEFAULT_LIMITS.media_fetch_timeout_secs),
    /** When non-empty, image URLs may only name these hosts (vLLM's --allowed-media-domains). */
    allowed_media_domains: z.array(MediaDomainSchema, { error: 'expected a list of host names' }).default([]),
    /** Let image URLs reach loopback, private and link-local addresses (never cloud metadata). */
    allow_private_media_hosts: z.boolean({ error: 'expected true or false' }).default(false),
    /** Memory images may take while they are decoded and preprocessed, all requests together. */
    preprocess_memory_bytes: bytes()
      .min(64 * 1024 * 1024, { error: 'expected at least 64 MiB (67108864 bytes)' })
      .default(DEFAULT_LIMITS.preprocess_memory_bytes),
    workers: z.array(WorkerSpecSchema, { error: 'expected a list of workers' }).max(MAX_WORKERS, { error: MAX_WORKERS_EXPECTED }).default([]),
  })
  .superRefine((config, ctx) => {
    for (const issue of topologyIssues(config)) ctx.addIssue({ code: 'custom', path: issue.path, message: issue.message, params: { topology: issue.problem } });
  });
export type RouterConfig = z.output<typeof RouterConfigSchema>;
/** What a caller may pass: every field with a default is optional. */
export type RouterConfigInput = z.input<typeof RouterConfigSchema>;

/**
 * The two per-worker transport knobs, with every name an operator may meet them under.
 * Docs, flags, env reading and provenance all read this table.
 */
export const TRANSPORT_KNOBS = {
  multimodal_tensor_transport: {
    flag: '--multimodal-tensor-transport',
    env: 'SMG_MM_TENSOR_TRANSPORT',
    legacyEnv: 'SMG_TOKENSPEED_MM_TENSOR_TRANSPORT',
    defaultValue: DEFAULT_TRANSPORT_MODE as TransportMode,
  },
  multimodal_shm_min_bytes: {
    flag: '--multimodal-shm-min-bytes',
    env: 'SMG_MM_SHM_MIN_BYTES',
    legacyEnv: 'SMG_TOKENSPEED_MM_SHM_MIN_BYTES',
    defaultValue: DEFAULT_SHM_MIN_BYTES,
  },
} as const;
export type TransportKnob = keyof typeof TRANSPORT_KNOBS;
export interface TransportKnobValues {
  multimodal_tensor_transport: TransportMode;
  multimodal_shm_min_bytes: number;
}
