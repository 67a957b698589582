// One directory for every temporary file of a run (config files, the processes' XDG config
// homes, empty working directories): /tmp/mmtc-reliability-<run id>/, removed by run.ts when
// the run ends, whether it passed, failed or was interrupted.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { runId } from './procs.ts';

let dir: string | undefined;

/** The run's directory, created on first use. */
export function runDir(): string {
  if (!dir) {
    dir = path.join(tmpdir(), `mmtc-reliability-${runId()}`);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
  }
  return dir;
}

/** A fresh directory inside the run's. */
export function tempDir(prefix: string): string {
  return mkdtempSync(path.join(runDir(), `${prefix}-`));
}

/** Remove the run's directory and everything in it (run.ts, at the end). */
export function removeRunDir(): void {
  const d = dir ?? path.join(tmpdir(), `mmtc-reliability-${runId()}`);
  dir = undefined;
  rmSync(d, { recursive: true, force: true });
}
