// What a benchmark starts, it stops: `mmtc` processes started for a benchmark exit with it,
// whether it ends normally, fails, or is killed without a chance to clean up.
//
// Each process is started with mmtc's malloc settings set directly (no re-exec by
// bin/mmtc.js, so the pid we hold is the process itself) and MMTC_EXIT_WITH_PARENT set to this
// process, so it exits within half a second of us even after a SIGKILL. stopAll() (also run
// on exit, SIGINT and SIGTERM) sends SIGTERM and waits for each to exit, SIGKILL after 5 s.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';

export const root = path.resolve(import.meta.dirname, '..');
const children = new Set<ChildProcess>();

/** The malloc tunables mmtc starts its long-running processes with (bin/malloc-tunables.json). */
export const MMTC_TUNABLES = (JSON.parse(readFileSync(path.join(root, 'bin', 'malloc-tunables.json'), 'utf8')) as { GLIBC_TUNABLES: string }).GLIBC_TUNABLES;

export interface Started {
  child: ChildProcess;
  /** The first capture group of `ready` in the process's output. */
  match: string;
  /** Every capture group of `ready`. */
  groups: string[];
}

/**
 * Start `mmtc <args>` and resolve once its stdout matches `ready` (within 60 s). `env`
 * adds to this process's environment; `malloc`: mmtc's tunables (default), glibc's defaults,
 * or whatever GLIBC_TUNABLES this process was given.
 */
export function startMmtc(
  args: string[],
  ready: RegExp,
  options: { env?: Record<string, string>; malloc?: 'mmtc' | 'default' | 'inherit' } = {},
): Promise<Started> {
  const env: Record<string, string | undefined> = { ...process.env, MMTC_MALLOC_HUGETLB: '0', MMTC_EXIT_WITH_PARENT: String(process.pid), ...options.env };
  if (options.malloc === 'default') {
    delete env.GLIBC_TUNABLES;
    delete env.MMTC_GLIBC_TUNABLES;
  } else if (options.malloc !== 'inherit') {
    env.GLIBC_TUNABLES = MMTC_TUNABLES;
    env.MMTC_GLIBC_TUNABLES = MMTC_TUNABLES;
  }
  const child = spawn(process.execPath, [path.join(root, 'bin', 'mmtc.js'), ...args], { stdio: ['ignore', 'pipe', 'inherit'], env: env });
  track(child);
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`mmtc ${args.join(' ')} did not start within 60 s: ${out}`)), 60_000);
    child.stdout.on('data', (d: Buffer) => {
      if (out.length < 1 << 16) out += d.toString();
      const m = ready.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({ child, match: m[1]!, groups: m.slice(1) });
      }
    });
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`mmtc ${args.join(' ')} exited (${signal ?? code}): ${out}`));
    });
  });
}

/** Stop `child` with the others at the end (for processes not started by startMmtc). */
export function track(child: ChildProcess): ChildProcess {
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}

function stop(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    const kill = setTimeout(() => child.kill('SIGKILL'), 5_000);
    child.once('exit', () => {
      clearTimeout(kill);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

/** SIGTERM every process still running and wait until each has exited. */
export async function stopAll(): Promise<void> {
  await Promise.all([...children].map(stop));
}

/** In a benchmark's own child process: exit when the process named by MMTC_BENCH_PARENT is gone. */
export function exitWithParent(): void {
  const parent = Number(process.env.MMTC_BENCH_PARENT);
  if (!(parent > 0)) return;
  setInterval(() => {
    try {
      process.kill(parent, 0);
    } catch {
      // ESRCH: the parent is gone (EPERM: its pid is another user's process now, so gone too).
      void stopAll().finally(() => process.exit(1));
    }
  }, 500).unref();
}

process.once('exit', () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    void stopAll().finally(() => process.exit(130));
  });
}

/**
 * Run a benchmark's main: on success or failure every started process is stopped before the
 * process ends, and a failure exits with status 1 after printing its stack.
 */
export async function runBench(main: () => Promise<void>): Promise<void> {
  try {
    await main();
  } catch (err) {
    process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
    process.exitCode = 1;
  } finally {
    await stopAll();
  }
}
