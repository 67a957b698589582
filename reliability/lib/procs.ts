// Every process the suite starts goes through here: `mmtc …` (router, worker, serve, doctor)
// the way an operator starts them, optionally under a prefix (nsenter into a private mount
// namespace, unshare --pid, setpriv). Each child gets its own process group (so a stop takes
// its descendants too), the run's marker variable (so the end-of-run check can prove nothing
// of ours is left), bounded output capture, and the malloc settings mmtc uses in production
// set directly, so the pid we hold is the process doing the work (no re-exec).
import { AsyncLocalStorage } from 'node:async_hooks';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

export const ROOT = path.resolve(import.meta.dirname, '../..');
export const BIN = path.join(ROOT, 'bin', 'mmtc.js');
export const TUNABLES = JSON.parse(readFileSync(path.join(ROOT, 'bin', 'malloc-tunables.json'), 'utf8')).GLIBC_TUNABLES as string;
/** Set on every process of a run; the final check looks for it in /proc/<pid>/environ. */
export const MARKER = 'MMTC_RELIABILITY_RUN';
const OUTPUT_CAP = 4 * 1024 * 1024;

export interface Proc {
  name: string;
  pid: number;
  child: ChildProcess;
  /** stdout + stderr so far (the last 4 MiB). */
  output(): string;
  /** Resolves with the first match of `re` in the output (from `from` on), or rejects after `timeoutMs`. */
  waitFor(re: RegExp, timeoutMs?: number, from?: number): Promise<RegExpExecArray>;
  alive(): boolean;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Signal the whole process group; wait for the exit (SIGKILL after `graceMs`). */
  stop(signal?: NodeJS.Signals, graceMs?: number): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Send a signal to the process itself (SIGSTOP/SIGCONT for a hung worker). */
  signal(sig: NodeJS.Signals): void;
  rss(): number | undefined;
}

const all = new Set<Proc>();
/** Order of start of every process, process group and stop hook, so a scenario's own can be told from its group's. */
let sequence = 0;
const seqOf = new WeakMap<Proc, number>();
/** Process groups started outside spawnProc (the fuzz harness's children): pid -> sequence. */
const groups = new Map<number, number>();
/** Other things to stop (a browser): hook -> sequence. */
const hooks = new Map<() => unknown, number>();

/**
 * The scenario running in this async context (suite.ts sets it). Once its time bound is past
 * it is `aborted`: it may start no more processes and its HTTP requests fail at once, so a
 * scenario that timed out cannot go on into the next ones.
 */
export const scenarioContext = new AsyncLocalStorage<{ name: string; aborted: boolean }>();
export function scenarioAborted(): boolean {
  return scenarioContext.getStore()?.aborted === true;
}
/** Every pid this run started (its tensor files are the only ones it may judge when it runs on the host's /dev/shm). */
export const spawnedPids = new Set<number>();
/** The run has its own /dev/shm (run.ts mounted a private tmpfs): every entry in it is ours. */
export const privateShm = () => process.env.MMTC_RELIABILITY_INNER === '1';
/** Namespaces (unshare, nsenter, setpriv to nobody) need root. */
export const canNamespace = () => process.getuid?.() === 0;

export function runId(): string {
  return process.env[MARKER] ?? 'unset';
}

export function baseEnv(extra: Record<string, string> = {}): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: process.env.HOME ?? '/tmp',
    MMTC_MALLOC_HUGETLB: '0',
    GLIBC_TUNABLES: TUNABLES,
    MMTC_GLIBC_TUNABLES: TUNABLES,
    [MARKER]: runId(),
    ...extra,
  };
}

export interface SpawnOptions {
  name?: string;
  env?: Record<string, string>;
  /** A command the mmtc process runs under: ['nsenter', '--mount=…', '--'], ['setpriv', …]. */
  prefix?: string[];
  cwd?: string;
  /** Exit when the suite dies (MMTC_EXIT_WITH_PARENT); off for processes in their own pid namespace, which cannot see our pid. */
  exitWithSuite?: boolean;
}

