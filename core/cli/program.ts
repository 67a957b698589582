// The `mmtc` command. Each subcommand is a thin shell over a core module; what it prints
// for people is laid out in reports.ts. Errors an operator can fix (bad flag, bad YAML)
// print one clear message per problem and exit 2.
import { Command, Option } from 'commander';
import { existsSync, readFileSync } from 'node:fs';
import { defaultConfigPath } from '../console/config-file.ts';
import { transportEnvironmentAtStart } from '../config/env.ts';
import { ConfigError } from '../config/errors.ts';
import { CONFIG_FLAG_HELP, loadRouterConfig, type ConfigFlags } from '../config/load.ts';
import { flagValue, parseLoosePort } from '../config/loose.ts';
import { ConfigStore, EMBEDDED_DEFAULT_ORIGIN } from '../config/store.ts';
import { exportConfigYaml, loadConfigFile } from '../config/yaml.ts';
import { capabilitiesOf, declaredRuntime, ENGINE_RUNTIMES, laneFacts, undeclaredRuntimeNote } from '../engines/table.ts';
import { EMBEDDED_RUNTIME, embeddedWorkerSpec } from '../refworker/embedded.ts';
import { REFERENCE_ROLES, REFERENCE_RUNTIMES, startReferenceWorker } from '../refworker/server.ts';
import type { WorkerRole } from '../refworker/receive.ts';
import type { TamperMode, TamperRecord } from '../refworker/tamper.ts';
import { KV_CONNECTORS, type KvConnectorChoice } from '../refworker/vllm-roles.ts';
import { parseSamplingDefaults } from '../engines/sampling.ts';
import { dropPrivileges } from '../refworker/user.ts';
import { installProcessGuard } from '../telemetry/process-guard.ts';
import { resolveConfiguredWorkers } from '../transport/resolve.ts';
import { DEFAULT_BOOTSTRAP_PORT, type WireRuntime } from '../config/schema.ts';
import type { PreprocessCommandOptions } from './preprocess.ts';
import { formatDoctorReport, formatResolutionTable } from './reports.ts';
import { untilStopSignal } from './stop-signals.ts';
import { FAMILY_IDS } from '../multimodal/families/index.ts';

const EXIT_USAGE = 2;

/** How `mmtc config resolve` names the embedded worker, whose port is chosen at start. */
const EMBEDDED_WORKER_URL = 'grpc://127.0.0.1:<port chosen at start>';

function version(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}

/**
 * `mmtc config resolve|export` without --config read the file `mmtc serve` uses (the console's
 * file, docs/console.md), so they describe what the console runs; they say on stderr which
 * file they read, or that there is none.
 */
function withServeConfigFile(flags: ConfigFlags): { flags: ConfigFlags; note: string } {
  if (flags.config !== undefined) return { flags, note: '' };
  const file = defaultConfigPath();
  if (existsSync(file)) return { flags: { ...flags, config: file }, note: `mmtc: read ${file}, the file mmtc serve uses (--config FILE reads another)\n` };
  return { flags, note: `mmtc: no configuration file: ${file} (the file mmtc serve uses) does not exist; built-in defaults and flags only\n` };
}

/** The configuration as `mmtc serve` would load it, saying on stderr which file it read. */
async function loadAsServe(opts: ConfigFlags): Promise<Awaited<ReturnType<typeof loadRouterConfig>>> {
  const { flags, note } = withServeConfigFile(opts);
  const loaded = await loadRouterConfig(flags);
  process.stderr.write(note);
  return loaded;
}

function withConfigFlags(cmd: Command): Command {
  for (const f of CONFIG_FLAG_HELP) cmd.addOption(new Option(f.flags, f.description));
  return cmd;
}

/** What the entry point (bin/mmtc.js) provides from outside core/: the desktop shell's launcher. */
export interface Shells {
  launchDesktop?: (options: {
    args: string[];
    log: (line: string) => void;
  }) => Promise<{ status: 'exited' | 'unavailable'; exitCode: number; reason?: string }>;
}

