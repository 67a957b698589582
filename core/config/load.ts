// One RouterConfig from the router layer's three inputs: the YAML file (--config), the
// command-line flags (which override the file), and nothing else: the environment is a
// separate, lower layer applied per knob at resolution time (core/transport/resolve.ts).
//
// Every router value remembers where it came from ("--port", "router.yaml:4:1") so the
// console can say which input decided it. Flag values are validated by the same schemas as
// the file, and a bad one names the flag: invalid value 'fast' for
// --multimodal-tensor-transport: expected inline, shm, auto or rdma.
import { ConfigError, type ConfigIssue } from './errors.ts';
import { flagValue, parseLoose, parseLooseBytes, parseLooseMode, parseLoosePort } from './loose.ts';
import { RouterConfigSchema, WorkerSpecSchema, WorkerUrlSchema, type RouterConfig } from './schema.ts';
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
  /** The limit flags (LIMIT_FLAGS), by commander's camelCase name. */
  [limit: string]: string | string[] | boolean | undefined;
}

type LimitKey = 'limit_mm_per_prompt' | 'max_request_image_pixels' | 'max_image_bytes' | 'max_request_image_bytes' | 'max_body_bytes' | 'body_timeout_secs' | 'media_fetch_timeout_secs' | 'allowed_media_domains' | 'allow_private_media_hosts' | 'preprocess_memory_bytes' | 'multimodal_shm_max_outstanding_bytes' | 'request_timeout_secs';

/**
 * The admission limits and media policy as flags: one row each, the YAML key it sets, how
 * its text is read (then checked by that key's schema, whose message names the flag).
 */
export const LIMIT_FLAGS: ReadonlyArray<{ flag: string; key: LimitKey; kind: 'integer' | 'number' | 'list' | 'boolean' | 'per_modality'; description: string }> = [
  { flag: '--limit-mm-per-prompt <limits>', key: 'limit_mm_per_prompt', kind: 'per_modality', description: 'most images one request may carry, as image=N or {"image": N} (default image=16)' },
  { flag: '--max-request-image-pixels <n>', key: 'max_request_image_pixels', kind: 'integer', description: "most pixels (width × height from the images' headers) one request's images may have in all (default 64000000)" },
  { flag: '--max-image-bytes <n>', key: 'max_image_bytes', kind: 'integer', description: 'largest encoded image, in bytes (default 20 MiB)' },
  { flag: '--max-request-image-bytes <n>', key: 'max_request_image_bytes', kind: 'integer', description: "most encoded image bytes one request may bring, all its images together (default 64 MiB)" },
  { flag: '--max-body-bytes <n>', key: 'max_body_bytes', kind: 'integer', description: 'largest request body, in bytes (default 64 MiB)' },
  { flag: '--body-timeout-secs <s>', key: 'body_timeout_secs', kind: 'number', description: 'a request body must arrive within this many seconds (default 30)' },
  { flag: '--media-fetch-timeout-secs <s>', key: 'media_fetch_timeout_secs', kind: 'number', description: 'an image URL must download within this many seconds (default 10)' },
  { flag: '--allowed-media-domains <host...>', key: 'allowed_media_domains', kind: 'list', description: 'image URLs may only name these hosts (default: any public host)' },
  { flag: '--allow-private-media-hosts', key: 'allow_private_media_hosts', kind: 'boolean', description: 'let image URLs reach loopback, private and link-local addresses (never cloud metadata)' },
  { flag: '--preprocess-memory-bytes <n>', key: 'preprocess_memory_bytes', kind: 'integer', description: 'memory images may take while being decoded and preprocessed, all requests together (default 1 GiB)' },
  { flag: '--multimodal-shm-max-outstanding-bytes <n>', key: 'multimodal_shm_max_outstanding_bytes', kind: 'integer', description: "most bytes of this router's tensor files in /dev/shm at once; above it tensors go inline (default: half of /dev/shm's free space at start)" },
  { flag: '--request-timeout-secs <s>', key: 'request_timeout_secs', kind: 'number', description: 'a request not finished by then fails with 504 (default 600)' },
];

