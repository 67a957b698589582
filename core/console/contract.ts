// The console contract: every command the operator UI can send and every event stream it can
// hear, each with zod schemas for its input and output (or payload). The TypeScript types
// come from the schemas, and both bindings are built from this one table: Electron's
// ipcMain.handle per command (electron/main.ts) and HTTP `POST /api/<command>` with one
// WebSocket for the streams (core/console/http.ts). Adding a command is one entry here plus
// its handler in the group of core/console/handlers/ it belongs to.
//
// Errors cross either binding as `{error: {code, message, path?, issues?, details?}}` and
// the client rebuilds them into a real ContractError (errorFromWire). This module imports
// only zod and schema modules (no `node:`), so the renderer imports it as is.
import { z } from 'zod';
import { TransportEnvironmentSchema } from '../config/env-schema.ts';
import { fieldProblem, firstZodIssue, formatValue, issuesFromZod } from '../config/errors.ts';
import { PIXEL_CACHE_ENV } from '../config/pixel-cache-setting.ts';
import { RouterConfigSchema, TransportModeSchema, WorkerSpecSchema, WorkerTypeSchema, WorkerUrlSchema, type RouterConfigInput } from '../config/schema.ts';
import { CriticalStateSchema, HEALTH_STATUSES } from '../router/critical-schema.ts';
import { LEGS, SecondAggregateSchema, TensorEventSchema, TrafficSourceSchema } from '../transport/event-schema.ts';
import { RatesSchema, RateWindowSchema } from '../telemetry/rates-schema.ts';
import { ResolvedWorkerTransportSchema } from '../transport/resolution-schema.ts';
import { DECISION_OUTCOMES, DECISION_REASON_NAMES, ENCODER_DTYPES } from '../transport/vocabulary.ts';
import { WIRE_RUNTIMES } from '../config/schema.ts';
import { KV_HANDOFF_MODES } from '../engines/engine.ts';

const Empty = z.strictObject({});
const Revision = z.int().min(1);

// ---------------------------------------------------------------- shared shapes

/** One problem with a configuration: where (key path, and in YAML line:column) and what. */
export const ConfigIssueSchema = z.object({ path: z.string(), message: z.string(), line: z.int().optional(), column: z.int().optional() });
export type ConfigIssue = z.infer<typeof ConfigIssueSchema>;

/** One change between two configurations; workers are keyed by url (`workers["grpc://a:1"].priority`). */
export const DiffEntrySchema = z.object({
  path: z.string(),
  kind: z.enum(['added', 'removed', 'changed']),
  before: z.unknown().optional(),
  after: z.unknown().optional(),
});
export type DiffEntry = z.infer<typeof DiffEntrySchema>;

/**
 * A configuration as the operator edits it (the forms' draft, a rollback's configuration), typed
 * by the config schema: what RouterConfigSchema takes (a setting left out takes its default),
 * which the applied configuration (config.get's `config`) and every edit of it are. Its values
 * are checked by the command that takes it, each problem named with its key path
 * (config.validate's and config.resolve's issues, invalid_config on apply), never as an
 * invalid input: a draft holding a value typed halfway (a port of `70000`, `1.5 B`) is still
 * a draft. So on the wire it is checked only for being an object, as before it was typed.
 */
export type ConfigDraft = RouterConfigInput;
const ConfigDraftSchema = z.record(z.string(), z.unknown()) as unknown as z.ZodType<ConfigDraft, ConfigDraft>;

/**
 * A configuration the operator is working on: plain data in the YAML file's shape (a
 * ConfigDraft), or YAML text (whose errors then carry line:column).
 */
function draftInput<E extends z.ZodRawShape>(extra: E) {
  return z.union([z.strictObject({ draft: ConfigDraftSchema, ...extra }), z.strictObject({ yaml: z.string().max(1_000_000), ...extra })], {
    error: 'expected {draft: {...}} or {yaml: "..."}',
  });
}
export const DraftSchema = draftInput({});
export type Draft = z.infer<typeof DraftSchema>;

export const CONFIG_CLIENT_NAMES = ['start', 'api', 'ipc', 'http', 'router'] as const;

const DecisionSchema = z.object({
  /** SHM is used (or attempted) for tensors at or above the threshold. */
  shmEnabled: z.boolean(),
  reason: z.enum(DECISION_REASON_NAMES),
  /** What the next request will do: SHM, inline, or SHM attempted then inline (the worker is known not to share /dev/shm). */
  outcome: z.enum(DECISION_OUTCOMES),
  explanation: z.string(),
  advice: z.string().optional(),
});

/** A worker whose next request a draft would send where it cannot succeed as asked (SHM attempted to a worker known not to share /dev/shm). */
export const WorkerWarningSchema = z.object({ url: z.string(), decision: DecisionSchema, message: z.string() });
export type WorkerWarning = z.infer<typeof WorkerWarningSchema>;

/** The YAML file the applied configuration lives in, and whether it changed behind our back. */
export const ConfigFileSchema = z.object({
  path: z.string().nullable(),
  /** The file's text differs from what the console last read or wrote. */
  drifted: z.boolean(),
  /** What reloading the file would change, when drifted and the file is valid. */
  driftDiff: z.array(DiffEntrySchema),
  /** Why the drifted file cannot be reloaded as it is. */
  driftIssues: z.array(ConfigIssueSchema),
  /** Workers a reload would send through /dev/shm they are known not to read (as config.diff's warnings). */
  driftWarnings: z.array(WorkerWarningSchema),
});

