#!/usr/bin/env node
// The benchmark smoke (CI): every benchmark in its quick mode, one after another. Each must
// start and finish with exit status 0, and leave nothing behind: no process it started
// (directly or not) still running, and no file of its processes in /dev/shm. Ratios and
// targets are printed by the benchmarks, never gated here.
//
//   node scripts/bench-smoke.mjs [--json FILE] [--only bench:a,bench:b]
//
// Writes {passed, failed, skipped, results: [{name, status, seconds, error?}]} to FILE and
// exits non-zero when any benchmark failed.
//
// How "ours" is told apart from what other people's tests run at the same time: every
// benchmark runs with MMTC_BENCH_SMOKE=<random token> in its environment, which each process
// it starts inherits (node, mmtc, Python, Chromium); /proc/<pid>/environ shows it. Processes
// carrying the token after a benchmark ended are left behind (reported, then stopped by
// pid); /dev/shm entries named after one of their pids (smg-tokenspeed-<pid>-…, the probe
// smg-tokenspeed-probe-<pid>, pixel-cache entries smg-tokenspeed-cache-<pidns>-<pid>-…) are files left behind (reported, then removed).
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const argv = process.argv.slice(2);
const opt = (name) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : undefined);
const jsonOut = opt('--json');
const only = opt('--only')?.split(',');
const SHM = '/dev/shm';

// Quick-mode sizes are the benchmarks' own (--quick); the budgets are generous upper bounds
// on this machine kind (2 cores), so a hung benchmark fails instead of stalling CI.
const BENCHES = [
  { name: 'bench:dtype', args: ['--quick'], timeoutS: 120 },
  { name: 'bench:transport', args: ['--quick'], timeoutS: 300 },
  { name: 'bench:preprocess', args: ['--quick'], timeoutS: 300 },
  { name: 'bench:router', args: ['--quick'], timeoutS: 300 },
  { name: 'bench:epd', args: ['--quick'], timeoutS: 240 },
  { name: 'bench:cache', args: ['--quick'], timeoutS: 240 },
  { name: 'bench:console', args: ['--quick'], timeoutS: 180 },
  { name: 'bench:memory', args: ['--quick'], timeoutS: 300 },
  {
    name: 'bench:ui',
    args: ['--quick'],
    timeoutS: 300,
    // Debian's Chromium and the built renderer (built here when missing).
    skip: () => (existsSync('/usr/bin/chromium') ? undefined : '/usr/bin/chromium is not installed (apt-get install chromium)'),
    before: () =>
      existsSync(path.join(root, 'dist', 'renderer', 'index.html'))
        ? 0
        : spawnSync('npm', ['run', '--silent', 'build:renderer'], { cwd: root, stdio: 'inherit' }).status,
  },
];

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Pids of live processes whose environment carries `token`. */
function processesWith(token) {
  const needle = `MMTC_BENCH_SMOKE=${token}`;
  const pids = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      if (readFileSync(`/proc/${entry}/environ`).includes(needle)) pids.push(Number(entry));
    } catch {
      /* gone, or not ours to read */
    }
  }
  return pids;
}

function commandOf(pid) {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim().slice(0, 160);
  } catch {
    return '?'; // exited meanwhile: the report names it by pid alone
  }
}

function isZombie(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return true; // reaped meanwhile (no /proc entry): as finished as a zombie
  }
}

/** /dev/shm entries named after one of `pids`. */
function shmFilesOf(pids) {
  const set = new Set(pids.map(String));
  let names;
  try {
    names = readdirSync(SHM);
  } catch {
    return []; // no /dev/shm on this host: nothing can have been left there
  }
  return names.filter((n) => {
    const m = /^smg-tokenspeed-(?:probe-|cache-\d+-)?(\d+)(?:-|$)/.exec(n);
    return m !== null && set.has(m[1]);
  });
}

