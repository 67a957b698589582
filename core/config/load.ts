// One RouterConfig from the router layer's three inputs: the YAML file (--config), the
// command-line flags (which override the file), and nothing else: the environment is a
// separate, lower layer applied per knob at resolution time (core/transport/resolve.ts).
//
// Every router value remembers where it came from ("--port", "router.yaml:4:1") so the
// console can say which input decided it. Flag values are validated by the same schemas as
// the file, and a bad one names the flag: invalid value 'fast' for
// --multimodal-tensor-transport: expected inline, shm, auto or rdma.
import { ConfigError, firstZodIssue, type ConfigIssue } from './errors.ts';
import { flagValue, parseLoose, parseLooseBytes, parseLooseMode, parseLoosePort } from './loose.ts';
import {
  DEFAULT_BOOTSTRAP_PORT,
  ROLES_ROUTED,
  RouterConfigSchema,
  WorkerSpecSchema,
  WorkerUrlSchema,
  type RouterConfig,
  type TopologyProblem,
  type WorkerSpec,
  type WorkerType,
} from './schema.ts';
import { checkRouterConfig, type LocatedIssue } from './validate.ts';
import type { ConfigOrigins } from './origins.ts';
import { loadConfigFile } from './yaml.ts';

/** The flags shared by `mmtc router`, `mmtc serve` and `mmtc config …`, as commander hands them over. */
export interface ConfigFlags {
  config?: string;
  host?: string;
  port?: string;
  workerUrls?: string[];
  modelPath?: string;
  multimodalTensorTransport?: string;
  multimodalShmMinBytes?: string;
  pdDisaggregation?: boolean;
  epdDisaggregation?: boolean;
  /** `--prefill URL [BOOTSTRAP_PORT] …`, `--encode …`: URLs, each followed by its bootstrap port (or `none`) when given. */
  prefill?: string[];
  decode?: string[];
  encode?: string[];
  prefillPolicy?: string;
  decodePolicy?: string;
  encodePolicy?: string;
  /** The limit flags (LIMIT_FLAGS), by commander's camelCase name. */
  [limit: string]: string | string[] | boolean | undefined;
}

type LimitKey =
  | 'limit_mm_per_prompt'
  | 'max_request_image_pixels'
  | 'max_image_bytes'
  | 'max_request_image_bytes'
  | 'max_body_bytes'
  | 'body_timeout_secs'
  | 'media_fetch_timeout_secs'
  | 'allowed_media_domains'
  | 'allow_private_media_hosts'
  | 'preprocess_memory_bytes'
  | 'multimodal_shm_max_outstanding_bytes'
  | 'multimodal_pixel_cache_mb'
  | 'request_timeout_secs';

/**
 * The admission limits and media policy as flags: one row each, the YAML key it sets, how
 * its text is read (then checked by that key's schema, whose message names the flag).
 */
export const LIMIT_FLAGS: ReadonlyArray<{
  flag: string;
  key: LimitKey;
  kind: 'integer' | 'number' | 'list' | 'boolean' | 'per_modality';
  description: string;
}> = [
  {
    flag: '--limit-mm-per-prompt <limits>',
    key: 'limit_mm_per_prompt',
    kind: 'per_modality',
    description: 'most images one request may carry, as image=N or {"image": N} (default image=16)',
  },
  {
    flag: '--max-request-image-pixels <n>',
    key: 'max_request_image_pixels',
    kind: 'integer',
    description: "most pixels (width × height from the images' headers) one request's images may have in all (default 64000000)",
  },
  { flag: '--max-image-bytes <n>', key: 'max_image_bytes', kind: 'integer', description: 'largest encoded image, in bytes (default 20 MiB, at least 1 KiB)' },
  {
    flag: '--max-request-image-bytes <n>',
    key: 'max_request_image_bytes',
    kind: 'integer',
    description: 'most encoded image bytes one request may bring, all its images together (default 64 MiB, at least 1 KiB)',
  },
  { flag: '--max-body-bytes <n>', key: 'max_body_bytes', kind: 'integer', description: 'largest request body, in bytes (default 64 MiB, at least 1 KiB)' },
  {
    flag: '--body-timeout-secs <s>',
    key: 'body_timeout_secs',
    kind: 'number',
    description: 'a request body must arrive within this many seconds (default 30)',
  },
  {
    flag: '--media-fetch-timeout-secs <s>',
    key: 'media_fetch_timeout_secs',
    kind: 'number',
    description: 'an image URL must download within this many seconds (default 10)',
  },
  {
    flag: '--allowed-media-domains <host...>',
    key: 'allowed_media_domains',
    kind: 'list',
    description: 'image URLs may only name these hosts (default: any public host)',
  },
  {
    flag: '--allow-private-media-hosts',
    key: 'allow_private_media_hosts',
    kind: 'boolean',
    description: 'let image URLs reach loopback, private and link-local addresses (never cloud metadata)',
  },
  {
    flag: '--preprocess-memory-bytes <n>',
    key: 'preprocess_memory_bytes',
    kind: 'integer',
    description: 'memory images may take while being decoded and preprocessed, all requests together (default 1 GiB)',
  },
  {
    flag: '--multimodal-shm-max-outstanding-bytes <n>',
    key: 'multimodal_shm_max_outstanding_bytes',
    kind: 'integer',
    description: "most bytes of this router's tensor files in /dev/shm at once; above it tensors go inline (default: half of /dev/shm's free space at start)",
  },
  {
    flag: '--multimodal-pixel-cache-mb <mib>',
    key: 'multimodal_pixel_cache_mb',
    kind: 'integer',
    description:
      'MiB of /dev/shm for the cache of preprocessed images, so a repeated image is not computed again; 0 turns it off (default: SMG_MM_PIXEL_CACHE_MB, then 512)',
  },
  {
    flag: '--request-timeout-secs <s>',
    key: 'request_timeout_secs',
    kind: 'number',
    description: 'a request not finished by then fails with 504 (default 600)',
  },
];

