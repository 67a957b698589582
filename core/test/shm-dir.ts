// A private directory on the real /dev/shm tmpfs for one test file: SHM tests exercise the
// real file system but only ever see, sweep and delete files they created themselves.
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
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
