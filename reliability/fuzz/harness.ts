// Seeded fuzzing of in-process targets (the YAML loader, the env parser, the CLI flags, the
// worker-side reader), run in a child process so that a hang is caught: the child reports
// every case it starts, and the parent kills it when one takes longer than its bound and
// reports the seed and the case. Each case draws from its own generator (seed, case index),
// so `--seed N --only <scenario>` replays exactly, and a failure names the case to look at.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { baseEnv, ROOT, trackGroup } from '../lib/procs.ts';
import type { T } from '../lib/suite.ts';

export interface CaseOutcome {
  /** accepted: a valid input, taken; rejected: refused with a clear error, as it must be. */
  kind: 'accepted' | 'rejected';
  /** What kind of input or refusal, for the report's tally. */
  label?: string;
  /** Set when the target misbehaved: the failure, with what it got. */
  problem?: string;
  input?: string;
}

export interface FuzzResult {
  tried: number;
  accepted: number;
  rejected: number;
  labels: Record<string, number>;
  failures: Array<{ case: number; problem: string; input?: string }>;
  slowest: { case: number; ms: number };
  stoppedBy: 'count' | 'time';
}

export interface FuzzChildOptions {
  target: string;
  seed: number;
  count: number;
  seconds: number;
  /** A case running longer than this is a hang. */
  caseTimeoutMs?: number;
  /** A prefix for the child (setpriv to run as another user). */
  prefix?: string[];
  env?: Record<string, string>;
  args?: string[];
}

/** Run one fuzz target in a child process; a hang fails with the case it hung on. */
export function fuzzInChild(o: FuzzChildOptions): Promise<FuzzResult & { hang?: { case: number } }> {
  const tsx = path.join(ROOT, 'node_modules', 'tsx', 'dist', 'cli.mjs');
  const argv = [
    ...(o.prefix ?? []),
    process.execPath,
    tsx,
    path.join(ROOT, 'reliability', 'fuzz', 'child.ts'),
    o.target,
    String(o.seed),
    String(o.count),
    String(o.seconds),
    ...(o.args ?? []),
  ];
  const child = spawn(argv[0]!, argv.slice(1), { cwd: ROOT, env: baseEnv(o.env), stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  // Stopped with the scenario's processes (its time bound) and the run's (Ctrl-C).
  const untrack = trackGroup(child.pid);
  let out = '';
  let err = '';
  let current = -1;
  let lastProgress = Date.now();
  return new Promise((resolve, reject) => {
    const watchdog = setInterval(() => {
      if (Date.now() - lastProgress > (o.caseTimeoutMs ?? 15_000)) {
        clearInterval(watchdog);
        try {
          process.kill(-child.pid!, 'SIGKILL');
        } catch {
          /* gone */
        }
        resolve({
          tried: current + 1,
          accepted: 0,
          rejected: 0,
          labels: {},
          failures: [{ case: current, problem: `case ${current} did not finish within ${(o.caseTimeoutMs ?? 15_000) / 1000} s (a hang)` }],
          slowest: { case: current, ms: Infinity },
          stoppedBy: 'time',
          hang: { case: current },
        });
      }
    }, 250);
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      const lines = out.split('\n');
      out = lines.pop()!;
      for (const line of lines) {
        if (line.startsWith('CASE ')) {
          current = Number(line.slice(5));
          lastProgress = Date.now();
        } else if (line.startsWith('RESULT ')) {
          clearInterval(watchdog);
          resolve(JSON.parse(line.slice(7)));
        }
      }
    });
    child.stderr.on('data', (d: Buffer) => {
      err += d.toString();
      if (err.length > 100_000) err = err.slice(-50_000);
    });
    child.on('error', (e) => {
      clearInterval(watchdog);
      untrack();
      reject(new Error(`fuzz target ${o.target} could not start: ${e.message}`));
    });
    // 'close', not 'exit': 'exit' can come before the last chunk of stdout (the RESULT line) is read.
    child.on('close', (code, signal) => {
      clearInterval(watchdog);
      untrack();
      // A last line without its newline.
      if (out.startsWith('RESULT ')) {
        try {
          return resolve(JSON.parse(out.slice(7)));
        } catch {
          /* cut: reported below */
        }
      }
      reject(new Error(`fuzz target ${o.target} exited (${code ?? signal}) without a result at case ${current}: ${err.slice(-2000)}`));
    });
  });
}

/** The scenario's verdict and figures from a fuzz result. */
export function reportFuzz(t: T, r: FuzzResult & { hang?: { case: number } }, what: string): void {
  for (const f of r.failures.slice(0, 10)) t.check(false, `case ${f.case}: ${f.problem}${f.input ? ` — input ${f.input.slice(0, 300)}` : ''}`);
  t.check(r.tried > 0, 'no case was tried');
  t.note('tried', r.tried);
  t.note('accepted', r.accepted);
  t.note('rejected', r.rejected);
  t.note('failed_cases', r.failures.length);
  t.note('kinds', r.labels);
  t.note('slowest_case_ms', Math.round(r.slowest.ms));
  t.note('stopped_by', r.stoppedBy);
  t.summary(
    `${r.tried} ${what} (${r.accepted} accepted, ${r.rejected} rejected with a clear error), ${r.failures.length} failures${r.hang ? `, HANG at case ${r.hang.case}` : ''}; slowest case ${Math.round(r.slowest.ms)} ms; stopped by ${r.stoppedBy}`,
  );
}