/** commander's property name of a flag: --max-image-bytes -> maxImageBytes. */
function flagProperty(flag: string): string {
  return flag
    .split(' ')[0]!
    .replace(/^--/, '')
    .replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
}

/** `image=16` or `{"image": 16}` as data for limit_mm_per_prompt's schema. */
function perModality(raw: string): unknown {
  const text = raw.trim();
  if (text.startsWith('{')) {
    try {
      return JSON.parse(text);
    } catch {
      // Not JSON: the text as it is, which the schema refuses in its own words (as it does a
      // part without `=` below).
      return text;
    }
  }
  const out: Record<string, unknown> = {};
  for (const part of text.split(',')) {
    const [k, v] = part.split('=').map((x) => x.trim());
    if (!k || v === undefined) return text;
    out[k] = /^\d+$/.test(v) ? Number(v) : v;
  }
  return out;
}

export const CONFIG_FLAG_HELP: ReadonlyArray<{ flags: string; description: string }> = [
  { flags: '--config <file>', description: 'router configuration YAML file' },
  { flags: '--host <host>', description: 'address the router listens on (default 127.0.0.1)' },
  { flags: '--port <port>', description: 'port the router listens on (default 30000)' },
  {
    flags: '--worker-urls <url...>',
    description: "workers as grpc://host:port or unix:///path (replaces the file's list; entries with the same url keep their settings)",
  },
  { flags: '--model-path <dir>', description: 'model directory (config.json, tokenizer.json, preprocessor_config.json)' },
  { flags: '--multimodal-tensor-transport <mode>', description: 'router-wide tensor transport: inline, shm, auto or rdma' },
  { flags: '--multimodal-shm-min-bytes <n>', description: 'smallest tensor, in bytes, that goes through /dev/shm' },
  { flags: '--pd-disaggregation', description: 'serve every request with a prefill and a decode worker (--prefill, --decode)' },
  {
    flags: '--epd-disaggregation',
    description: 'encode every image on an encode worker first, then prefill and decode (--encode, --prefill, --decode; TokenSpeed)',
  },
  {
    flags: '--prefill <url-and-port...>',
    description: `prefill workers, each a URL optionally followed by its bootstrap port (default ${DEFAULT_BOOTSTRAP_PORT}) or none`,
  },
  { flags: '--decode <url...>', description: 'decode workers' },
  {
    flags: '--encode <url-and-port...>',
    description: `encode workers, each a URL optionally followed by its bootstrap port (default ${DEFAULT_BOOTSTRAP_PORT}) or none`,
  },
  { flags: '--prefill-policy <policy>', description: 'policy among prefill workers: round_robin or least_load (default: --policy)' },
  { flags: '--decode-policy <policy>', description: 'policy among decode workers: round_robin or least_load (default: --policy)' },
  { flags: '--encode-policy <policy>', description: "policy of an image's encode worker: consistent_hashing (default), round_robin or random" },
  ...LIMIT_FLAGS.map((f) => ({ flags: f.flag, description: f.description })),
];