async function runOne(bench) {
  const started = performance.now();
  const seconds = () => Math.round((performance.now() - started) / 100) / 10;
  const skipWhy = bench.skip?.();
  if (skipWhy) return { name: bench.name, status: 'skipped', seconds: 0, error: skipWhy };
  if (bench.before && bench.before() !== 0) return { name: bench.name, status: 'failed', seconds: seconds(), error: 'its preparation failed (see above)' };

  const token = randomBytes(8).toString('hex');
  process.stdout.write(`\n== ${bench.name} ${bench.args.join(' ')}\n`);
  const child = spawn('npm', ['run', '--silent', bench.name, '--', ...bench.args], {
    cwd: root,
    stdio: ['ignore', 'inherit', 'inherit'],
    env: { ...process.env, MMTC_BENCH_SMOKE: token },
    detached: true, // its own process group, so a timeout can stop all of it
  });
  const seen = new Set([child.pid]);
  const watch = setInterval(() => processesWith(token).forEach((p) => seen.add(p)), 250);
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    try {
      process.kill(-child.pid, 'SIGTERM');
    } catch {
      /* already gone */
    }
    setTimeout(() => {
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    }, 10_000).unref();
  }, bench.timeoutS * 1000);
  const { code, signal } = await new Promise((resolve) => child.once('exit', (c, s) => resolve({ code: c, signal: s })));
  clearTimeout(timer);
  clearInterval(watch);

  const problems = [];
  if (timedOut) problems.push(`did not finish within ${bench.timeoutS} s`);
  else if (code !== 0) problems.push(`exited with ${signal ?? `status ${code}`}`);
  // Processes started with MMTC_EXIT_WITH_PARENT notice within half a second; give stragglers a few.
  let left = processesWith(token).filter((p) => !isZombie(p));
  for (let i = 0; i < 30 && left.length > 0; i++) {
    await sleep(200);
    left = processesWith(token).filter((p) => !isZombie(p));
  }
  left.forEach((p) => seen.add(p));
  if (left.length > 0) {
    problems.push(`left ${left.length} process${left.length === 1 ? '' : 'es'} running: ${left.map((p) => `${p} (${commandOf(p)})`).join('; ')}`);
    for (const p of left) {
      try {
        process.kill(p, 'SIGKILL');
      } catch {
        /* gone meanwhile */
      }
    }
  }
  const files = shmFilesOf([...seen]);
  if (files.length > 0) {
    problems.push(`left ${files.length} file${files.length === 1 ? '' : 's'} in ${SHM}: ${files.slice(0, 5).join(', ')}${files.length > 5 ? ', …' : ''}`);
    for (const f of files) rmSync(path.join(SHM, f), { force: true });
  }
  const result = { name: bench.name, status: problems.length ? 'failed' : 'passed', seconds: seconds() };
  if (problems.length) result.error = problems.join('; ');
  process.stdout.write(`== ${bench.name}: ${result.status} in ${result.seconds} s${result.error ? ` (${result.error})` : ''}\n`);
  return result;
}

const results = [];
const t0 = performance.now();
for (const bench of BENCHES) {
  if (only && !only.includes(bench.name)) continue;
  results.push(await runOne(bench));
}
const report = {
  passed: results.filter((r) => r.status === 'passed').length,
  failed: results.filter((r) => r.status === 'failed').length,
  skipped: results.filter((r) => r.status === 'skipped').length,
  results,
};
process.stdout.write(
  `\nbenchmark smoke: ${report.passed} passed, ${report.failed} failed, ${report.skipped} skipped in ${((performance.now() - t0) / 1000).toFixed(0)} s\n`,
);
for (const r of results)
  process.stdout.write(`  ${r.status.padEnd(7)} ${r.name.padEnd(18)} ${String(r.seconds).padStart(6)} s${r.error ? `  ${r.error}` : ''}\n`);
if (jsonOut) writeFileSync(jsonOut, `${JSON.stringify(report, null, 2)}\n`);
process.exitCode = report.failed > 0 ? 1 : 0;