export function spawnProc(argv: string[], options: SpawnOptions = {}): Proc {
  const ctx = scenarioContext.getStore();
  if (ctx?.aborted) throw new Error(`${ctx.name} ran past its time bound: not starting ${argv.slice(0, 4).join(' ')}`);
  const env = baseEnv({ ...(options.exitWithSuite !== false ? { MMTC_EXIT_WITH_PARENT: String(process.pid) } : {}), ...options.env });
  const child = spawn(argv[0]!, argv.slice(1), { env, cwd: options.cwd ?? ROOT, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let out = '';
  const waiters = new Set<() => void>();
  const onData = (d: Buffer) => {
    out += d.toString();
    if (out.length > OUTPUT_CAP) out = out.slice(out.length - OUTPUT_CAP / 2);
    for (const w of [...waiters]) w();
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  let exitInfo: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => {
      exitInfo = { code, signal };
      for (const w of [...waiters]) w();
      resolve(exitInfo);
    });
    child.once('error', () => {
      exitInfo = { code: -1, signal: null };
      resolve(exitInfo);
    });
  });
  const name = options.name ?? argv.slice(0, 4).join(' ');
  const proc: Proc = {
    name,
    pid: child.pid ?? -1,
    child,
    output: () => out,
    alive: () => exitInfo === undefined,
    exited,
    waitFor(re, timeoutMs = 45_000, from = 0) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const m = new RegExp(re.source, re.flags.replace('g', '')).exec(out.slice(from));
          if (m) {
            done();
            resolve(m);
          } else if (exitInfo) {
            done();
            reject(new Error(`${name} exited (${exitInfo.code ?? exitInfo.signal}) before printing ${re}:\n${out.slice(-3000)}`));
          }
        };
        const timer = setTimeout(() => {
          done();
          reject(new Error(`${name}: no ${re} within ${timeoutMs} ms:\n${out.slice(-3000)}`));
        }, timeoutMs);
        const done = () => {
          clearTimeout(timer);
          waiters.delete(check);
        };
        waiters.add(check);
        check();
      });
    },
    async stop(signal = 'SIGTERM', graceMs = 8000) {
      if (exitInfo) return exitInfo;
      killGroup(proc.pid, signal);
      const timer = setTimeout(() => killGroup(proc.pid, 'SIGKILL'), graceMs);
      const r = await exited;
      clearTimeout(timer);
      // The leader is gone; anything it left in its group goes too.
      killGroup(proc.pid, 'SIGKILL');
      all.delete(proc);
      return r;
    },
    signal(sig) {
      try {
        process.kill(proc.pid, sig);
      } catch {
        /* gone */
      }
    },
    rss: () => rssOf(proc.pid),
  };
  all.add(proc);
  seqOf.set(proc, ++sequence);
  if (proc.pid > 0) spawnedPids.add(proc.pid);
  return proc;
}

/** The current position in the start order: what starts after it is stopped by stopSince(it). */
export function startMark(): number {
  return sequence;
}

/** A process group started without spawnProc (detached): stopped by stopAll/stopSince until untracked. */
export function trackGroup(pid: number | undefined): () => void {
  if (!pid || pid <= 0) return () => {};
  spawnedPids.add(pid);
  if (scenarioAborted()) {
    killGroup(pid, 'SIGKILL');
    return () => {};
  }
  groups.set(pid, ++sequence);
  return () => groups.delete(pid);
}

/** Something else to stop with the processes (a browser): run once by stopAll/stopSince, bounded to 5 s. */
export function onStop(fn: () => unknown): () => void {
  hooks.set(fn, ++sequence);
  return () => hooks.delete(fn);
}

function killGroup(pid: number, signal: NodeJS.Signals): void {
  if (pid <= 0) return;
  try {
    process.kill(-pid, signal);
  } catch {
    // Not a process group's leader (or the group is gone): the process alone.
    try {
      process.kill(pid, signal);
    } catch {
      /* gone */
    }
  }
}

export function rssOf(pid: number): number | undefined {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : undefined;
  } catch {
    return undefined; // exited: no RSS to read
  }
}

/** `mmtc args…` under an optional prefix. */
export function spawnMmtc(args: string[], options: SpawnOptions = {}): Proc {
  return spawnProc([...(options.prefix ?? []), process.execPath, BIN, ...args], { name: options.name ?? `mmtc ${args.slice(0, 3).join(' ')}`, ...options });
}

export interface Worker {
  proc: Proc;
  url: string;
  port: number;
  token: string;
}

/** `mmtc worker --runtime R --port P …`, ready when it prints its URL. */
export async function startWorker(runtime: 'tokenspeed' | 'vllm', extra: string[] = [], options: SpawnOptions & { port?: number } = {}): Promise<Worker> {
  const proc = spawnMmtc(['worker', '--runtime', runtime, '--port', String(options.port ?? 0), ...extra], {
    name: `worker ${runtime}${options.name ? ` ${options.name}` : ''}`,
    ...options,
  });
  try {
    const m = await proc.waitFor(/listening on (grpc:\/\/\S+)\n\s+\/dev\/shm namespace token: (\S+)/, 45_000);
    return { proc, url: m[1]!, port: Number(/:(\d+)$/.exec(m[1]!)![1]), token: m[2]! };
  } catch (err) {
    await proc.stop('SIGKILL');
    throw err;
  }
}

export interface Router {
  proc: Proc;
  url: string;
}