export interface LoadedRouterConfig {
  config: RouterConfig;
  origins: ConfigOrigins;
  file?: string;
}

/**
 * Apply command-line flags over a validated config. All flags are checked before any is
 * applied; on error nothing changes and every bad flag is listed.
 */
export function applyConfigFlags(base: RouterConfig, flags: ConfigFlags, origins: ConfigOrigins = {}): LoadedRouterConfig {
  const issues: ConfigIssue[] = [];
  const next: RouterConfig = { ...base, workers: [...base.workers] };
  const nextOrigins: ConfigOrigins = { ...origins };
  const set = <K extends keyof RouterConfig>(key: K, flag: string, value: RouterConfig[K] | undefined) => {
    if (value === undefined) return;
    next[key] = value;
    nextOrigins[key] = flag;
  };
  const shape = RouterConfigSchema.shape;
  if (flags.host !== undefined)
    set(
      'host',
      '--host',
      flagValue('--host', flags.host, (raw) => parseLoose(shape.host, raw), issues),
    );
  if (flags.port !== undefined) set('port', '--port', flagValue('--port', flags.port, parseLoosePort, issues));
  if (flags.modelPath !== undefined)
    set(
      'model_path',
      '--model-path',
      flagValue('--model-path', flags.modelPath, (raw) => parseLoose(shape.model_path, raw), issues),
    );
  if (flags.multimodalTensorTransport !== undefined) {
    set(
      'multimodal_tensor_transport',
      '--multimodal-tensor-transport',
      flagValue('--multimodal-tensor-transport', flags.multimodalTensorTransport, parseLooseMode, issues),
    );
  }
  if (flags.multimodalShmMinBytes !== undefined) {
    set(
      'multimodal_shm_min_bytes',
      '--multimodal-shm-min-bytes',
      flagValue('--multimodal-shm-min-bytes', flags.multimodalShmMinBytes, parseLooseBytes, issues),
    );
  }
  for (const limit of LIMIT_FLAGS) {
    const raw = flags[flagProperty(limit.flag)];
    if (raw === undefined) continue;
    const name = limit.flag.split(' ')[0]!;
    const schema = shape[limit.key];
    if (limit.kind === 'boolean') {
      set(limit.key, name, raw === true || raw === 'true' ? true : undefined);
      continue;
    }
    const text = Array.isArray(raw) ? raw.join(',') : String(raw);
    const value =
      limit.kind === 'list'
        ? flagValue(
            name,
            text,
            (t) => {
              const r = schema.safeParse(
                t
                  .split(',')
                  .map((x) => x.trim())
                  .filter(Boolean),
              );
              return r.success ? { ok: true, value: r.data } : { ok: false, expected: firstZodIssue(r.error).message };
            },
            issues,
          )
        : limit.kind === 'per_modality'
          ? flagValue(
              name,
              text,
              (t) => {
                const r = schema.safeParse(perModality(t));
                if (r.success) return { ok: true, value: r.data };
                const first = firstZodIssue(r.error);
                return { ok: false, expected: first.path ? `${first.path}: ${first.message}` : 'expected image=N or {"image": N}' };
              },
              issues,
            )
          : flagValue(name, text, (t) => parseLoose(schema as never, t, { digits: true, ...(limit.kind === 'number' ? { decimal: true } : {}) }), issues);
    set(limit.key, name, value as RouterConfig[typeof limit.key] | undefined);
  }
  applyRoutingFlags(flags, issues, set);
  const listed = flagWorkers(flags, issues);
  if (listed) {
    const fileIndexByUrl = new Map(base.workers.map((w, i) => [w.url, i] as const));
    for (const key of Object.keys(nextOrigins)) if (key.startsWith('workers[')) delete nextOrigins[key];
    next.workers = listed.map(({ url, flag, worker_type, bootstrap_port }, index) => {
      const fileIndex = fileIndexByUrl.get(url);
      const given = { ...(worker_type !== 'regular' ? { worker_type } : {}), ...(bootstrap_port !== undefined ? { bootstrap_port } : {}) };
      if (fileIndex === undefined) {
        nextOrigins[`workers[${index}].url`] = flag;
        for (const k of Object.keys(given)) nextOrigins[`workers[${index}].${k}`] = flag;
        return WorkerSpecSchema.parse({ url, ...given });
      }
      // The file's entry keeps its settings; the flag gives its role (and bootstrap port).
      const prefix = `workers[${fileIndex}]`;
      for (const [key, origin] of Object.entries(origins)) {
        if (key.startsWith(`${prefix}.`)) nextOrigins[`workers[${index}]${key.slice(prefix.length)}`] = origin;
      }
      nextOrigins[`workers[${index}].worker_type`] = flag;
      if (bootstrap_port !== undefined) nextOrigins[`workers[${index}].bootstrap_port`] = flag;
      return { ...base.workers[fileIndex]!, worker_type, ...(bootstrap_port !== undefined ? { bootstrap_port } : {}) };
    });
  }
  if (issues.length === 0) {
    // The flags together with the file must make a valid configuration (a disaggregation mode
    // with its workers): each problem names the flag that set the key, or the key.
    const checked = checkRouterConfig(next);
    if (!checked.ok) for (const i of checked.issues) issues.push(flagWordedIssue(i, next, nextOrigins));
  }
  if (issues.length > 0) throw new ConfigError(issues);
  return { config: next, origins: nextOrigins };
}

