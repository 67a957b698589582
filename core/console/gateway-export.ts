// The applied configuration restated for the real gateway (SMG): the `smg launch` line an
// operator runs, one `POST /workers` body per worker, and a note for every setting SMG
// cannot express or treats differently.
//
// Mapping rule: a router setting becomes a flag only when `smg launch` has that flag with the
// same meaning; its value is written in SMG's own spelling (policies and modes are snake_case
// / lowercase there too). Settings with a built-in default that differs from SMG's (host,
// policy, request timeout, health-check interval) are always emitted, so the gateway does
// what this router does rather than what SMG defaults to. The two transport knobs are emitted
// only when set: "unset" hands the decision to the gateway's environment, exactly as here.
// Per-worker settings exist only in the POST /workers body (SMG's WorkerSpec JSON).
//
// Based on reading (stored copies, not live):
// - smg-project/smg model_gateway/src/main.rs at 003bcd0377be (the clap `CliArgs`: Worker
//   Configuration, Routing Policy, PD Disaggregation, Multimodal, Request Handling, Health
//   Checks and Tokenizer headings), and a later revision of it that adds the RDMA flags.
//   The lightseekorg/smg revisions of that file available (1cb0593, 059da7a) predate the
//   multimodal flags, least_load and --encode.
// - smg-project/smg crates/protocols/src/worker.rs at 003bcd0377be (`WorkerSpec`, the POST
//   /workers body; `TransportMode`, `RuntimeType`, `WorkerType`; `ConnectionMode::from_url`
//   in a later revision).
// - smg-project/smg model_gateway/src/worker/builder.rs (no setter for the per-worker
//   multimodal fields) and docs/reference/configuration.md, the revision that describes SMG
//   v1.11.0 ("does not copy them onto registered workers, so per-worker values have no effect").
// - lightseekorg/smg model_gateway/src/core/steps/worker/local/create_worker.rs at 13a74d6
//   (posted labels are merged over the labels the worker advertises).
// - lightseekorg/smg crates/protocols/src/worker.rs and model_gateway/src/workflow/steps/local/
//   drain_workers.rs at 73da68c (`WorkerStatus::Draining`, shown as status "draining" by GET
//   /workers, is entered only by the worker removal workflow, for drain_settle_secs, default 5,
//   before the worker is removed; `RuntimeType` is serde lowercase).
import { DEFAULT_PIXEL_CACHE_MB, PIXEL_CACHE_ENV } from '../config/pixel-cache-setting.ts';
import type { z } from 'zod';
import {
  DEFAULT_BOOTSTRAP_PORT,
  DEFAULT_TRANSPORT_MODE,
  knownRuntime,
  RouterConfigSchema,
  TRANSPORT_KNOBS,
  type RouterConfig,
  type WireRuntime,
  type WorkerSpec,
} from '../config/schema.ts';
import { capabilitiesOf, declaredRuntime, runtimesWhere } from '../engines/table.ts';
import type { GatewayExportSchema } from './contract.ts';

export type GatewayExport = z.output<typeof GatewayExportSchema>;

export interface GatewayExportOptions {
  /** Worker urls never exported (the router's embedded reference worker). */
  excludeUrls?: ReadonlySet<string>;
  /** The runtime this router detected on each worker it reached (by url): a worker whose entry leaves it `unspecified` is exported with it. */
  detectedRuntimes?: ReadonlyMap<string, WireRuntime>;
  /** Workers the operator drained on this router (operator state of this run): each gets a note on the gateway's nearest equivalent. */
  drainedUrls?: ReadonlySet<string>;
}

// SMG's own default: the CLI refuses port 0, so a "pick a free port" config falls back to it.
const SMG_DEFAULT_PORT = 30000;
// SMG's default priority; a worker registered by url alone gets it.
const SMG_DEFAULT_PRIORITY = 50;

/** Request limits and policies of this router that `smg launch` cannot express (max_body_bytes is --max-payload-size). */
const REQUEST_LIMITS_WITHOUT_SMG_FLAG = [
  'limit_mm_per_prompt',
  'max_request_image_pixels',
  'max_image_bytes',
  'max_request_image_bytes',
  'body_timeout_secs',
  'media_fetch_timeout_secs',
  'allowed_media_domains',
  'allow_private_media_hosts',
  'preprocess_memory_bytes',
  'multimodal_shm_max_outstanding_bytes',
] as const satisfies ReadonlyArray<keyof RouterConfig>;