/** commander's property name of a flag: --max-image-bytes -> maxImageBytes. */
function flagProperty(flag: string): string {
  return flag.split(' ')[0]!.replace(/^--/, '').replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
}

/** `image=16` or `{"image": 16}` as data for limit_mm_per_prompt's schema. */
function perModality(raw: string): unknown {
  const text = raw.trim();
  if (text.startsWith('{')) {
    try {
      return JSON.parse(text);
    } catch {
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
  { flags: '--worker-urls <url...>', description: 'workers as grpc://host:port or unix:///path (replaces the file\'s list; entries with the same url keep their settings)' },
  { flags: '--model-path <dir>', description: 'model directory (config.json, tokenizer.json, preprocessor_config.json)' },
  { flags: '--multimodal-tensor-transport <mode>', description: 'router-wide tensor transport: inline, shm, auto or rdma' },
  { flags: '--multimodal-shm-min-bytes <n>', description: 'smallest tensor, in bytes, that goes through /dev/shm' },
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
  if (flags.host !== undefined) set('host', '--host', flagValue('--host', flags.host, (raw) => parseLoose(shape.host, raw), issues));
  if (flags.port !== undefined) set('port', '--port', flagValue('--port', flags.port, parseLoosePort, issues));
  if (flags.modelPath !== undefined) set('model_path', '--model-path', flagValue('--model-path', flags.modelPath, (raw) => parseLoose(shape.model_path, raw), issues));
  if (flags.multimodalTensorTransport !== undefined) {
    set('multimodal_tensor_transport', '--multimodal-tensor-transport', flagValue('--multimodal-tensor-transport', flags.multimodalTensorTransport, parseLooseMode, issues));
  }
  if (flags.multimodalShmMinBytes !== undefined) {
    set('multimodal_shm_min_bytes', '--multimodal-shm-min-bytes', flagValue('--multimodal-shm-min-bytes', flags.multimodalShmMinBytes, parseLooseBytes, issues));
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
        ? flagValue(name, text, (t) => { const r = schema.safeParse(t.split(',').map((x) => x.trim()).filter(Boolean)); return r.success ? { ok: true, value: r.data } : { ok: false, expected: r.error.issues[0]?.message ?? 'invalid value' }; }, issues)
        : limit.kind === 'per_modality'
          ? flagValue(name, text, (t) => { const r = schema.safeParse(perModality(t)); return r.success ? { ok: true, value: r.data } : { ok: false, expected: r.error.issues[0]?.path.length ? `${r.error.issues[0].path.join('.')}: ${r.error.issues[0].message}` : 'expected image=N or {"image": N}' }; }, issues)
          : flagValue(name, text, (t) => parseLoose(schema as never, t, { digits: true, ...(limit.kind === 'number' ? { decimal: true } : {}) }), issues);
    set(limit.key, name, value as RouterConfig[typeof limit.key] | undefined);
  }
  if (flags.workerUrls !== undefined) {
    const urls = flags.workerUrls.flatMap((u) => u.split(',')).map((u) => u.trim()).filter((u) => u !== '');
    const valid = urls.map((u) => flagValue('--worker-urls', u, (raw) => parseLoose(WorkerUrlSchema, raw), issues));
    if (valid.every((u): u is string => u !== undefined)) {
      const fileIndexByUrl = new Map(base.workers.map((w, i) => [w.url, i] as const));
      for (const key of Object.keys(nextOrigins)) if (key.startsWith('workers[')) delete nextOrigins[key];
      next.workers = [...new Set(valid)].map((url, index) => {
        const fileIndex = fileIndexByUrl.get(url);
        if (fileIndex === undefined) {
          nextOrigins[`workers[${index}].url`] = '--worker-urls';
          return WorkerSpecSchema.parse({ url });
        }
        const prefix = `workers[${fileIndex}]`;
        for (const [key, origin] of Object.entries(origins)) {
          if (key.startsWith(`${prefix}.`)) nextOrigins[`workers[${index}]${key.slice(prefix.length)}`] = origin;
        }
        return base.workers[fileIndex]!;
      });
    }
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