/** `mmtc config resolve|validate|export`. */
function addConfigCommands(program: Command): void {
  const config = program.command('config').description('inspect, validate and export the router configuration');

  withConfigFlags(config.command('resolve'))
    .description(
      "each worker's transport mode and SHM threshold, with the layer that decided it and every layer's value; without --config, the file mmtc serve uses",
    )
    .option('--json', 'print JSON instead of a table')
    .action(async (opts: ConfigFlags & { json?: boolean }) => {
      const env = transportEnvironmentAtStart();
      const loaded = await loadAsServe(opts);
      // With no worker configured the router starts its embedded reference worker on a free
      // port: show that entry as the router will hold it.
      const embedded = loaded.config.workers.length === 0;
      const config = embedded ? { ...loaded.config, workers: [{ ...embeddedWorkerSpec('grpc://127.0.0.1:1'), url: EMBEDDED_WORKER_URL }] } : loaded.config;
      const origins = embedded ? { ...loaded.origins, 'workers[0]': EMBEDDED_DEFAULT_ORIGIN } : loaded.origins;
      const resolved = resolveConfiguredWorkers(config, env, origins, (w) => laneFacts(declaredRuntime(w.runtime)), undeclaredRuntimeNote());
      if (opts.json) {
        process.stdout.write(`${JSON.stringify({ config_file: loaded.file ?? null, workers: resolved, warnings: env.warnings }, null, 2)}\n`);
      } else {
        if (embedded)
          process.stdout.write(
            `no workers configured: the router starts its embedded reference worker (${capabilitiesOf(EMBEDDED_RUNTIME).label}, bundled model), which gets:\n\n`,
          );
        process.stdout.write(formatResolutionTable(resolved));
      }
    });

  config
    .command('validate')
    .description('check a configuration file; exit 0 when valid, else list every error with its key path and line:column')
    .argument('<file>', 'YAML file')
    .action(async (file: string) => {
      try {
        const parsed = await loadConfigFile(file);
        const n = parsed.config.workers.length;
        process.stdout.write(`${file}: valid (${n} worker${n === 1 ? '' : 's'})\n`);
      } catch (err) {
        if (!(err instanceof ConfigError)) throw err;
        process.stdout.write(`${err.message}\n`);
        process.exitCode = 1;
      }
    });

  withConfigFlags(config.command('export'))
    .description('print the configuration (file plus flags) as normalized YAML; without --config, the file mmtc serve uses')
    .action(async (opts: ConfigFlags) => {
      const loaded = await loadAsServe(opts);
      process.stdout.write(exportConfigYaml(loaded.config));
    });
}

/** `mmtc router`, `mmtc serve` and `mmtc desktop`: the product itself. */
function addRunCommands(program: Command, shells: Shells): void {
  withConfigFlags(program.command('router'))
    .description(
      'run the router: OpenAI-compatible API, image preprocessing, tensors to workers inline or through /dev/shm (with no worker configured, starts a reference worker on the bundled model)',
    )
    .action(async (opts: ConfigFlags) => {
      installProcessGuard();
      const env = transportEnvironmentAtStart();
      const loaded = await loadRouterConfig(opts);
      const { startRouter } = await import('../router/server.ts');
      const store = new ConfigStore({ config: loaded.config, origins: loaded.origins, env, ...(loaded.file !== undefined ? { file: loaded.file } : {}) });
      const router = await startRouter({ store });
      await untilStopSignal();
      await router.close();
    });

  withConfigFlags(program.command('serve'))
    .description(
      "run the router and the operator console in the browser: prints a URL with a per-launch token (the console binds --console-host, 127.0.0.1 by default, whatever the router's --host)",
    )
    .option('--console-port <port>', 'port of the console (0 picks a free one)', '30001')
    .option('--console-host <host>', 'address the console listens on (default 127.0.0.1; anything else is reachable from other machines)', '127.0.0.1')
    .action(async (opts: ConfigFlags & { consolePort: string; consoleHost: string }) => {
      installProcessGuard();
      const issues: ConfigError['issues'] = [];
      const consolePort = flagValue('--console-port', opts.consolePort, parseLoosePort, issues);
      if (consolePort === undefined) throw new ConfigError(issues);
      const consoleHost = opts.consoleHost.trim();
      if (consoleHost === '')
        throw new ConfigError([{ path: '--console-host', message: "invalid value '' for --console-host: expected a host name or address" }]);
      const { serveConsole } = await import('./serve.ts');
      const stop = await serveConsole({ flags: opts, consolePort, consoleHost });
      await untilStopSignal();
      await stop();
    });

  program
    .command('desktop')
    .description('open the console as a desktop app (Electron), running the router in its main process; flags are those of mmtc router')
    .allowUnknownOption()
    .helpOption(false)
    .argument('[args...]', 'router flags (--config FILE, --worker-urls …)')
    .action(async (args: string[]) => {
      // The core never imports the Electron shell: bin/mmtc.js hands its launcher in.
      if (!shells.launchDesktop)
        throw new ConfigError([{ path: 'desktop', message: 'the desktop app is not available from this entry point: run `npx mmtc desktop` or `npm start`' }]);
      const r = await shells.launchDesktop({ args, log: (line) => process.stderr.write(`${line}\n`) });
      if (r.status === 'unavailable') process.stderr.write(`${r.reason}\n`);
      process.exitCode = r.exitCode;
    });
}