/** One shell word: bare when it holds only characters no POSIX shell treats specially, else single-quoted. */
export function shellQuote(value: string): string {
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(value)) return value;
  return `'${value.replaceAll("'", `'\\''`)}'`;
}

function isIpv6Literal(host: string): boolean {
  return host.includes(':') && !host.startsWith('[');
}

/** SMG joins host and port into one socket address, so an IPv6 literal needs its brackets. */
function bracketHost(host: string): string {
  return isIpv6Literal(host) ? `[${host}]` : host;
}

/** Where a client on the same machine reaches a server bound to `host` (a wildcard bind is not an address to send to). */
function reachableHost(host: string): string {
  const bare = host.replace(/^\[(.*)\]$/, '$1');
  if (bare === '0.0.0.0') return '127.0.0.1';
  if (bare === '::') return '[::1]';
  return bracketHost(host);
}

function quoted(value: string | number): string {
  return typeof value === 'number' ? String(value) : `'${value}'`;
}

function list(urls: readonly string[]): string {
  return urls.join(', ');
}

/** The JSON SMG's POST /workers deserializes into its WorkerSpec, carrying this worker's own settings. */
function workerBody(worker: WorkerSpec, detected: WireRuntime | undefined): Record<string, unknown> {
  const body: Record<string, unknown> = {
    url: worker.url,
    worker_type: worker.worker_type,
    // SMG's WorkerSpec defaults connection_mode to http; our workers always speak gRPC.
    connection_mode: 'grpc',
    // SMG's canonical field name (it also accepts `runtime` as an alias).
    // A known runtime (its entry's, else the one detected here) by its SMG name: SMG's RuntimeType
    // is serde lowercase (tokenspeed, vllm, sglang, as ours); `unspecified` has SMG detect it.
    runtime_type: knownRuntime(worker.runtime, detected),
    priority: worker.priority,
  };
  const labelKeys = Object.keys(worker.labels).sort();
  if (labelKeys.length > 0) body.labels = Object.fromEntries(labelKeys.map((k) => [k, worker.labels[k]]));
  if (worker.multimodal_tensor_transport !== undefined) body.multimodal_tensor_transport = worker.multimodal_tensor_transport;
  if (worker.multimodal_shm_min_bytes !== undefined) body.multimodal_shm_min_bytes = worker.multimodal_shm_min_bytes;
  return body;
}

/** SMG takes whole seconds (u64); rounding up keeps a short timeout from becoming 0 (none). */
function wholeSeconds(setting: string, value: number, notes: string[]): number {
  if (Number.isInteger(value)) return value;
  const rounded = Math.ceil(value);
  notes.push(`${setting} = ${value} is not a whole number of seconds; SMG takes whole seconds, so the command uses ${rounded}.`);
  return rounded;
}

export function exportForGateway(config: RouterConfig, options: GatewayExportOptions = {}): GatewayExport {
  const notes: string[] = [];
  const exclude = options.excludeUrls ?? new Set<string>();
  const excluded = config.workers.filter((w) => exclude.has(w.url));
  const workers = config.workers.filter((w) => !exclude.has(w.url));
  if (excluded.length > 0) {
    notes.push(
      `workers ${list(excluded.map((w) => w.url))} ${excluded.length === 1 ? 'is' : 'are'} left out: excluded from the export (the router's embedded reference worker is not part of a real deployment).`,
    );
  }

  const argv = ['smg', 'launch'];

  const host = bracketHost(config.host);
  if (host !== config.host)
    notes.push(`host = '${config.host}' is written --host ${host}: SMG parses host and port as one socket address, which needs an IPv6 literal in brackets.`);
  argv.push('--host', host);

  let port = config.port;
  if (port === 0) {
    port = SMG_DEFAULT_PORT;
    notes.push(
      `port = 0 (pick a free port) has no SMG equivalent: SMG requires a port above 0, so the command uses --port ${SMG_DEFAULT_PORT} and the curl lines target it.`,
    );
  }
  argv.push('--port', String(port));

  if (config.model_path !== undefined) argv.push('--model-path', config.model_path);
  else
    notes.push(
      `model_path is unset (this router then uses its bundled demo model); the command has no --model-path, so the gateway must load its tokenizer from what the workers report.`,
    );

  argv.push('--policy', config.policy);
  if (config.policy === 'least_load') {
    notes.push(
      `policy = 'least_load' is written --policy least_load, but SMG's least_load picks the lowest expected wait from the engines' load reports (queued and in-flight tokens over throughput, plus KV pressure) where this router picks the fewest requests in flight, so the two can choose differently.`,
    );
  }

  argv.push('--request-timeout-secs', String(wholeSeconds('request_timeout_secs', config.request_timeout_secs, notes)));
  argv.push('--health-check-interval-secs', String(wholeSeconds('health_check_interval_secs', config.health_check_interval_secs, notes)));
  // SMG's --max-payload-size bounds the whole request body as max_body_bytes does (its default is 512 MiB).
  argv.push('--max-payload-size', String(config.max_body_bytes));
  const defaults = RouterConfigSchema.parse({}) as Record<string, unknown>;
  const changed = REQUEST_LIMITS_WITHOUT_SMG_FLAG.filter((key) => config[key] !== undefined && JSON.stringify(config[key]) !== JSON.stringify(defaults[key]));
  notes.push(
    changed.length > 0
      ? `${changed.map((key) => `${key} = ${JSON.stringify(config[key])}`).join(', ')} ${changed.length === 1 ? 'has' : 'have'} no smg launch flag, nor do this router's other request limits: the gateway does not apply them, so a request refused here may be accepted there.`
      : `the request limits (${REQUEST_LIMITS_WITHOUT_SMG_FLAG.slice(0, 3).join(', ')}, …) have no smg launch flag: the gateway does not apply them, so a request refused here (too many images or pixels, a private image URL) may be accepted there.`,
  );

  const mode = TRANSPORT_KNOBS.multimodal_tensor_transport;
  if (config.multimodal_tensor_transport !== undefined) {
    argv.push(mode.flag, config.multimodal_tensor_transport);
    if (config.multimodal_tensor_transport === 'rdma') {
      notes.push(
        `multimodal_tensor_transport = 'rdma' is written ${mode.flag} rdma: this router has no RDMA lane and sends those tensors inline, while SMG pulls pixel tensors to ${runtimesWhere((c) => c.gateway.rdmaLane)} workers over its NIXL RDMA lane when it is built with the mm-rdma feature and given --rdma-listen-ip (not exported; without both it stays inline too).`,
      );
    }
  } else {
    notes.push(
      `multimodal_tensor_transport is unset, so the command has no ${mode.flag}: the gateway then reads ${mode.env} (or the deprecated ${mode.legacyEnv}) from its own environment and otherwise uses ${DEFAULT_TRANSPORT_MODE}, as this router does.`,
    );
  }
  const threshold = TRANSPORT_KNOBS.multimodal_shm_min_bytes;
  if (config.multimodal_shm_min_bytes !== undefined) {
    argv.push(threshold.flag, String(config.multimodal_shm_min_bytes));
  } else {
    notes.push(
      `multimodal_shm_min_bytes is unset, so the command has no ${threshold.flag}: the gateway then reads ${threshold.env} (or the deprecated ${threshold.legacyEnv}) from its own environment and otherwise uses ${threshold.defaultValue}, as this router does.`,
    );
  }

  // The gateway's pixel cache is an in-memory LRU of preprocessed images, off by default; ours
  // keeps the same thing as files in /dev/shm, on by default (docs/performance.md, "The pixel cache").
  if (config.multimodal_pixel_cache_mb !== undefined) {
    argv.push('--mm-pixel-cache-mb', String(config.multimodal_pixel_cache_mb));
  } else {
    notes.push(
      `multimodal_pixel_cache_mb is unset, so the command has no --mm-pixel-cache-mb: the gateway then reads ${PIXEL_CACHE_ENV} from its own environment and otherwise keeps its pixel cache off, where this router uses ${DEFAULT_PIXEL_CACHE_MB} MiB.`,
    );
  }

  // Disaggregation is a start-up routing mode in SMG, chosen for the whole gateway, as here.
  const ofType = (t: WorkerSpec['worker_type']) => workers.filter((w) => w.worker_type === t);
  const regular = ofType('regular').map((w) => w.url);
  const roles = [...ofType('prefill'), ...ofType('decode'), ...ofType('encode')];
  if (workers.length === 0) {
    notes.push(`workers is empty${excluded.length > 0 ? ' after the exclusion' : ''}, so the command registers none; add workers later with POST /workers.`);
  } else if (config.disaggregation === 'none') {
    if (regular.length > 0) argv.push('--worker-urls', ...regular);
    if (roles.length > 0)
      notes.push(
        `disaggregation = 'none': the ${roles.length} prefill, decode and encode worker${roles.length === 1 ? '' : 's'} (${list(roles.map((w) => w.url))}) get no request here, and are left off the command line (their POST /workers bodies are still listed).`,
      );
  } else {
    argv.push(config.disaggregation === 'epd' ? '--epd-disaggregation' : '--pd-disaggregation');
    // SMG reads a bootstrap port after each --encode and --prefill URL: written always, so it is
    // the port this router gives that worker's requests (its bootstrap_port, else 8998).
    const bootstrap = (w: WorkerSpec) => String(w.bootstrap_port ?? DEFAULT_BOOTSTRAP_PORT);
    for (const w of ofType('encode')) argv.push('--encode', w.url, bootstrap(w));
    for (const w of ofType('prefill')) argv.push('--prefill', w.url, bootstrap(w));
    for (const w of ofType('decode')) argv.push('--decode', w.url);
    if (config.disaggregation === 'epd') {
      argv.push('--encode-policy', config.encode_policy);
      notes.push(
        `disaggregation = 'epd' is written --epd-disaggregation, which SMG supports for gRPC ${runtimesWhere((c) => c.gateway.epdEncode)} workers only; SMG releases without the multimodal transport have no --encode flag at all. SMG decides each request's transport once, by its first encode worker's settings, and sends SHM only when every encode worker of the request shares /dev/shm; this router decides per encode worker.`,
      );
    }
    if (config.prefill_policy !== undefined) argv.push('--prefill-policy', config.prefill_policy);
    if (config.decode_policy !== undefined) argv.push('--decode-policy', config.decode_policy);
  }

  const exported = workerExports(workers, config, port, argv, notes, options.detectedRuntimes ?? new Map(), options.drainedUrls ?? new Set());

  return { command: argv.map(shellQuote).join(' '), argv, workers: exported, usage: usageOf(workers, argv), notes };
}

