// A private directory on the real /dev/shm tmpfs for one test file: SHM tests exercise the
// real file system but only ever see, sweep and delete files they created themselves.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, lutimesSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';

export function makeShmTestDir(): { dir: string; files(): string[]; remove(): void } {
  const dir = mkdtempSync(path.join('/dev/shm', 'mmtc-test-'));
  return {
    dir,
    files: () => readdirSync(dir).sort(),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** A pid that cannot be running: above the kernel's pid_max. */
export function deadPid(): number {
  return 4_194_304 + 1000 + Math.floor(Math.random() * 1000);
}

/** The name a router with `pid` would have given a file at `atMs` (ms since the epoch). */
export function tensorName(pid: number, atMs: number, seq = 1): string {
  return `smg-tokenspeed-${pid}-${BigInt(Math.round(atMs)) * 1_000_000n}-${seq}`;
}

/** Set an entry's mtime (and atime) without following a symlink: how tests age a file. */
export function setMtime(file: string, atMs: number): void {
  lutimesSync(file, new Date(atMs), new Date(atMs));
}

/** Write `content` to `dir/name` and date it `atMs`; returns the path. */
export function writeAt(dir: string, name: string, atMs: number, content: string | Uint8Array = 'x'): string {
  const file = path.join(dir, name);
  writeFileSync(file, content, { flag: 'wx' });
  setMtime(file, atMs);
  return file;
}

/** A real process that stays alive until kill(): a live pid that is not ours. */
export async function liveChild(): Promise<{ pid: number; child: ChildProcess; kill(): Promise<void> }> {
  const child = spawn('sleep', ['30'], { stdio: 'ignore' });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const pid = child.pid;
  if (pid === undefined) throw new Error('could not spawn sleep');
  // spawn returns before the child is certain to be visible; bounded wait for /proc/<pid>.
  for (let i = 0; i < 200 && !existsSync(`/proc/${pid}`); i++) await new Promise((r) => setTimeout(r, 5));
  return {
    pid,
    child,
    kill: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
    },
  };
}