/** The setting a key path belongs to: `workers[2].labels.zone` and `workers["grpc://a:1"]` -> `workers`. */
export function settingOf(path: string): string {
  return path.split(/[.[]/, 1)[0]!;
}

/** The start flag that gave the setting `path` belongs to, if a flag did (config.get's startFlags): the one rule for "set by a flag at start". */
export function startFlagFor<F extends { key: string }>(startFlags: readonly F[], path: string): F | undefined {
  const setting = settingOf(path);
  return startFlags.find((f) => f.key === setting);
}

/**
 * What a restart with the start flags would do to one running setting, in words: the one
 * wording of the toast after an apply, Overview's sync state and its until_restart warning.
 * A side a setting does not have (a worker only one of them lists, an optional key left out)
 * is said as such, never as `undefined`.
 */
export function restartChangeText(d: DiffEntry): string {
  const worker = /^workers\[("(?:[^"\\]|\\.)*")\]$/.exec(d.path);
  if (worker && d.kind !== 'changed') {
    const url = JSON.parse(worker[1]!) as string;
    return d.kind === 'removed' ? `worker ${url}: configured now, dropped by a restart` : `worker ${url}: not configured now, back after a restart`;
  }
  const side = (v: unknown) => (v === undefined ? 'unset' : JSON.stringify(v));
  return `${d.path}: ${side(d.before)} now, ${side(d.after)} after a restart`;
}

export const ConfigViewSchema = z.object({
  revision: Revision,
  config: RouterConfigSchema,
  /** Key path -> where its value came from (file:line:col, flag, env, API, console). */
  origins: z.record(z.string(), z.string()),
  env: TransportEnvironmentSchema,
  appliedAt: z.number(),
  client: z.enum(CONFIG_CLIENT_NAMES),
  file: ConfigFileSchema,
  /** Settings only a restart changes (an apply that touches them is refused). */
  restartOnly: z.array(z.string()),
  /** Settings given by flags when the console started: a restart with the same flags sets them again, whatever the file says. */
  startFlags: z.array(z.object({ key: z.string(), flag: z.string() })),
  /** The built-in defaults of every router setting. */
  defaults: RouterConfigSchema,
});
export type ConfigView = z.infer<typeof ConfigViewSchema>;

export const ValidationSchema = z.object({
  ok: z.boolean(),
  issues: z.array(ConfigIssueSchema),
  /** The validated configuration (defaults filled in), when ok. */
  config: RouterConfigSchema.optional(),
});

/** Changes a restart with the flags the router started with would undo (`before` runs now, `after` is what the restart runs). */
const UntilRestartSchema = z.array(DiffEntrySchema);

export const ApplyResultSchema = z.object({
  revision: Revision,
  diff: z.array(DiffEntrySchema),
  /** The YAML file written (atomically, the previous version kept as `.bak`), or null. */
  file: z.string().nullable(),
  /** What of this revision a restart with the start flags would set back (it is in the file; the flags win at start). */
  untilRestart: UntilRestartSchema,
});
export type ApplyResult = z.infer<typeof ApplyResultSchema>;

export const HistoryEntrySchema = z.object({
  revision: Revision,
  appliedAt: z.number(),
  client: z.enum(CONFIG_CLIENT_NAMES),
  /** The earlier revision whose configuration this one applied again (a rollback, an Undo). */
  rollbackOf: z.number().int().positive().optional(),
  /** What this revision changed against the one before it. */
  diff: z.array(DiffEntrySchema),
  /** This revision can be rolled back to (its configuration is kept). */
  restorable: z.boolean(),
  /** The whole configuration of this revision, when restorable, as a rollback would apply it now (to preview one): a revision that configures no worker keeps the running embedded reference worker, which no revision records. */
  config: RouterConfigSchema.optional(),
});

export const WORKER_HEALTH = ['healthy', 'unhealthy', 'discovering', 'draining'] as const;

/** How the worker's advertised /dev/shm token compares with the router's. */
export const TOKEN_MATCH = ['equal', 'different_shm', 'different_host', 'missing', 'router_has_none'] as const;

export const WorkerViewSchema = z.object({
  url: z.string(),
  spec: WorkerSpecSchema,
  /** Where the entry came from ("router.yaml:5:5", "embedded default", "console (HTTP)"). */
  origin: z.string().nullable(),
  /** The router's embedded reference worker (stands in while no worker is configured; never written to the file). */
  embedded: z.boolean(),
  runtime: z.enum(WIRE_RUNTIMES).nullable(),
  health: z.enum(WORKER_HEALTH),
  lastError: z.string().nullable(),
  lastCheckedAt: z.number().nullable(),
  discoveredLabels: z.record(z.string(), z.string()),
  labels: z.record(z.string(), z.string()),
  token: z.string().nullable(),
  tokenMatch: z.enum(TOKEN_MATCH),
  inFlight: z.int(),
  /**
   * Drained by the operator (workers.drain), since when (ms since the epoch): no new request is
   * routed to it, its in-flight ones finish. State of this run, not configuration: a restart
   * puts it back in rotation. null: in rotation.
   */
  drainedAt: z.number().nullable(),
  /** This worker's share of the tensors sent in the last 60 s (0-1). */
  trafficShare: z.number(),
  resolution: ResolvedWorkerTransportSchema,
  /** What auto/shm/inline decides for this worker's next request. */
  decision: DecisionSchema,
  /** Set when the worker could not read the router's /dev/shm files: its requests go inline until reset. */
  shmLane: z.object({ error: z.string(), since: z.number() }).nullable(),
  /**
   * The model's sampling defaults the worker publishes (default_sampling_params_json, as the
   * gateway reads it: core/engines/sampling.ts), which fill what a request leaves out when this
   * worker samples; `warning` when the label is not what the gateway reads (then none apply).
   * null: it publishes none.
   */
  samplingDefaults: z.object({ values: z.record(z.string(), z.number()), warning: z.string().nullable() }).nullable(),
  /**
   * The dtype this worker's encoder input travels in and what decided it (an env variable, the
   * label multimodal_encoder_dtype, the default, the runtime's rule); `warning` when that input
   * is not a dtype (then float32 is sent). null until its runtime is known.
   */
  encoderDtype: z.object({ dtype: z.enum(ENCODER_DTYPES), source: z.string(), warning: z.string().nullable() }).nullable(),
  /** A vLLM prefill worker under PD: how its KV reaches the decode worker, by its KV connector (KvHandoff). null otherwise. */
  kvHandoff: z.object({ mode: z.enum(KV_HANDOFF_MODES), connector: z.string().nullable(), says: z.string() }).nullable(),
  /**
   * The model the worker says it serves (GetModelInfo: served_model_name, else model_path; its
   * model_type), the vision family that model_type is (its label; null when no family takes
   * it), and whether that is the family the router preprocesses for (false: its images get
   * another model's tensors and token counts). null until discovery has its model_type.
   */
  model: z
    .object({ name: z.string().nullable(), modelType: z.string(), family: z.string().nullable(), sameFamily: z.boolean(), routerFamily: z.string() })
    .nullable(),
});
export type WorkerView = z.infer<typeof WorkerViewSchema>;

/** One worker call of a request (core/telemetry/requests.ts RequestLeg): times in milliseconds, from the request's arrival (startMs) or the leg's start. */
export const RequestLegSchema = z.object({
  leg: z.enum(LEGS),
  worker: z.string(),
  startMs: z.number(),
  durationMs: z.number(),
  firstTokenMs: z.number().optional(),
  /** What went wrong, in words, when this leg failed. */
  error: z.string().optional(),
  placeMs: z.number().optional(),
  image: z.int().optional(),
  attempt: z.int().optional(),
  /** Why the leg was ended early when that was not its own failure. */
  stopped: z.string().optional(),
});
export type RequestLegView = z.infer<typeof RequestLegSchema>;

/** A span of the request's own time (body, fetch, preprocess, prompt, place, worker), from its arrival. */
export const RequestPhaseSchema = z.object({ name: z.string(), startMs: z.number(), durationMs: z.number() });

/** A finished request as the router keeps it (core/telemetry/requests.ts). */
export const RequestSummarySchema = z.object({
  id: z.string(),
  time: z.number(),
  status: z.int(),
  durationMs: z.number().optional(),
  model: z.string().optional(),
  worker: z.string().optional(),
  legs: z.array(RequestLegSchema).optional(),
  /** The sampling the worker that samples was sent, by the gateway's names, and which of them the model's defaults gave (from_model_defaults). */
  sampling: z.record(z.string(), z.unknown()).optional(),
  kvHandoff: z.string().optional(),
  error: z.string().optional(),
  errorCode: z.string().optional(),
  source: TrafficSourceSchema.optional(),
  phases: z.array(RequestPhaseSchema).optional(),
  paths: z.object({ inline: z.int(), shm: z.int(), remote: z.int() }).optional(),
  /** Every tensor it placed, as Traffic listed it. */
  tensors: z.array(TensorEventSchema).optional(),
  cacheHits: z.int().optional(),
});
export type RequestSummaryView = z.infer<typeof RequestSummarySchema>;

/** A request as the Requests list shows it: its summary without the tensors themselves (their count) or its sampling. */
export const RequestRowSchema = RequestSummarySchema.omit({ tensors: true, sampling: true, phases: true }).extend({ tensorCount: z.int() });
export type RequestRow = z.infer<typeof RequestRowSchema>;

/** What the Requests list filters by (core/telemetry/requests.ts requestPasses); every field given must match. */
export const RequestFilterSchema = z.strictObject({
  status: z.enum(['ok', 'failed']).optional(),
  /** A worker any of its legs ran on. */
  worker: z.string().min(1).max(2000).optional(),
  /** A leg it had. */
  leg: z.enum(LEGS).optional(),
  model: z.string().min(1).max(500).optional(),
  /** Failed requests, and those with a leg that failed while the request still answered. */
  errorsOnly: z.boolean().optional(),
});
export type RequestFilterInput = z.infer<typeof RequestFilterSchema>;

/** The most rows one requests.list call returns. */
export const MAX_REQUEST_PAGE = 5_000;

/** A batch of the requests stream: requests that ended since the last batch, oldest first. */
export const RequestsBatchSchema = z.object({
  requests: z.array(RequestRowSchema),
  /** Requests this client did not receive because it fell behind (since it subscribed). */
  dropped: z.int(),
});
export type RequestsBatch = z.infer<typeof RequestsBatchSchema>;

export const DiagnosisStepSchema = z.object({
  id: z.enum(['reachable', 'protocol_lane', 'token_advertised', 'same_boot_id', 'same_st_dev', 'shm_writable', 'probe_file_read', 'shm_lane']),
  label: z.string(),
  /** null: not checked, because an earlier step failed. */
  ok: z.boolean().nullable(),
  detail: z.string(),
  remedy: z.string().optional(),
});

export const WarningSchema = z.object({
  kind: z.enum([
    'deprecated_env',
    'invalid_env',
    'unhealthy_worker',
    'orphan_files',
    'suspicious_files',
    'config_drift',
    'shm_not_writable',
    'no_token',
    'shm_read_failed',
    'shm_budget',
    'shm_will_fail',
    'until_restart',
    'encode_shm_split',
    'encoder_dtype_unknown',
  ]),
  message: z.string(),
  remedy: z.string(),
});

/** Where the pixel cache's budget came from (pixelCacheBudget, core/config/pixel-cache-setting.ts): the YAML key (from the file, a flag or the console), the gateway's environment variable, or the built-in default. */
export const PIXEL_CACHE_BUDGET_SOURCES = ['multimodal_pixel_cache_mb', PIXEL_CACHE_ENV, 'default'] as const;
/** Why the pixel cache is off: its budget is 0, or /dev/shm (where it keeps its entries) was not writable at start. */
export const PIXEL_CACHE_OFF_REASONS = ['budget_zero', 'shm_not_writable'] as const;

/**
 * The pixel cache as it is now (docs/performance.md, "The pixel cache"): its counts since the
 * router started (PixelCache.stats(), core/transport/pixel-cache.ts), the budget the settings
 * give and where it came from, and why it is off.
 */
export const PixelCacheViewSchema = z.object({
  /** The budget in force (0: off). */
  budgetBytes: z.number(),
  /** Bytes of the entries (each counted once, however many requests hold a link to it). */
  heldBytes: z.number(),
  entries: z.int(),
  /** Images the cache answered, and images looked up and computed. */
  hits: z.int(),
  misses: z.int(),
  /** Entries dropped for room (the cache's budget, or the /dev/shm budget a request needed). */
  evictions: z.int(),
  /** Entries dropped because their file changed under the router (a worker wrote into it) or went away. */
  tampered: z.int(),
  /** Misses that could not be kept (larger than the budget, no room in /dev/shm, a write error). */
  notStored: z.int(),
  flushes: z.int(),
  /** The budget the settings give (in force unless /dev/shm was not writable at start), which input decided it, and for the YAML key where its value came from (file:line:col, flag, console). */
  configured: z.object({ mb: z.int(), source: z.enum(PIXEL_CACHE_BUDGET_SOURCES), origin: z.string().nullable() }),
  /** Why it is off and what turns it on; null while it is on. */
  off: z.object({ reason: z.enum(PIXEL_CACHE_OFF_REASONS), message: z.string(), remedy: z.string() }).nullable(),
});
export type PixelCacheView = z.infer<typeof PixelCacheViewSchema>;

/** The pixel cache's answer for one image tensor of a traffic event (TensorEvent.cache). */
export const TENSOR_CACHE_ANSWERS = TensorEventSchema.shape.cache.unwrap().options;

export const OverviewSchema = z.object({
  host: z.object({
    token: z.string().nullable(),
    tokenProblem: z.string().nullable(),
    shmDir: z.string(),
    shmWritable: z.boolean(),
    shmError: z.string().nullable(),
    shmFreeBytes: z.number().nullable(),
    shmTotalBytes: z.number().nullable(),
  }),
  files: z.object({
    /** This router's tensor files (its pixel cache's entries not among them). */
    count: z.int(),
    bytes: z.number(),
    /** This router's pixel-cache entries, and their bytes. */
    cacheFiles: z.int(),
    cacheBytes: z.number(),
    /** Files under our names of every other owner (other routers on the host, orphans among them), and their bytes. */
    otherFiles: z.int(),
    otherBytes: z.number(),
    /** Orphans and entries that are not regular files, of every owner: the sweep's and the host's concern. */
    orphans: z.int(),
    orphanBytes: z.number(),
    suspicious: z.int(),
    /** Bytes of this router's files not yet read, against multimodal_shm_max_outstanding_bytes (null: no limit). */
    outstandingBytes: z.number(),
    maxOutstandingBytes: z.number().nullable(),
  }),
  /** The router: its URL, its model directory, the vision family that directory is detected as (its label: "LLaVA-1.5"), its pid. */
  router: z.object({ url: z.string(), model: z.string(), family: z.string(), pid: z.int() }),
  config: z.object({
    file: z.string().nullable(),
    revision: Revision,
    drifted: z.boolean(),
    /** What a restart with the start flags would change of the running configuration (null: the file on disk is not a valid configuration). */
    restartChanges: UntilRestartSchema.nullable(),
  }),
  /** Every worker's verdict for its next request, in words. */
  verdicts: z.array(
    z.object({
      url: z.string(),
      health: z.enum(WORKER_HEALTH),
      embedded: z.boolean(),
      /** Its worker_type, and whether it gets pixel tensors under the serving mode (a decode worker does not; nor a prefill next to encode workers). */
      role: WorkerTypeSchema,
      readsPixels: z.boolean(),
      mode: TransportModeSchema,
      minBytes: z.int(),
      decision: DecisionSchema,
    }),
  ),
  workers: z.object({ total: z.int(), healthy: z.int(), unhealthy: z.int(), discovering: z.int(), draining: z.int() }),
  /** The pixel cache, live (null: this router runs without one). */
  pixelCache: PixelCacheViewSchema.nullable(),
  warnings: z.array(WarningSchema),
  /** Whether requests can succeed now, as /health says it (core/router/critical.ts), and the critical states that make it so: the banner every screen shows. */
  health: z.enum(HEALTH_STATUSES),
  critical: z.array(CriticalStateSchema),
});
export type Overview = z.infer<typeof OverviewSchema>;
export type CriticalState = z.infer<typeof CriticalStateSchema>;

/** A request that ended in failure (an error status, or a stream cut short), for the rows of its tensors. */
export const RequestFailureSchema = z.object({ requestId: z.string(), status: z.int(), error: z.string().nullable() });
export type RequestFailure = z.infer<typeof RequestFailureSchema>;

export const TrafficBatchSchema = z.object({
  events: z.array(TensorEventSchema),
  /** Requests that ended in failure since the last batch (their tensors' events came before, in this batch or an earlier one). */
  failed: z.array(RequestFailureSchema),
  /** Per-second aggregates that changed since the last batch (the current second included). */
  seconds: z.array(SecondAggregateSchema),
  /** Events this client did not receive because it fell behind (since it subscribed). */
  dropped: z.int(),
});
export type TrafficBatch = z.infer<typeof TrafficBatchSchema>;

export const TEST_IMAGE_FORMATS = ['png', 'jpeg', 'webp'] as const;
export const MAX_CALIBRATION_SAMPLES = 40;

export const TestRequestResultSchema = z.object({
  status: z.int(),
  requestId: z.string().nullable(),
  revision: Revision,
  worker: z.string(),
  /** What the worker answered (the reference worker states what it received), or the error. */
  content: z.string(),
  events: z.array(TensorEventSchema),
  ms: z.number(),
});

export const CALIBRATION_WINNERS = ['shm', 'inline', 'tie'] as const;
const Spread = z.tuple([z.number(), z.number()]);

export const CalibrationPointSchema = z.object({
  width: z.int(),
  height: z.int(),
  /** Bytes of the encoder tensor at this size. */
  nbytes: z.int(),
  /** Medians. */
  inlineMs: z.number(),
  shmMs: z.number(),
  /** The middle half of the samples (25th to 75th percentile). */
  inlineSpread: Spread,
  shmSpread: Spread,
  /** The faster path when the difference is larger than the noise, else tie. */
  winner: z.enum(CALIBRATION_WINNERS),
  /** The share of (SHM, inline) sample pairs in which SHM was faster (0-1). */
  shmFasterShare: z.number(),
  inlineSamples: z.array(z.number()),
  shmSamples: z.array(z.number()),
});

export const CalibrationResultSchema = z.object({
  worker: z.string(),
  runtime: z.enum(WIRE_RUNTIMES),
  dtype: z.string(),
  samplesPerPoint: z.int(),
  points: z.array(CalibrationPointSchema),
  /** Smallest measured size SHM clearly wins from which no larger size is clearly won by inline; null: no clear crossover. */
  crossoverBytes: z.int().nullable(),
  /** The multimodal_shm_min_bytes this measurement recommends for this worker. */
  recommendedMinBytes: z.int().nullable(),
  note: z.string(),
});
export type CalibrationResult = z.infer<typeof CalibrationResultSchema>;

export const GatewayExportSchema = z.object({
  /** `smg launch …` with only the flags the gateway has, as one shell line. */
  command: z.string(),
  argv: z.array(z.string()),
  /** One `POST /workers` body per worker, with its overrides. */
  workers: z.array(z.object({ url: z.string(), body: z.record(z.string(), z.unknown()), curl: z.string() })),
  /** Which of the two to use for each worker (the command line or its POST /workers body), and what happens when both are. */
  usage: z.string(),
  /** Every setting the gateway cannot express, and what happens to it. */
  notes: z.array(z.string()),
});

// ---------------------------------------------------------------- the table

const WorkerTarget = z.strictObject({ url: WorkerUrlSchema });
const Applying = { expectedRevision: Revision };

export const commands = {
  overview: { input: Empty, output: OverviewSchema },
  'config.get': { input: Empty, output: ConfigViewSchema },
  'config.validate': { input: DraftSchema, output: ValidationSchema },
  /** What a draft would change, what of it a restart with the start flags would undo, and the workers it would send where they cannot read. */
  'config.diff': {
    input: DraftSchema,
    output: z.object({ revision: Revision, diff: z.array(DiffEntrySchema), untilRestart: UntilRestartSchema, warnings: z.array(WorkerWarningSchema) }),
  },
  /** How a draft would resolve for each of its workers (the precedence ladder before apply), with the SHM decision their next request would get. */
  'config.resolve': {
    input: DraftSchema,
    output: z.object({
      ok: z.boolean(),
      issues: z.array(ConfigIssueSchema),
      workers: z.array(z.object({ url: z.string(), resolution: ResolvedWorkerTransportSchema, decision: DecisionSchema })),
    }),
  },
  'config.apply': { input: draftInput(Applying), output: ApplyResultSchema },
  /** Parse and validate YAML text: the draft it gives and its diff against the applied revision (nothing is applied). */
  'config.importYaml': {
    input: z.strictObject({ text: z.string().max(1_000_000) }),
    output: z.object({ ok: z.boolean(), issues: z.array(ConfigIssueSchema), draft: RouterConfigSchema.optional(), diff: z.array(DiffEntrySchema) }),
  },
  'config.exportYaml': { input: Empty, output: z.object({ yaml: z.string(), revision: Revision }) },
  'config.exportForGateway': { input: Empty, output: GatewayExportSchema },
  'config.history': { input: Empty, output: z.object({ entries: z.array(HistoryEntrySchema) }) },
  'config.rollback': { input: z.strictObject({ revision: Revision, ...Applying }), output: ApplyResultSchema },
  /** Take the YAML file as it is on disk now (after drift) as the next revision. */
  'config.reloadFile': { input: z.strictObject(Applying), output: ApplyResultSchema },
  'workers.list': { input: Empty, output: z.object({ revision: Revision, workers: z.array(WorkerViewSchema) }) },
  'workers.add': {
    input: z.strictObject({ worker: WorkerSpecSchema.partial({ runtime: true, worker_type: true, labels: true, priority: true }), ...Applying }),
    output: ApplyResultSchema,
  },
  'workers.update': {
    input: z.strictObject({
      url: WorkerUrlSchema,
      worker: WorkerSpecSchema.partial({ runtime: true, worker_type: true, labels: true, priority: true }),
      ...Applying,
    }),
    output: ApplyResultSchema,
  },
  'workers.remove': { input: z.strictObject({ url: WorkerUrlSchema, ...Applying }), output: ApplyResultSchema },
  /**
   * The worker can read our /dev/shm files again: let SHM/auto use it. The auto checklist runs
   * first; while any of its checks fails the reset is refused (`checks_failed`, naming them,
   * `details.failing`) unless `force` (the operator was told and resets anyway).
   */
  'workers.resetShmLane': {
    input: z.strictObject({ url: WorkerUrlSchema, force: z.boolean().optional() }),
    output: z.object({ url: z.string(), wasBroken: z.boolean(), steps: z.array(DiagnosisStepSchema) }),
  },
  /**
   * Take a worker out of rotation (maintenance): no new request (nor, under disaggregation, a
   * leg of one) goes to it; its in-flight requests finish (`inFlight` counts them down). Not
   * written to the configuration: a restart puts it back. Draining a drained worker keeps its
   * first `drainedAt`.
   */
  'workers.drain': { input: WorkerTarget, output: z.object({ url: z.string(), drainedAt: z.number(), inFlight: z.int() }) },
  /** Put a drained worker back in rotation: it is selected again from the next request on (when healthy). */
  'workers.returnToRotation': { input: WorkerTarget, output: z.object({ url: z.string(), wasDrained: z.boolean(), inFlight: z.int() }) },
  'workers.diagnose': { input: WorkerTarget, output: z.object({ url: z.string(), steps: z.array(DiagnosisStepSchema), verdict: DecisionSchema }) },
  'traffic.snapshot': {
    input: z.strictObject({ limit: z.int().min(1).max(10_000).optional() }),
    /** `failed`: those of the events' requests that ended in failure (the router keeps the last 10,000 requests' outcomes). */
    output: z.object({ events: z.array(TensorEventSchema), seconds: z.array(SecondAggregateSchema), failed: z.array(RequestFailureSchema) }),
  },
  /** One recent request's record (the last 10,000 are kept): its status, error, legs, phases, tensors, the sampling its worker was sent, its KV handoff; null once forgotten. */
  'traffic.request': { input: z.strictObject({ requestId: z.string().min(1).max(200) }), output: RequestSummarySchema.nullable() },
  /**
   * The kept requests that pass the filter, newest first, at most `limit` (default and most
   * MAX_REQUEST_PAGE), after the request `before` when given (the next page); `matched`: how
   * many pass in all; `workers` and `models`: every one the kept requests name, for the filters.
   */
  'requests.list': {
    input: RequestFilterSchema.extend({ limit: z.int().min(1).max(MAX_REQUEST_PAGE).optional(), before: z.string().min(1).max(200).optional() }),
    output: z.object({
      requests: z.array(RequestRowSchema),
      matched: z.int(),
      kept: z.int(),
      capacity: z.int(),
      workers: z.array(z.string()),
      models: z.array(z.string()),
    }),
  },
  'traffic.sendTestRequest': {
    input: z.strictObject({ url: WorkerUrlSchema, width: z.int().min(16).max(4096), height: z.int().min(16).max(4096), format: z.enum(TEST_IMAGE_FORMATS) }),
    output: TestRequestResultSchema,
  },
  /** The tensor sizes a calibration of this worker measures (in its wire dtype), and the default samples. */
  'transport.calibrationPlan': {
    input: WorkerTarget,
    output: z.object({
      worker: z.string(),
      dtype: z.string(),
      sizes: z.array(z.object({ width: z.int(), height: z.int(), nbytes: z.int() })),
      defaultSamples: z.int(),
      /** With fewer samples per size than this, no size can have a winner: every answer is "no clear crossover". */
      minSamplesForWinner: z.int(),
    }),
  },
  'transport.calibrate': {
    input: z.strictObject({ url: WorkerUrlSchema, samples: z.int().min(1).max(MAX_CALIBRATION_SAMPLES).optional() }),
    output: CalibrationResultSchema,
  },
  'metrics.text': { input: Empty, output: z.object({ text: z.string() }) },
  /** Requests/s, error rate and p50/p99 latency per worker and leg over the last `window` (1m, 15m, 1h), with every bucket of it for a chart (docs/console.md, "Rates and latency"). */
  'metrics.rates': { input: z.strictObject({ window: RateWindowSchema }), output: RatesSchema },
  /** Drop every entry of the pixel cache (requests in flight keep the files they hold); the next request with each image computes it again. */
  'pixelCache.flush': { input: Empty, output: z.object({ dropped: z.int(), pixelCache: PixelCacheViewSchema }) },
} as const;

export const streams = {
  /** Tensor traffic, about ten batches a second while there is any. */
  traffic: TrafficBatchSchema,
  /** A new revision was applied (by anyone): refetch what depends on it. */
  config: z.object({ revision: Revision, client: z.enum(CONFIG_CLIENT_NAMES), appliedAt: z.number() }),
  /** The overview, about once a second while anyone listens, and within a few hundred milliseconds of a worker's change (health, lane). */
  overview: OverviewSchema,
  /** Requests as they end, about ten batches a second while there are any. */
  requests: RequestsBatchSchema,
  /** Progress of a running calibration. */
  calibration: z.object({ url: z.string(), done: z.int(), total: z.int(), phase: z.string() }),
} as const;

export type CommandName = keyof typeof commands;
export type StreamName = keyof typeof streams;
export type CommandInput<C extends CommandName> = z.input<(typeof commands)[C]['input']>;
export type CommandOutput<C extends CommandName> = z.output<(typeof commands)[C]['output']>;
export type StreamPayload<S extends StreamName> = z.output<(typeof streams)[S]>;
export const COMMAND_NAMES = Object.keys(commands) as CommandName[];
export const STREAM_NAMES = Object.keys(streams) as StreamName[];

export function isCommandName(name: string): name is CommandName {
  return Object.hasOwn(commands, name);
}

/** What the Electron preload exposes as `window.mmtc` (electron/preload.ts), wrapped by the renderer into a ConsoleClient. */
export type BridgeResult<C extends CommandName> = { ok: true; result: CommandOutput<C> } | ({ ok: false } & WireError);
export interface IpcBridge {
  readonly binding: 'ipc';
  invoke<C extends CommandName>(command: C, input: CommandInput<C>): Promise<BridgeResult<C>>;
  subscribe<S extends StreamName>(stream: S, listener: (payload: StreamPayload<S>) => void): () => void;
}

/** What a client of either binding offers: the UI depends on this and nothing else. */
export interface ConsoleClient {
  call<C extends CommandName>(command: C, input: CommandInput<C>): Promise<CommandOutput<C>>;
  subscribe<S extends StreamName>(stream: S, listener: (payload: StreamPayload<S>) => void): () => void;
}

// ---------------------------------------------------------------- errors across the boundary

export const ERROR_CODES = [
  'invalid_input',
  'invalid_config',
  'conflict',
  'restart_required',
  'file_drift',
  'checks_failed',
  'not_found',
  'unauthorized',
  'forbidden',
  'busy',
  'internal',
] as const;
export type ErrorCode = (typeof ERROR_CODES)[number];

/**
 * What an error carries beyond its message, per code: the one place each is stated (the
 * backend builds them, errorFromWire checks them, the UI reads them typed). A conflict: the
 * revision that runs now, the one the client edited and, when the history still holds that
 * one, what changed meanwhile. A file drift: the file and what reloading it would change. A
 * refused lane reset: the checks that still fail. Every other code carries none.
 */
export const ERROR_DETAILS = {
  conflict: z.strictObject({ currentRevision: Revision, expectedRevision: Revision, changedMeanwhile: z.array(DiffEntrySchema).optional() }),
  file_drift: z.strictObject({ diff: z.array(DiffEntrySchema), file: z.string() }),
  checks_failed: z.strictObject({ failing: z.array(DiagnosisStepSchema) }),
} as const;
/** The codes whose errors carry details (ERROR_DETAILS), and those that carry none. */
export type DetailedErrorCode = keyof typeof ERROR_DETAILS;
export type PlainErrorCode = Exclude<ErrorCode, DetailedErrorCode>;
/** The details of an error with code C (`{}` for a code that carries none). */
export type ErrorDetails<C extends ErrorCode> = C extends DetailedErrorCode ? z.output<(typeof ERROR_DETAILS)[C]> : Record<string, never>;

const PLAIN_ERROR_CODES = ERROR_CODES.filter((c): c is PlainErrorCode => !Object.hasOwn(ERROR_DETAILS, c));
const wireErrorFields = {
  message: z.string(),
  /** The input field or config key path the error is about. */
  path: z.string().optional(),
  issues: z.array(ConfigIssueSchema).optional(),
};
const detailedWireError = <C extends DetailedErrorCode>(code: C) => z.object({ code: z.literal(code), ...wireErrorFields, details: ERROR_DETAILS[code] });

export const WireErrorSchema = z.object({
  error: z.discriminatedUnion('code', [
    detailedWireError('conflict'),
    detailedWireError('file_drift'),
    detailedWireError('checks_failed'),
    z.object({ code: z.enum(PLAIN_ERROR_CODES), ...wireErrorFields, details: z.never().optional() }),
  ]),
});
export type WireError = z.infer<typeof WireErrorSchema>;

/** The arguments after `issues`: the details, required for a code that carries them. */
type DetailsArgument<C extends ErrorCode> = C extends DetailedErrorCode ? [details: ErrorDetails<C>] : [details?: ErrorDetails<C>];

/** A contract error with code C: a real Error with the code, the key path it is about, the config issues and C's details. */
export interface ContractErrorOf<C extends ErrorCode> extends Error {
  readonly name: 'ContractError';
  readonly code: C;
  readonly path: string | undefined;
  readonly issues: ConfigIssue[];
  readonly details: ErrorDetails<C>;
  toWire(): WireError;
}
/**
 * A contract error, thrown by the backend and rebuilt on the client side (errorFromWire). Its
 * type is one member per code, so `err instanceof ContractError && err.code === 'conflict'`
 * gives `err.details` the conflict's shape; `ContractError<'checks_failed'>` names one.
 */
export type ContractError<C extends ErrorCode = ErrorCode> = { [K in C]: ContractErrorOf<K> }[C];

const ContractErrorClass = class ContractError<C extends ErrorCode> extends Error {
  override readonly name = 'ContractError';
  readonly details: ErrorDetails<C>;
  constructor(
    readonly code: C,
    message: string,
    readonly path?: string,
    readonly issues: ConfigIssue[] = [],
    ...[details]: DetailsArgument<C>
  ) {
    super(message);
    // A code that carries no details has none: `{}`, as before they were typed.
    this.details = (details ?? {}) as ErrorDetails<C>;
  }

  toWire(): WireError {
    // The code and its details were given together (DetailsArgument), so this is the wire member of that code.
    return {
      error: {
        code: this.code,
        message: this.message,
        ...(this.path !== undefined ? { path: this.path } : {}),
        ...(this.issues.length ? { issues: this.issues } : {}),
        ...(Object.keys(this.details).length ? { details: this.details } : {}),
      },
    } as WireError;
  }
};
// The class, typed so that `instanceof` narrows to the union above (TypeScript narrows by the
// type of `prototype`) and `new` checks that the details fit the code.
export const ContractError = ContractErrorClass as unknown as {
  new <C extends ErrorCode>(code: C, message: string, path?: string, issues?: ConfigIssue[], ...details: DetailsArgument<C>): ContractError<C>;
  readonly prototype: ContractError;
};

/** Rebuild the error a binding carried (its details checked against its code's); anything unexpected becomes an `internal` error that says so. */
export function errorFromWire(body: unknown): ContractError {
  const parsed = WireErrorSchema.safeParse(body);
  if (!parsed.success)
    return new ContractError('internal', `the console backend answered with something that is not a contract error: ${JSON.stringify(body)?.slice(0, 200)}`);
  const e = parsed.data.error;
  // One wire member: its code and details were checked together, so they fit each other.
  return new ContractError<ErrorCode>(e.code, e.message, e.path, e.issues ?? [], ...([e.details] as DetailsArgument<ErrorCode>));
}

/** The input of a command checked against its schema: the parsed value, or an invalid_input error naming the field. */
export function parseCommandInput<C extends CommandName>(command: C, input: unknown): z.output<(typeof commands)[C]['input']> {
  const schema = commands[command].input as z.ZodType;
  const r = schema.safeParse(input ?? {});
  if (r.success) return r.data as z.output<(typeof commands)[C]['input']>;
  const { path, message } = firstZodIssue(r.error);
  throw new ContractError('invalid_input', `invalid input for ${command}${path ? ` at ${path}` : ''}: ${message}`, path || undefined);
}

/** A command's output checked against its schema: the parsed value, or an internal error naming where it does not match (the backend's check of every answer, core/console/console.ts). */
export function parseCommandOutput<C extends CommandName>(command: C, output: unknown): CommandOutput<C> {
  const checked = (commands[command].output as z.ZodType).safeParse(output);
  if (checked.success) return checked.data as CommandOutput<C>;
  const { path, message } = firstZodIssue(checked.error);
  throw new ContractError('internal', `the output of ${command} does not match the contract${path ? ` at ${path}` : ''}: ${message}`);
}

// ---------------------------------------------------------------- vocabulary the UI shows
// The renderer imports nothing from core/ but this module; these are the words and
// defaults it shows, from their one source.
export {
  DEFAULT_BOOTSTRAP_PORT,
  DEFAULT_SHM_MIN_BYTES,
  DEFAULT_TRANSPORT_MODE,
  DISAGGREGATION_MODES,
  ENCODE_POLICIES,
  hasBootstrapServer,
  LabelsSchema,
  POLICIES,
  readsPixelTensors,
  ROLES_ROUTED,
  RouterConfigSchema,
  RUNTIMES,
  ShmMinBytesSchema,
  TRANSPORT_KNOBS,
  TRANSPORT_MODES,
  TransportModeSchema,
  WORKER_TYPES,
  WorkerSpecSchema,
  WorkerUrlSchema,
} from '../config/schema.ts';
export { DEFAULT_PIXEL_CACHE_MB, PIXEL_CACHE_ENV } from '../config/pixel-cache-setting.ts';
export { DECISION_ADVICE, DECISION_REASONS, describeReason, REASON_WORDS, TENSOR_PATHS, TENSOR_REASONS } from '../transport/vocabulary.ts';
export { fieldProblem, firstZodIssue, formatValue, issuesFromZod };
export { bytesParts, formatBytes, formatMiB, threeDigits, type Quantity } from '../util/bytes.ts';
export type { TensorEvent, SecondAggregate } from '../transport/event-schema.ts';
export { RATE_WINDOWS, type RatePoint, type Rates, type RateSeries, type RateWindow } from '../telemetry/rates-schema.ts';
export { LEGS } from '../transport/event-schema.ts';
export { requestFailed, requestPasses } from '../telemetry/requests.ts';
export type { ResolvedWorkerTransport } from '../transport/resolution-schema.ts';
export type { RouterConfig, WorkerSpec } from '../config/schema.ts';