/** Each worker's POST /workers body and curl line, and the notes on what the gateway does with its settings. */
function workerExports(
  workers: readonly WorkerSpec[],
  config: RouterConfig,
  port: number,
  argv: readonly string[],
  notes: string[],
  detectedRuntimes: ReadonlyMap<string, WireRuntime>,
  drainedUrls: ReadonlySet<string>,
): GatewayExport['workers'] {
  const gateway = `http://${reachableHost(config.host)}:${port}/workers`;
  return workers.map((worker, i) => {
    const detected = detectedRuntimes.get(worker.url);
    const body = workerBody(worker, detected);
    const curl = [
      'curl',
      '-sS',
      ...(gateway.includes('[') ? ['-g'] : []),
      '-X',
      'POST',
      gateway,
      '-H',
      'content-type: application/json',
      '-d',
      JSON.stringify(body),
    ]
      .map(shellQuote)
      .join(' ');
    const which = `workers[${i}] (${worker.url})`;
    if (worker.runtime === 'unspecified' && detected !== undefined)
      notes.push(
        `${which} runtime is unspecified in the configuration: its body says runtime_type '${detected}', the runtime this router detected on it (registered by url, the gateway detects it too).`,
      );

    if (drainedUrls.has(worker.url)) {
      notes.push(
        `${which} is drained on this router (out of rotation until returned; state of this run, not configuration), but the command line and its body register it in rotation: SMG has no drain that returns a worker to rotation. Its status "draining" (GET /workers) is entered only on the way out: DELETE /workers/{worker_id} drains the worker for drain_settle_secs (default 5 s) and then removes it, and registering it again (its curl line) returns it.`,
      );
    }
    if (worker.url.startsWith('unix://')) {
      notes.push(
        `${which} url = '${worker.url}' is a unix socket: SMG dials only http(s)://, grpc(s):// and ipc:// (ZMQ) workers, so the url is listed as is but the gateway cannot reach this worker until it also listens on grpc://host:port.`,
      );
    }
    const overrides: string[] = [];
    if (worker.multimodal_tensor_transport !== undefined) overrides.push(`multimodal_tensor_transport = ${quoted(worker.multimodal_tensor_transport)}`);
    if (worker.multimodal_shm_min_bytes !== undefined) overrides.push(`multimodal_shm_min_bytes = ${quoted(worker.multimodal_shm_min_bytes)}`);
    if (overrides.length > 0) {
      notes.push(
        `${which} ${overrides.join(' and ')} ${overrides.length === 1 ? 'is' : 'are'} in its POST /workers body, which SMG accepts, but SMG (v1.11.0) does not copy the per-worker multimodal fields onto the registered worker, so on the gateway this worker follows the gateway-wide transport settings instead (this router applies the override).`,
      );
    }
    const declared = declaredRuntime(worker.runtime);
    const mode = worker.multimodal_tensor_transport ?? config.multimodal_tensor_transport;
    if (declared && !capabilitiesOf(declared).shmLane && (mode === 'shm' || mode === 'auto')) {
      notes.push(
        `${which} runtime = '${worker.runtime}': ${capabilitiesOf(declared).label}'s TensorData has no /dev/shm handle, so the gateway, like this router, sends its tensors inline although the mode is '${mode}'.`,
      );
    }
    const namespace = worker.labels.shm_namespace_id;
    if (namespace !== undefined) {
      notes.push(
        `${which} labels.shm_namespace_id = '${namespace}' is posted as a label, and SMG, like this router, lets a posted label win over the one the worker advertises, so 'auto' trusts it; but SMG compares it with the gateway host's own /dev/shm namespace, so it must be that host's <boot_id>:<st_dev>, not this router's.`,
      );
    }
    const extras = bodyOnlySettings(worker);
    if (extras.length > 0 && argv.includes(worker.url)) {
      notes.push(
        `${which} ${extras.join(', ')} ${extras.length === 1 ? 'exists' : 'exist'} only in its POST /workers body: the command line registers a worker by url alone (no labels, priority ${SMG_DEFAULT_PRIORITY}, runtime detected) and SMG refuses to register a url twice, so to keep ${extras.length === 1 ? 'it' : 'them'} drop this url from the command and run its curl line once the gateway is up.`,
      );
    }
    return { url: worker.url, body, curl };
  });
}

