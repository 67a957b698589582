// Runs the real `mmtc` command the way an operator does, for tests.
import { spawnSync } from 'node:child_process';
import path from 'node:path';

const bin = path.resolve(import.meta.dirname, '../../bin/mmtc.js');

export interface CliResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** Run `mmtc args…` with exactly `env` (plus PATH/HOME) so the host's SMG_* never leak in. */
export function runMmtc(args: string[], env: Record<string, string> = {}, cwd?: string): CliResult {
  const r = spawnSync(process.execPath, [bin, ...args], {
    encoding: 'utf8',
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
    cwd,
    timeout: 60_000,
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}
