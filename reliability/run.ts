// The reliability suite: load, faults and fuzzing over real `mmtc` processes (docs/reliability.md).
//
//   npm run test:reliability                       full mode (about 14 minutes on 2 cores)
//   npm run test:reliability -- --short            CI mode (about 4 minutes)
//   npm run test:reliability -- --json report.json --seed 42 --only fuzz/yaml,faults/
//   npm run test:reliability -- --list
//
// The run re-executes itself in a private mount namespace with a fresh tmpfs on /dev/shm
// (unshare --mount; root), so it only ever sees, sweeps and deletes files it created; at the
// end it fails if any process it started is still running or any entry is left in that
// /dev/shm, and (from outside the namespace) if the host's /dev/shm holds a file named
// after one of its processes. Without that namespace (not root, or --no-namespace) every
// scenario that starts a router or `serve` is skipped: their start-up sweep would run on the
// host's /dev/shm. On SIGINT/SIGTERM the inner run stops every process it started and exits
// non-zero; its temporary files live in one directory (lib/tmp.ts) removed at the end.
// Every scenario prints its progress and, when it draws random inputs, its seed and the
// command that replays it. The JSON report is
// {passed, failed, skipped, scenarios: [{name, status, seconds, seed?, details}]}.
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { MARKER, markedProcesses, stopAll } from './lib/procs.ts';
import { NEEDS_PRIVATE_SHM, Suite, type ScenarioResult } from './lib/suite.ts';
import { removeRunDir } from './lib/tmp.ts';
import { SCENARIOS, GROUPS, WITHOUT_ROUTER } from './scenarios/index.ts';

interface Args {
  short: boolean;
  json?: string;
  seed: number;
  seedGiven: boolean;
  only: string[];
  list: boolean;
  noNamespace: boolean;
}

function parseArgs(argv: string[]): Args {
  const inherited = Number(process.env.MMTC_RELIABILITY_SEED);
  const a: Args = {
    short: false,
    seed: Number.isSafeInteger(inherited) && inherited >= 0 && process.env.MMTC_RELIABILITY_SEED ? inherited : randomBytes(4).readUInt32BE() % 1_000_000_000,
    seedGiven: false,
    only: [],
    list: false,
    noNamespace: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const value = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${arg} needs a value`);
      return v;
    };
    if (arg === '--short') a.short = true;
    else if (arg === '--full') a.short = false;
    else if (arg === '--json') a.json = path.resolve(value());
    else if (arg === '--seed') {
      a.seed = Number(value());
      a.seedGiven = true;
      if (!Number.isSafeInteger(a.seed) || a.seed < 0) throw new Error('--seed takes a non-negative integer');
    } else if (arg === '--only')
      a.only.push(
        ...value()
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean),
      );
    else if (arg === '--list') a.list = true;
    else if (arg === '--no-namespace') a.noNamespace = true;
    else throw new Error(`unknown argument ${arg} (see the header of reliability/run.ts)`);
  }
  return a;
}

const log = (line: string) => process.stdout.write(`${line}\n`);

function writeReport(file: string | undefined, results: ScenarioResult[], extra: Record<string, unknown>): void {
  const counts = {
    passed: results.filter((r) => r.status === 'passed').length,
    failed: results.filter((r) => r.status === 'failed').length,
    skipped: results.filter((r) => r.status === 'skipped').length,
  };
  if (!file) return;
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify({ ...counts, ...extra, scenarios: results }, null, 2)}\n`);
}