/** `mmtc router …`, ready once every worker's transport line is printed. */
export async function startRouter(args: string[], options: SpawnOptions = {}): Promise<Router> {
  const proc = spawnMmtc(['router', '--port', '0', ...args], { name: options.name ?? 'router', ...options });
  try {
    const m = await proc.waitFor(/mmtc router listening on (http:\/\/\S+) /, 60_000);
    await proc.waitFor(/^\s+transport /m, 30_000);
    return { proc, url: m[1]! };
  } catch (err) {
    await proc.stop('SIGKILL');
    throw err;
  }
}

export interface Serve {
  proc: Proc;
  routerUrl: string;
  consoleUrl: string;
  token: string;
}

/** `mmtc serve …`: the router plus the console, ready when it prints the console URL. */
export async function startServe(args: string[], options: SpawnOptions = {}): Promise<Serve> {
  const proc = spawnMmtc(['serve', '--port', '0', '--console-port', '0', ...args], { name: options.name ?? 'serve', ...options });
  try {
    const c = await proc.waitFor(/mmtc console: (http:\/\/\S+)#token=(\S+)/, 60_000);
    const r = /mmtc router listening on (http:\/\/\S+) /.exec(proc.output())!;
    return { proc, routerUrl: r[1]!, consoleUrl: c[1]!.replace(/\/$/, ''), token: c[2]! };
  } catch (err) {
    await proc.stop('SIGKILL');
    throw err;
  }
}

/** `mmtc args…` to completion (doctor, config …), bounded in time. */
export function runMmtcSync(
  args: string[],
  options: { prefix?: string[]; env?: Record<string, string>; timeoutMs?: number; cwd?: string } = {},
): { status: number | null; stdout: string; stderr: string; signal: NodeJS.Signals | null } {
  const argv = [...(options.prefix ?? []), process.execPath, BIN, ...args];
  const r = spawnSync(argv[0]!, argv.slice(1), {
    env: baseEnv(options.env),
    cwd: options.cwd ?? ROOT,
    encoding: 'utf8',
    timeout: options.timeoutMs ?? 60_000,
    maxBuffer: 64 * 1024 * 1024,
  });
  return { status: r.status, stdout: r.stdout ?? '', stderr: r.stderr ?? '', signal: r.signal };
}

/** Stop every process, process group and hook started after `mark` (startMark()); returns how many. */
export async function stopSince(mark: number, signal: NodeJS.Signals = 'SIGTERM'): Promise<number> {
  const procs = [...all].filter((p) => (seqOf.get(p) ?? 0) > mark);
  const pgids = [...groups].filter(([, s]) => s > mark).map(([pid]) => pid);
  const fns = [...hooks].filter(([, s]) => s > mark).map(([fn]) => fn);
  for (const pid of pgids) {
    killGroup(pid, 'SIGKILL');
    groups.delete(pid);
  }
  for (const fn of fns) hooks.delete(fn);
  const bounded = (fn: () => unknown) =>
    Promise.race([
      Promise.resolve()
        .then(fn)
        // A hook that fails has stopped what it could; the processes are stopped all the same.
        .catch(() => undefined),
      sleep(5000),
    ]);
  await Promise.all([...procs.map((p) => p.stop(signal, 3000)), ...fns.map(bounded)]);
  return procs.length + pgids.length + fns.length;
}

/** Stop every process still running (end of a group or of the run). */
export async function stopAll(signal: NodeJS.Signals = 'SIGTERM'): Promise<number> {
  return stopSince(0, signal);
}

/** Processes that carry this run's marker, other than this process and its ancestors. */
export function markedProcesses(): Array<{ pid: number; cmd: string }> {
  const id = runId();
  const mine = new Set<number>();
  for (let pid = process.pid; pid > 1;) {
    mine.add(pid);
    try {
      pid = Number(/^PPid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]);
    } catch {
      break; // an ancestor that exited meanwhile: the chain read so far is ours
    }
  }
  const found: Array<{ pid: number; cmd: string }> = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    if (mine.has(pid)) continue;
    try {
      const env = readFileSync(`/proc/${pid}/environ`, 'latin1');
      if (!env.split('\0').includes(`${MARKER}=${id}`)) continue;
      const state = /^State:\s+(\S)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
      if (state === 'Z') continue; // reaped by its parent a moment later
      found.push({ pid, cmd: readFileSync(`/proc/${pid}/cmdline`, 'latin1').split('\0').join(' ').slice(0, 200) });
    } catch {
      /* gone, or not readable */
    }
  }
  return found;
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Poll `fn` every `everyMs` until it returns a truthy value or `timeoutMs` passes (then the last value). */
export async function until<T>(fn: () => T | Promise<T>, timeoutMs: number, everyMs = 100): Promise<T> {
  const end = Date.now() + timeoutMs;
  let v = await fn();
  while (!v && Date.now() < end) {
    await sleep(everyMs);
    v = await fn();
  }
  return v;
}
