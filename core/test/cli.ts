// Runs the real `mmtc` command the way an operator does, for tests.
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import path from 'node:path';

const bin = path.resolve(import.meta.dirname, '../../bin/mmtc.js');

export interface CliResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** A config directory that does not exist: `mmtc config …` then reads no console file unless a test gives one. */
const NO_CONFIG_HOME = path.join(tmpdir(), `mmtc-test-no-config-${process.pid}`);

/** Run `mmtc args…` with exactly `env` (plus PATH/HOME) so the host's SMG_* (and the operator's console file) never leak in. */
export function runMmtc(args: string[], env: Record<string, string> = {}, cwd?: string): CliResult {
  const r = spawnSync(process.execPath, [bin, ...args], {
    encoding: 'utf8',
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', XDG_CONFIG_HOME: NO_CONFIG_HOME, ...env },
    cwd,
    timeout: 60_000,
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/**
 * Start a long-running `mmtc …` (e.g. `worker`) and wait for a stdout line matching `ready`.
 * `prefix` runs it under another command: `unshare --pid --fork --mount-proc`, `setpriv --reuid=nobody …`.
 */
export async function startMmtc(
  args: string[],
  ready: RegExp,
  env: Record<string, string> = {},
  prefix: string[] = [],
): Promise<{ line: string; output(): string; errors(): string; pid: number; stop(signal?: NodeJS.Signals): Promise<number | null> }> {
  const { spawn } = await import('node:child_process');
  // MMTC_MALLOC_HUGETLB=0: no re-exec, so the pid we hold is the process doing the work.
  const argv = [...prefix, process.execPath, bin, ...args];
  const child = spawn(argv[0]!, argv.slice(1), {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', MMTC_MALLOC_HUGETLB: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const line = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`mmtc ${args.join(' ')} not ready after 30 s: ${out}${err}`)), 30_000);
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      const m = out.split('\n').find((l) => ready.test(l));
      if (m) {
        clearTimeout(timer);
        resolve(m);
      }
    });
    child.on('exit', (code) => reject(new Error(`mmtc ${args.join(' ')} exited ${code}: ${out}${err}`)));
  });
  return {
    line,
    output: () => out,
    errors: () => err,
    pid: child.pid!,
    stop: (signal: NodeJS.Signals = 'SIGTERM') =>
      new Promise((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve(child.exitCode);
        child.removeAllListeners('exit');
        child.on('exit', (code) => resolve(code));
        child.kill(signal);
      }),
  };
}