/** The router layer as `mmtc router`/`serve`/`config …` see it: file (if any), then flags. */
export async function loadRouterConfig(flags: ConfigFlags): Promise<LoadedRouterConfig> {
  let config: RouterConfig = RouterConfigSchema.parse({});
  const origins: ConfigOrigins = {};
  if (flags.config !== undefined) {
    const file = await loadConfigFile(flags.config);
    config = file.config;
    for (const [key, pos] of file.positions) origins[key] = `${flags.config}:${pos.line}:${pos.column}`;
  }
  const loaded = applyConfigFlags(config, flags, origins);
  return flags.config !== undefined ? { ...loaded, file: flags.config } : loaded;
}

/** How each role is listed on the command line, for an error that asks for a worker of it. */
const ROLE_FLAG: Record<WorkerType, string> = {
  regular: '--worker-urls URL',
  encode: '--encode URL [BOOTSTRAP_PORT]',
  prefill: '--prefill URL [BOOTSTRAP_PORT]',
  decode: '--decode URL',
};

/**
 * A problem of the whole configuration (a disaggregation mode and its workers) as the operator
 * who typed flags must read it: at the flag that set the key, or that listed the worker, with
 * that flag first in the sentence and, where a role is missing or wrong, the flag that gives it.
 * A problem the flags did not cause keeps the file's key.
 */
function flagWordedIssue(issue: LocatedIssue, config: RouterConfig, origins: ConfigOrigins): ConfigIssue {
  const worker = issue.keyPath[0] === 'workers' && typeof issue.keyPath[1] === 'number' ? issue.keyPath[1] : undefined;
  const flagOf = (key: string) => (origins[key]?.startsWith('--') ? origins[key] : undefined);
  const flag = flagOf(issue.path) ?? (worker !== undefined ? flagOf(`workers[${worker}].url`) : undefined);
  if (flag === undefined) return { path: issue.path, message: issue.message };
  const listed = worker !== undefined ? config.workers[worker] : undefined;
  const problem = issue.params?.topology as TopologyProblem | undefined;
  let hint = '';
  if (problem?.kind === 'role_not_routed' && listed) {
    const roles = ROLES_ROUTED[config.disaggregation].filter((r) => r !== listed.worker_type);
    hint = ` (on the command line: list ${listed.url} with ${roles.map((r) => ROLE_FLAG[r].split(' ')[0]).join(', ')} instead of ${flag})`;
  } else if (problem?.kind === 'shared_bootstrap' && listed && (flag === '--prefill' || flag === '--encode')) {
    hint = ` (on the command line: a port of its own after the URL, ${flag} ${listed.url} PORT)`;
  } else if (problem?.kind === 'missing_role') hint = ` (on the command line: ${ROLE_FLAG[problem.role]})`;
  return { path: flag, message: `${flag}${listed ? ` ${listed.url}` : ''}: ${issue.message}${hint}` };
}