/** What a worker's POST /workers body says, and the gateway applies, that registering it by url on the command line does not (its transport overrides SMG accepts but does not apply: see the notes). */
function bodyOnlySettings(worker: WorkerSpec): string[] {
  const extras: string[] = [];
  if (Object.keys(worker.labels).length > 0)
    extras.push(
      `labels = ${JSON.stringify(
        Object.fromEntries(
          Object.keys(worker.labels)
            .sort()
            .map((k) => [k, worker.labels[k]]),
        ),
      )}`,
    );
  if (worker.priority !== SMG_DEFAULT_PRIORITY) extras.push(`priority = ${worker.priority}`);
  if (worker.runtime !== 'unspecified') extras.push(`runtime = '${worker.runtime}'`);
  return extras;
}

/**
 * Which of the two ways to register each worker: the command line (by url alone) or its POST
 * /workers body (with its settings), never both for one url: SMG's worker creation refuses a
 * url it already has ("Worker <url> already exists"), so the second registration fails and
 * the worker keeps what the first one gave it.
 */
function usageOf(workers: readonly WorkerSpec[], argv: readonly string[]): string {
  const both =
    'Register each worker one way, not both: a url on the command line and also POSTed is refused the second time ("Worker <url> already exists"), and the worker keeps what the first registration gave it.';
  if (workers.length === 0) return 'No worker to register: start the gateway with the command, then POST /workers for each worker you add.';
  const onLine = workers.filter((w) => argv.includes(w.url));
  const rich = onLine.filter((w) => bodyOnlySettings(w).length > 0).map((w) => w.url);
  const offLine = workers.filter((w) => !argv.includes(w.url)).map((w) => w.url);
  const parts: string[] = [];
  if (rich.length === 0 && offLine.length === 0)
    parts.push(
      'Use the command line: it registers every worker, and their POST /workers bodies add nothing the gateway applies. The bodies are for registering the same workers on a gateway that is already running, instead of the command line.',
    );
  else if (rich.length > 0)
    parts.push(
      `Use the command line for the workers whose body adds nothing, and for ${rich.join(', ')} remove the url from the command and run its curl line once the gateway is up: their bodies carry settings the command line cannot (see the notes).`,
    );
  if (offLine.length > 0)
    parts.push(
      `${offLine.join(', ')} ${offLine.length === 1 ? 'is' : 'are'} not on the command line: register ${offLine.length === 1 ? 'it' : 'them'} with the curl line${offLine.length === 1 ? '' : 's'}.`,
    );
  return `${parts.join(' ')} ${both}`;
}