/** `mmtc doctor`, `mmtc preprocess` and `mmtc worker`: the tools around it. */
function addToolCommands(program: Command): void {
  program
    .command('doctor')
    .description('check the /dev/shm lane on this host and, with --worker, whether auto would use it for that worker')
    .option('--worker <url>', 'a worker to check (grpc://host:port or unix:///path)')
    .addOption(new Option('--runtime <runtime>', "the worker's protocol (default: detect)").choices(ENGINE_RUNTIMES))
    .option('--sweep-orphans', 'delete tensor files of routers that are no longer running')
    .option('--json', 'print JSON instead of text')
    .action(async (opts: { worker?: string; runtime?: WireRuntime; sweepOrphans?: boolean; json?: boolean }) => {
      // Loaded when asked for, as the router and the console are: a worker's start does not pay for them.
      const { runDoctor } = await import('./doctor.ts');
      const report = await runDoctor({
        ...(opts.worker ? { worker: opts.worker } : {}),
        ...(opts.runtime ? { runtime: opts.runtime } : {}),
        sweep: opts.sweepOrphans === true,
      });
      process.stdout.write(opts.json ? `${JSON.stringify(report, null, 2)}\n` : formatDoctorReport(report));
    });

  program
    .command('preprocess')
    .description("run a vision family's image preprocessing on local images and print sizes, grid, tokens, bytes, timings and a fingerprint")
    .addOption(new Option('--model <family>', "vision family (default: the model directory's, else qwen2_vl)").choices([...FAMILY_IDS]))
    .option('--model-path <dir>', 'model directory whose preprocessor_config.json overrides the defaults')
    .option('--no-normalize', 'skip normalization (the fingerprint then identifies the resized pixels)')
    .addOption(new Option('--dtype <dtype>', 'encoder input dtype to report bytes for').choices(['float32', 'bfloat16']).default('float32'))
    .option('--json', 'print one JSON object per image (a JSON array)')
    .argument('<images...>', 'image files (JPEG, PNG, WebP, GIF) or data:/http(s) URLs')
    .action(async (images: string[], opts: PreprocessCommandOptions) => {
      const { runPreprocessCommand } = await import('./preprocess.ts');
      process.exitCode = await runPreprocessCommand(images, opts);
    });

  program
    .command('worker')
    .description('run a reference gRPC worker that reads tensors exactly as real workers do')
    .addOption(new Option('--runtime <runtime>', 'protocol to serve').choices(REFERENCE_RUNTIMES).makeOptionMandatory())
    .option('--host <host>', 'address to listen on', '127.0.0.1')
    .option('--port <port>', 'port to listen on (0 picks a free one)', '50051')
    .option('--socket <path>', 'listen on a unix socket instead of host:port')
    .option('--model-path <dir>', 'model directory to advertise')
    .option('--shm-namespace-id <token>', "advertise this /dev/shm namespace token instead of the real one ('' advertises none)")
    .option('--no-fingerprint', 'do not hash tensor bytes (for benchmarks)')
    .option('--delay-ms <ms>', 'hold each request this long before reading its tensors (simulates a queue)', '0')
    .addOption(
      new Option(
        '--read-buffer <kind>',
        "read each /dev/shm tensor into a pooled, pre-faulted buffer, or into a fresh one per tensor (as the gateway's Python servicers do)",
      )
        .choices(['pooled', 'fresh'])
        .default('pooled'),
    )
    .option(
      '--user <name>',
      "start as root, then serve as this user (and its primary group): a worker under another uid, which cannot open a root router's 0600 files in /dev/shm",
    )
    .addOption(
      new Option(
        '--role <role>',
        `its part in disaggregated serving: a whole request (regular), or the encode, prefill or decode worker of EPD/PD (${REFERENCE_RUNTIMES.map((r) => `${r}: ${REFERENCE_ROLES[r].join(', ')}`).join('; ')})`,
      )
        .choices(['regular', 'encode', 'prefill', 'decode'])
        .default('regular'),
    )
    .option(
      '--bootstrap-port <port>',
      `an encode or prefill worker's bootstrap server, where the next worker takes what it produced (default ${DEFAULT_BOOTSTRAP_PORT}; 0 picks a free one)`,
    )
    .addOption(
      new Option('--encode-accept <bool>', 'an encode worker that answers accepted: false (fault injection)').choices(['true', 'false']).default('true'),
    )
    .option('--encode-drop', 'an encode worker that accepts but never hands the embedding over (fault injection)')
    .option('--embedding-timeout-ms <ms>', 'how long a prefill worker waits for an embedding', '10000')
    .option('--kv-timeout-ms <ms>', 'how long a decode worker waits for the KV', '15000')
    .addOption(
      new Option(
        '--kv-connector <connector>',
        "a vLLM prefill or decode worker's KV connector, as GetServerInfo reports it: nixl (NixlConnector), mooncake (MooncakeConnector) or none",
      ).choices(Object.keys(KV_CONNECTORS)),
    )
    .option(
      '--model-dtype <dtype>',
      "the model dtype it advertises (GetModelInfo model_dtype); a TokenSpeed worker attaches /dev/shm encoder inputs in this dtype read-write, as its scheduler does (default: the model directory's torch_dtype, else bfloat16)",
    )
    .option(
      '--default-sampling-params <json>',
      "what it publishes as default_sampling_params_json (default: vLLM and SGLang, the model directory's generation_config.json; TokenSpeed, none)",
    )
    .option(
      '--tamper-shm [how]',
      "a worker that writes into its input: change the first byte of each /dev/shm tensor file it is given, by write() (how = write, the default) or as through a shared read-write map, which leaves the file's mtime as it was (how = map) (fault injection)",
    )
    .action(
      async (opts: {
        runtime: WireRuntime;
        host: string;
        port: string;
        socket?: string;
        modelPath?: string;
        shmNamespaceId?: string;
        fingerprint: boolean;
        delayMs: string;
        readBuffer: 'pooled' | 'fresh';
        user?: string;
        role: WorkerRole;
        bootstrapPort?: string;
        encodeAccept: string;
        encodeDrop?: boolean;
        embeddingTimeoutMs: string;
        kvTimeoutMs: string;
        tamperShm?: boolean | string;
        kvConnector?: KvConnectorChoice;
        modelDtype?: string;
        defaultSamplingParams?: string;
      }) => {
        installProcessGuard();
        const issues: ConfigError['issues'] = [];
        const port = flagValue('--port', opts.port, parseLoosePort, issues);
        const bootstrapPort = opts.bootstrapPort === undefined ? undefined : flagValue('--bootstrap-port', opts.bootstrapPort, parseLoosePort, issues);
        const waits = (['--embedding-timeout-ms', '--kv-timeout-ms'] as const).map((flag, i) => {
          const text = i === 0 ? opts.embeddingTimeoutMs : opts.kvTimeoutMs;
          const ms = Number(text);
          if (!Number.isInteger(ms) || ms < 1 || ms > 60_000)
            issues.push({ path: flag, message: `invalid value '${text}' for ${flag}: expected whole milliseconds from 1 to 60000` });
          return ms;
        });
        if (!REFERENCE_ROLES[opts.runtime].includes(opts.role))
          issues.push({
            path: '--role',
            message: `--role ${opts.role} needs --runtime ${REFERENCE_RUNTIMES.filter((r) => REFERENCE_ROLES[r].includes(opts.role)).join(' or ')} (a ${opts.runtime} reference worker can be ${REFERENCE_ROLES[opts.runtime].join(', ')})`,
          });
        if (opts.bootstrapPort !== undefined && opts.role !== 'encode' && opts.role !== 'prefill')
          issues.push({
            path: '--bootstrap-port',
            message: `--bootstrap-port is for an encode or prefill worker, which has a bootstrap server (this one is --role ${opts.role})`,
          });
        if ((opts.encodeAccept === 'false' || opts.encodeDrop) && opts.role !== 'encode')
          issues.push({
            path: opts.encodeDrop ? '--encode-drop' : '--encode-accept',
            message: `${opts.encodeDrop ? '--encode-drop' : '--encode-accept false'} is for an encode worker (this one is --role ${opts.role})`,
          });
        if (opts.tamperShm) {
          const why =
            opts.runtime === 'sglang'
              ? 'an sglang worker gets every tensor inline (its protocol has no /dev/shm lane)'
              : opts.role === 'decode'
                ? 'a decode worker is given no tensors (this one is --role decode)'
                : opts.encodeAccept === 'false'
                  ? 'an encode worker with --encode-accept false reads no tensors'
                  : undefined;
          if (why) issues.push({ path: '--tamper-shm', message: `--tamper-shm is for a worker that reads /dev/shm tensor files: ${why}` });
        }
        if (typeof opts.tamperShm === 'string' && opts.tamperShm !== 'write' && opts.tamperShm !== 'map')
          issues.push({ path: '--tamper-shm', message: `invalid value '${opts.tamperShm}' for --tamper-shm: expected write or map` });
        if (opts.kvConnector !== undefined && (opts.runtime !== 'vllm' || (opts.role !== 'prefill' && opts.role !== 'decode')))
          issues.push({
            path: '--kv-connector',
            message: `--kv-connector is for a vLLM prefill or decode worker (this one is ${opts.runtime}, --role ${opts.role})`,
          });
        if (opts.modelDtype !== undefined && !['float32', 'bfloat16', 'float16'].includes(opts.modelDtype))
          issues.push({ path: '--model-dtype', message: `invalid value '${opts.modelDtype}' for --model-dtype: expected float32, bfloat16 or float16` });
        if (opts.defaultSamplingParams !== undefined && opts.defaultSamplingParams !== '') {
          const parsed = parseSamplingDefaults(opts.defaultSamplingParams);
          if (parsed.warning)
            issues.push({
              path: '--default-sampling-params',
              message: `invalid value '${opts.defaultSamplingParams}' for --default-sampling-params: ${parsed.warning}`,
            });
        }
        if (port === undefined || issues.length) throw new ConfigError(issues);
        const tamperShm: TamperMode | false = opts.tamperShm === true || opts.tamperShm === 'write' ? 'write' : opts.tamperShm === 'map' ? 'map' : false;
        const worker = await startReferenceWorker({
          runtime: opts.runtime,
          host: opts.host,
          port,
          role: opts.role,
          ...(bootstrapPort !== undefined ? { bootstrapPort } : {}),
          encodeAccept: opts.encodeAccept === 'true',
          encodeDrop: opts.encodeDrop === true,
          embeddingTimeoutMs: waits[0]!,
          kvTimeoutMs: waits[1]!,
          ...(opts.kvConnector ? { kvConnector: opts.kvConnector } : {}),
          ...(opts.modelDtype ? { modelDtype: opts.modelDtype } : {}),
          ...(opts.defaultSamplingParams !== undefined ? { defaultSamplingParams: opts.defaultSamplingParams } : {}),
          ...(opts.socket ? { socket: opts.socket } : {}),
          ...(opts.modelPath ? { modelPath: opts.modelPath } : {}),
          ...(opts.shmNamespaceId !== undefined ? { shmNamespaceId: opts.shmNamespaceId } : {}),
          fingerprint: opts.fingerprint,
          delayMs: Number(opts.delayMs) || 0,
          readBuffers: opts.readBuffer,
          ...(tamperShm
            ? {
                tamperShm,
                onTamper: (r: TamperRecord) =>
                  process.stdout.write(
                    r.error
                      ? `  tamper-shm: could not write into ${r.name}: ${r.error}\n`
                      : `  tamper-shm: changed byte ${r.offset} of ${r.name} (inode ${r.ino})\n`,
                  ),
              }
            : {}),
        });
        if (opts.user !== undefined) {
          try {
            const ids = dropPrivileges(opts.user);
            process.stdout.write(`  serving as ${ids.name} (uid ${ids.uid}, gid ${ids.gid})\n`);
          } catch (err) {
            await worker.close();
            throw new ConfigError([{ path: '--user', message: (err as Error).message }]);
          }
        }
        process.stdout.write(`mmtc worker (${worker.runtime}${worker.role === 'regular' ? '' : `, role ${worker.role}`}) listening on ${worker.url}\n`);
        if (worker.bootstrapPort !== undefined)
          process.stdout.write(`  bootstrap server on http://${opts.host.includes(':') ? `[${opts.host}]` : opts.host}:${worker.bootstrapPort}\n`);
        process.stdout.write(`  /dev/shm namespace token: ${worker.token ?? 'none advertised'}\n`);
        if (tamperShm) process.stdout.write('  tamper-shm: every /dev/shm tensor file given is written into before it is read (fault injection)\n');
        await untilStopSignal();
        await worker.close();
      },
    );
}

function buildProgram(shells: Shells): Command {
  const program = new Command('mmtc')
    .description('mm-transport-console: router core and ops console for multimodal tensor transport (inline gRPC or /dev/shm)')
    .version(version())
    .showHelpAfterError('(run with --help for usage)');
  addConfigCommands(program);
  addRunCommands(program, shells);
  addToolCommands(program);
  return program;
}

export async function main(argv: string[], shells: Shells = {}): Promise<number> {
  try {
    await buildProgram(shells).parseAsync(argv);
    return typeof process.exitCode === 'number' ? process.exitCode : 0;
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`error: ${err.message}\n`);
      return EXIT_USAGE;
    }
    throw err;
  }
}