/** --pd-disaggregation / --epd-disaggregation and the per-role policies. */
function applyRoutingFlags(
  flags: ConfigFlags,
  issues: ConfigIssue[],
  set: <K extends keyof RouterConfig>(key: K, flag: string, value: RouterConfig[K] | undefined) => void,
): void {
  const shape = RouterConfigSchema.shape;
  if (flags.pdDisaggregation && flags.epdDisaggregation)
    issues.push({ path: '--epd-disaggregation', message: 'give one of --pd-disaggregation and --epd-disaggregation, not both' });
  else if (flags.epdDisaggregation) set('disaggregation', '--epd-disaggregation', 'epd');
  else if (flags.pdDisaggregation) set('disaggregation', '--pd-disaggregation', 'pd');
  if (flags.prefillPolicy !== undefined)
    set(
      'prefill_policy',
      '--prefill-policy',
      flagValue('--prefill-policy', flags.prefillPolicy, (raw) => parseLoose(shape.prefill_policy, raw), issues),
    );
  if (flags.decodePolicy !== undefined)
    set(
      'decode_policy',
      '--decode-policy',
      flagValue('--decode-policy', flags.decodePolicy, (raw) => parseLoose(shape.decode_policy, raw), issues),
    );
  if (flags.encodePolicy !== undefined)
    set(
      'encode_policy',
      '--encode-policy',
      flagValue('--encode-policy', flags.encodePolicy, (raw) => parseLoose(shape.encode_policy, raw), issues),
    );
}

/**
 * The workers the flags list, when any of --worker-urls, --encode, --prefill, --decode is
 * given (they replace the file's list): each with its role and, for --prefill/--encode, the
 * bootstrap port that may follow its URL (a number, or `none` for the default).
 */
function flagWorkers(
  flags: ConfigFlags,
  issues: ConfigIssue[],
): Array<{ url: string; flag: string; worker_type: WorkerType; bootstrap_port?: number }> | undefined {
  if (flags.workerUrls === undefined && flags.encode === undefined && flags.prefill === undefined && flags.decode === undefined) return undefined;
  const out: Array<{ url: string; flag: string; worker_type: WorkerType; bootstrap_port?: number }> = [];
  const seen = new Set<string>();
  const add = (flag: string, worker_type: WorkerType, url: string, bootstrap_port?: number) => {
    const valid = flagValue(flag, url, (raw) => parseLoose(WorkerUrlSchema, raw), issues);
    if (valid === undefined) return;
    if (seen.has(valid)) return issues.push({ path: flag, message: `${valid} is listed twice: a worker has one role` });
    seen.add(valid);
    out.push({ url: valid, flag, worker_type, ...(bootstrap_port !== undefined ? { bootstrap_port } : {}) });
  };
  for (const u of (flags.workerUrls ?? [])
    .flatMap((x) => x.split(','))
    .map((x) => x.trim())
    .filter(Boolean))
    add('--worker-urls', 'regular', u);
  for (const [flag, role, tokens] of [
    ['--encode', 'encode', flags.encode],
    ['--prefill', 'prefill', flags.prefill],
  ] as const) {
    const list = (tokens ?? []).map((t) => t.trim()).filter(Boolean);
    for (let i = 0; i < list.length; i++) {
      const next = list[i + 1];
      const port = next !== undefined && (/^\d+$/.test(next) || next === 'none') ? next : undefined;
      if (port !== undefined) i += 1;
      const value =
        port === undefined || port === 'none'
          ? undefined
          : flagValue(flag, port, (raw) => parseLoose(WorkerSpecSchema.shape.bootstrap_port, raw, { digits: true }), issues);
      if (port !== undefined && port !== 'none' && value === undefined) continue;
      add(flag, role, list[i - (port !== undefined ? 1 : 0)]!, value);
    }
  }
  for (const u of (flags.decode ?? [])
    .flatMap((x) => x.split(','))
    .map((x) => x.trim())
    .filter(Boolean))
    add('--decode', 'decode', u);
  return out;
}

/** The flags that listed the workers, as typed (for the console's start note), or undefined. */
export function workerFlagsText(flags: ConfigFlags, workers: readonly WorkerSpec[]): string | undefined {
  if (flags.workerUrls === undefined && flags.encode === undefined && flags.prefill === undefined && flags.decode === undefined) return undefined;
  const part = (flag: string, type: WorkerType) => {
    const of = workers.filter((w) => w.worker_type === type);
    return of.length
      ? `${flag} ${of.map((w) => (w.bootstrap_port !== undefined && type !== 'decode' && type !== 'regular' ? `${w.url} ${w.bootstrap_port}` : w.url)).join(' ')}`
      : '';
  };
  return [part('--worker-urls', 'regular'), part('--encode', 'encode'), part('--prefill', 'prefill'), part('--decode', 'decode')].filter(Boolean).join(' ');
}