/** Outside the namespace: start the real run inside one, then check the host's /dev/shm for files of its processes. */
async function outer(args: Args, argv: string[]): Promise<number> {
  const id = `${Date.now().toString(36)}-${randomBytes(3).toString('hex')}`;
  const pidFile = path.join(tmpdir(), `mmtc-reliability-${id}.pids`);
  const child = spawn('unshare', ['--mount', '--propagation', 'private', '--', process.execPath, ...process.execArgv, process.argv[1]!, ...argv], {
    stdio: 'inherit',
    env: { ...process.env, MMTC_RELIABILITY_INNER: '1', [MARKER]: id, MMTC_RELIABILITY_PIDFILE: pidFile, MMTC_RELIABILITY_SEED: String(args.seed) },
  });
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => child.kill(signal));
  const code = await new Promise<number>((resolve) => child.on('exit', (c, s) => resolve(c ?? (s ? 128 : 1))));
  // The inner run removes its temporary directory (lib/tmp.ts) itself; this is for one killed outright.
  rmSync(path.join(tmpdir(), `mmtc-reliability-${id}`), { recursive: true, force: true });
  // The inner run lists every pid it started; none of them may have left a file in the host's /dev/shm.
  let pids: number[] = [];
  try {
    pids = readFileSync(pidFile, 'utf8').split('\n').filter(Boolean).map(Number);
    rmSync(pidFile, { force: true });
  } catch {
    /* the inner run died before writing it */
  }
  const pidSet = new Set(pids);
  const hostLeft = readdirSync('/dev/shm').filter((n) => {
    const m = /^smg-tokenspeed-(?:probe-|cache-\d+-)?(\d+)/.exec(n);
    return m !== null && pidSet.has(Number(m[1]));
  });
  if (hostLeft.length > 0) {
    log(`✘ the host's /dev/shm holds ${hostLeft.length} files named after processes of this run: ${hostLeft.slice(0, 5).join(', ')}`);
    if (args.json && existsSync(args.json)) {
      const report = JSON.parse(readFileSync(args.json, 'utf8'));
      report.failed += 1;
      report.scenarios.push({ name: 'cleanup/host-shm', status: 'failed', seconds: 0, details: { files: hostLeft } });
      writeFileSync(args.json, `${JSON.stringify(report, null, 2)}\n`);
    }
    return 1;
  }
  return code;
}

