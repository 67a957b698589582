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
}

export const CONFIG_FLAG_HELP: ReadonlyArray<{ flags: string; description: string }> = [
  { flags: '--config <file>', description: 'router configuration YAML file' },
  { flags: '--host <host>', description: 'address the router listens on (default 127.0.0.1)' },
  { flags: '--port <port>', description: 'port the router listens on (default 30000)' },
  { flags: '--worker-urls <url...>', description: 'workers as grpc://host:port or unix:///path (replaces the file\'s list; entries with the same url keep their settings)' },
  { flags: '--model-path <dir>', description: 'model directory (config.json, tokenizer.json, preprocessor_config.json)' },
  { flags: '--multimodal-tensor-transport <mode>', description: 'router-wide tensor transport: inline, shm, auto or rdma' },
  { flags: '--multimodal-shm-min-bytes <n>', description: 'smallest tensor, in bytes, that goes through /dev/shm' },
];

/** key path -> human description of the input that set it. */
export type ConfigOrigins = Record<string, string>;

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