async function inner(args: Args): Promise<number> {
  process.env[MARKER] ??= `${Date.now().toString(36)}-${randomBytes(3).toString('hex')}`;
  const namespaced = process.env.MMTC_RELIABILITY_INNER === '1';
  if (namespaced) {
    // Our own /dev/shm: a fresh tmpfs the size of a generous container's, in this namespace only.
    const before = statSync('/dev/shm').dev;
    const m = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=4g,mode=1777', 'mmtc-reliability', '/dev/shm'], { encoding: 'utf8' });
    if (m.status !== 0 || statSync('/dev/shm').dev === before) {
      log(`cannot mount a private tmpfs on /dev/shm: ${m.stderr}`);
      return 1;
    }
  }
  const t0 = performance.now();
  log(
    `mmtc reliability suite, ${args.short ? 'short' : 'full'} mode, seed ${args.seed}${args.seedGiven ? ' (given)' : ''}; /dev/shm: ${namespaced ? "a private 4 GiB tmpfs in this run's own mount namespace" : `the host's (no namespace: every scenario that starts a router is skipped, ${NEEDS_PRIVATE_SHM})`}; Node ${process.version}`,
  );
  if (args.only.length) log(`only: ${args.only.join(', ')}`);
  const suite = new Suite({
    short: args.short,
    seed: args.seed,
    only: args.only,
    log,
    privateShm: namespaced,
    startsRouter: (name) => !WITHOUT_ROUTER.includes(name),
  });
  const unknown = args.only.filter((o) => !SCENARIOS.some((s) => s === o || s.startsWith(`${o.replace(/\/$/, '')}/`)));
  if (unknown.length) {
    log(`no scenario matches ${unknown.join(', ')}; run with --list`);
    return 2;
  }
  const pids = new Set<number>();
  const pidTimer = setInterval(() => {
    for (const p of markedProcesses()) pids.add(p.pid);
  }, 250);
  const writePids = () => {
    if (process.env.MMTC_RELIABILITY_PIDFILE) writeFileSync(process.env.MMTC_RELIABILITY_PIDFILE, [...pids].join('\n'));
  };
  // Ctrl-C or a kill: stop everything this run started (processes in their own process groups
  // and pid namespaces, the /dev/shm namespace holders, the worker running as nobody, fuzz
  // children, the browser), then exit non-zero. Ctrl-C reaches this process twice (from the
  // terminal and forwarded by the outer run): a repeat within 3 s is the same one; a later one
  // exits at once.
  let interruptedAt: number | undefined;
  const onSignal = (signal: NodeJS.Signals) => {
    const code = signal === 'SIGINT' ? 130 : signal === 'SIGHUP' ? 129 : 143;
    if (interruptedAt !== undefined) {
      if (performance.now() - interruptedAt > 3000) process.exit(code);
      return;
    }
    interruptedAt = performance.now();
    clearInterval(pidTimer);
    log(`\n${signal}: stopping every process this run started`);
    const hard = setTimeout(() => process.exit(code), 15_000);
    void (async () => {
      try {
        for (const p of markedProcesses()) pids.add(p.pid);
        await stopAll('SIGKILL');
      } catch {
        /* what is left is killed below */
      } finally {
        // Whatever carries the run's marker and is still there (a process of a pid namespace, the browser).
        for (const p of markedProcesses()) {
          pids.add(p.pid);
          try {
            process.kill(p.pid, 'SIGKILL');
          } catch {
            /* gone */
          }
        }
        try {
          writePids();
          removeRunDir();
        } catch {
          /* exiting anyway */
        }
        clearTimeout(hard);
        log(`${signal}: stopped; exiting ${code}`);
        process.exit(code);
      }
    })();
  };
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, onSignal);
  try {
    for (const g of GROUPS) await g(suite);
  } finally {
    clearInterval(pidTimer);
    await stopAll('SIGKILL');
    removeRunDir();
  }
  for (const p of markedProcesses()) pids.add(p.pid);
  writePids();

  // Nothing of ours may be left: no process, no entry in /dev/shm.
  const cleanupStart = performance.now();
  await new Promise((r) => setTimeout(r, 500));
  const procs = markedProcesses();
  for (const p of procs) {
    try {
      process.kill(p.pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
  const entries = namespaced
    ? readdirSync('/dev/shm')
    : readdirSync('/dev/shm').filter((n) => pids.has(Number(/^smg-tokenspeed-(?:probe-|cache-\d+-)?(\d+)/.exec(n)?.[1])));
  const cleanupFailures = [...procs.map((p) => `process ${p.pid} still running: ${p.cmd}`), ...entries.map((e) => `/dev/shm/${e} left behind`)];
  {
    suite.results.push({
      name: 'cleanup/no-leftovers',
      status: cleanupFailures.length ? 'failed' : 'passed',
      seconds: Math.round((performance.now() - cleanupStart) / 100) / 10,
      details: {
        processes_left: procs.length,
        shm_entries_left: entries.length,
        ...(cleanupFailures.length ? { failures: cleanupFailures.slice(0, 50) } : {}),
        summary: `${procs.length} processes and ${entries.length} /dev/shm entries left`,
      },
    });
    log(
      `[${suite.elapsed()}] ${cleanupFailures.length ? '✘' : '✔'} cleanup/no-leftovers: ${procs.length} processes and ${entries.length} /dev/shm entries left${cleanupFailures.length ? `: ${cleanupFailures.slice(0, 5).join('; ')}` : ''}`,
    );
  }
  if (namespaced) for (const e of entries) rmSync(path.join('/dev/shm', e), { force: true, recursive: true });

  const results = suite.results;
  const failed = results.filter((r) => r.status === 'failed');
  const seconds = Math.round((performance.now() - t0) / 1000);
  writeReport(args.json, results, { mode: args.short ? 'short' : 'full', seed: args.seed, seconds, node: process.version, date: new Date().toISOString() });
  log('');
  log(
    `${results.filter((r) => r.status === 'passed').length} passed, ${failed.length} failed, ${results.filter((r) => r.status === 'skipped').length} skipped in ${seconds} s (seed ${args.seed})`,
  );
  for (const f of failed)
    log(
      `  ✘ ${f.name}${f.seed !== undefined ? ` (re-run: npm run test:reliability -- --seed ${f.seed} --only ${f.name})` : ''}: ${String(
        (f.details.failures as string[] | undefined)?.[0] ?? '',
      )
        .split('\n')[0]!
        .slice(0, 300)}`,
    );
  if (args.json) log(`report: ${args.json}`);
  return failed.length ? 1 : 0;
}

const argv = process.argv.slice(2);
let args: Args;
try {
  args = parseArgs(argv);
} catch (err) {
  log(`error: ${(err as Error).message}`);
  process.exit(2);
}
if (args.list) {
  for (const s of SCENARIOS) log(s);
  process.exit(0);
}
const canNamespace = process.getuid?.() === 0 && spawnSync('unshare', ['--mount', 'true']).status === 0;
let code: number;
if (process.env.MMTC_RELIABILITY_INNER !== '1' && canNamespace && !args.noNamespace) code = await outer(args, argv);
else {
  if (!canNamespace && !args.noNamespace)
    log(
      `note: not root (or unshare unavailable): running on the host's /dev/shm; every scenario that starts a router or serve is skipped (${NEEDS_PRIVATE_SHM})`,
    );
  code = await inner(args);
}
process.exit(code);
