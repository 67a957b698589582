#!/usr/bin/env node
// The one test command (`npm test`): type-check, vitest, Playwright, the reliability
// suite's short mode and the benchmark smoke (each when present), then a single closing line "N passed, N failed, N skipped" summed over every runner.
// Exits non-zero when anything failed or a runner could not report.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const results = path.join(root, '.test-results');
rmSync(results, { recursive: true, force: true });
mkdirSync(results, { recursive: true });

// eslint-disable-next-line no-control-regex -- the escape sequences of a terminal's colours, taken out of a failure's first line
const TERMINAL_COLOURS = /\x1b\[[0-9;]*m/g;

const totals = { passed: 0, failed: 0, skipped: 0 };
// What failed, by runner and name, printed just above the closing line so that the tail of a
// CI log (often all that is kept) says which test to look at.
const failures = [];
const bin = (name) => path.join(root, 'node_modules', '.bin', name);

// How long each runner took, printed above the closing line: CI's run must stay under 30
// minutes, and this says where the time goes.
const timings = [];
const started = performance.now();

function run(label, cmd, args, env = {}) {
  process.stdout.write(`\n== ${label}: ${cmd} ${args.join(' ')}\n`);
  const t = performance.now();
  const r = spawnSync(cmd, args, { cwd: root, stdio: 'inherit', env: { ...process.env, ...env } });
  timings.push(`${label} ${Math.round((performance.now() - t) / 1000)} s`);
  return r.status ?? 1;
}

function missingPrerequisite(packages) {
  totals.failed += 1;
  failures.push(`prerequisites: ${packages.join(' ')} missing`);
}
// Prerequisites from Debian: Pillow and numpy are the reference the preprocessing tests
// compare against. Installed when missing and we may (root with apt-get), else a clear stop.
function ensureDebianPackages(check, packages) {
  if (spawnSync('/bin/sh', ['-c', check], { stdio: 'ignore' }).status === 0) return true;
  const canInstall = process.getuid?.() === 0 && spawnSync('/bin/sh', ['-c', 'command -v apt-get'], { stdio: 'ignore' }).status === 0;
  if (!canInstall) {
    process.stdout.write(`missing prerequisites: install ${packages.join(' ')} (apt-get install -y ${packages.join(' ')})\n`);
    return false;
  }
  process.stdout.write(`installing ${packages.join(' ')} from Debian\n`);
  run('apt-get update', 'apt-get', ['update', '-qq']);
  return run('apt-get install', 'apt-get', ['install', '-y', '-qq', ...packages], { DEBIAN_FRONTEND: 'noninteractive' }) === 0;
}
if (!ensureDebianPackages("/usr/bin/python3 -c 'import PIL, numpy'", ['python3-pil', 'python3-numpy'])) missingPrerequisite(['python3-pil', 'python3-numpy']);
// torch + torchvision run the HF fast image-processor pipeline bench:preprocess compares against.
if (!process.argv.includes('--no-slow') && !ensureDebianPackages("/usr/bin/python3 -c 'import torch, torchvision'", ['python3-torch', 'python3-torchvision']))
  missingPrerequisite(['python3-torch', 'python3-torchvision']);
// Debian's Chromium drives the end-to-end specs and bench:ui (Playwright never downloads one).
if (!ensureDebianPackages('test -x /usr/bin/chromium', ['chromium'])) missingPrerequisite(['chromium']);
// The native JPEG decoder (native/jpeg, built by generate.mjs below) needs libjpeg-turbo's
// headers and a C toolchain; its tests check that it was built.
if (!ensureDebianPackages('test -f /usr/include/jpeglib.h && command -v cc && command -v g++ && command -v make', ['libjpeg62-turbo-dev', 'build-essential']))
  missingPrerequisite(['libjpeg62-turbo-dev', 'build-essential']);

// 0. Generated protobuf code must exist before anything compiles.
if (run('proto generation', process.execPath, [path.join(root, 'scripts', 'generate.mjs')]) !== 0) {
  totals.failed += 1;
  failures.push('proto generation: scripts/generate.mjs failed');
}

// 1. The static checks, one test each, two at a time (each is one CPU-bound process and they
// share nothing; run one after the other they took 106 s of CI's 30 minutes): the whole tree
// must compile, the core and shells (tsconfig.json) and the renderer with the e2e specs
// (renderer/tsconfig.json); ESLint over the whole tree (eslint.config.js: type-aware rules,
// the import boundaries, a reason for every disabled rule and for every dropped error) and
// Prettier's check (.prettierrc.json) (`npm run lint -- --fix` and `npm run format` mend most
// of what they report); every docs heading the sources cite (a file under docs/ and a heading
// in quotes) exists. Each one's output is printed whole when it ends.
const staticChecks = [
  // ESLint first: it takes as long as the others together.
  { label: 'lint', cmd: bin('eslint'), args: ['--max-warnings', '0', '.'], failure: 'lint: eslint . (npm run lint)' },
  { label: 'typecheck .', cmd: bin('tsc'), args: ['-p', '.'], failure: 'typecheck: tsc -p .' },
  { label: 'typecheck renderer', cmd: bin('tsc'), args: ['-p', 'renderer'], failure: 'typecheck: tsc -p renderer' },
  { label: 'format', cmd: bin('prettier'), args: ['--check', '--log-level', 'warn', '.'], failure: 'format: prettier --check . (npm run format writes it)' },
  {
    label: 'doc citations',
    cmd: process.execPath,
    args: [path.join(root, 'scripts', 'check-doc-citations.mjs')],
    failure: 'doc citations: node scripts/check-doc-citations.mjs',
  },
];
await runTwoAtATime(staticChecks);

/** Run `checks` two at a time, each's output buffered and printed whole when it ends; count each as one test. */
async function runTwoAtATime(checks) {
  const queue = [...checks];
  const t = performance.now();
  const one = async () => {
    for (let c = queue.shift(); c; c = queue.shift()) {
      const started = performance.now();
      const status = await new Promise((resolve) => {
        const child = spawn(c.cmd, c.args, { cwd: root, env: process.env, stdio: ['ignore', 'pipe', 'pipe'] });
        const out = [];
        child.stdout.on('data', (d) => out.push(d));
        child.stderr.on('data', (d) => out.push(d));
        child.on('error', (err) => {
          out.push(Buffer.from(`${err.message}\n`));
          resolve({ code: 1, out });
        });
        child.on('close', (code) => resolve({ code: code ?? 1, out }));
      });
      process.stdout.write(`\n== ${c.label}: ${path.basename(c.cmd)} ${c.args.join(' ')}\n${Buffer.concat(status.out).toString()}`);
      timings.push(`${c.label} ${Math.round((performance.now() - started) / 1000)} s`);
      if (status.code === 0) totals.passed += 1;
      else {
        totals.failed += 1;
        failures.push(c.failure);
      }
    }
  };
  await Promise.all([one(), one()]);
  timings.push(`static checks ${Math.round((performance.now() - t) / 1000)} s (two at a time)`);
}

// 2. vitest (unit and integration).
const vitestJson = path.join(results, 'vitest.json');
const vitestStatus = run('vitest', bin('vitest'), ['run', '--reporter=default', '--reporter=json', `--outputFile.json=${vitestJson}`]);
if (existsSync(vitestJson)) {
  const report = JSON.parse(readFileSync(vitestJson, 'utf8'));
  totals.passed += report.numPassedTests;
  totals.failed += report.numFailedTests;
  totals.skipped += report.numPendingTests + report.numTodoTests;
  // A suite that failed to load has no tests in it but must still fail the run.
  const brokenSuites = report.testResults.filter((s) => s.status === 'failed' && s.assertionResults.length === 0).length;
  totals.failed += brokenSuites;
  for (const suite of report.testResults) {
    const file = path.relative(root, suite.name);
    if (suite.status === 'failed' && suite.assertionResults.length === 0) failures.push(`vitest: ${file} (the file did not load)`);
    for (const t of suite.assertionResults) if (t.status === 'failed') failures.push(`vitest: ${file} > ${t.fullName}${because(t.failureMessages?.[0])}`);
  }
  if (vitestStatus !== 0 && report.numFailedTests === 0 && brokenSuites === 0) {
    totals.failed += 1;
    failures.push(`vitest: exited ${vitestStatus} with no failed test in its report`);
  }
} else {
  process.stdout.write('vitest wrote no report\n');
  totals.failed += 1;
  failures.push('vitest: wrote no report');
}

// 3. Playwright end-to-end specs, once the e2e folder has any. They drive the built
// renderer, so it is built first; a failed build fails the run and says so (the specs
// would otherwise test a stale or missing UI).
const playwrightConfig = path.join(root, 'playwright.config.ts');
if (existsSync(playwrightConfig)) {
  if (run('renderer build', bin('vite'), ['build', '--config', path.join(root, 'renderer', 'vite.config.ts')]) !== 0) {
    process.stdout.write('the renderer did not build (vite build --config renderer/vite.config.ts failed above): the Playwright specs were not run\n');
    totals.failed += 1;
    failures.push('renderer build: failed, so the Playwright specs did not run');
  } else {
    const pwJson = path.join(results, 'playwright.json');
    const status = run('playwright', bin('playwright'), ['test', '--config', playwrightConfig], { PLAYWRIGHT_JSON_OUTPUT_NAME: pwJson });
    if (existsSync(pwJson)) {
      const stats = JSON.parse(readFileSync(pwJson, 'utf8')).stats;
      totals.passed += stats.expected + stats.flaky;
      totals.failed += stats.unexpected;
      totals.skipped += stats.skipped;
      failures.push(...playwrightFailures(JSON.parse(readFileSync(pwJson, 'utf8'))));
      if (status !== 0 && stats.unexpected === 0) {
        totals.failed += 1;
        failures.push(`playwright: exited ${status} with no unexpected test in its report`);
      }
    } else {
      process.stdout.write('playwright wrote no report\n');
      totals.failed += 1;
      failures.push('playwright: wrote no report');
    }
  }
}

/** ": <the first line of a failure message>", without colour codes and cut to 240 characters. */
function because(message) {
  if (!message) return '';
  const line =
    String(message)
      .replace(TERMINAL_COLOURS, '')
      .split('\n')
      .find((l) => l.trim()) ?? '';
  return line ? `: ${line.trim().slice(0, 240)}` : '';
}

/** "file > describe > title" of every Playwright test whose outcome was unexpected. */
function playwrightFailures(report) {
  const out = [];
  const walk = (suite, trail) => {
    const here = suite.title ? [...trail, suite.title] : trail;
    for (const spec of suite.specs ?? []) {
      for (const test of spec.tests ?? []) {
        if (test.status === 'unexpected') out.push(`playwright: ${[...here, spec.title].join(' > ')}${because(test.results?.at(-1)?.error?.message)}`);
      }
    }
    for (const child of suite.suites ?? []) walk(child, here);
  };
  for (const suite of report.suites ?? []) walk(suite, []);
  return out;
}

// 4 and 5. The reliability suite in its short mode and every benchmark in its quick mode
// (started and finished, nothing left behind; ratios are reported, not gated). Each writes
// a JSON report {passed, failed, skipped}; `--no-slow` leaves both out for a quick local run.
function countReport(label, file, status) {
  if (!existsSync(file)) {
    process.stdout.write(`${label} wrote no report\n`);
    totals.failed += 1;
    failures.push(`${label}: wrote no report`);
    return;
  }
  const report = JSON.parse(readFileSync(file, 'utf8'));
  totals.passed += report.passed;
  totals.failed += report.failed;
  totals.skipped += report.skipped ?? 0;
  for (const r of report.scenarios ?? report.results ?? [])
    if (r.status === 'failed') failures.push(`${label}: ${r.name}${because(r.error ?? r.details?.failures?.[0])}`);
  if (status !== 0 && report.failed === 0) {
    totals.failed += 1;
    failures.push(`${label}: exited ${status} with no failure in its report`);
  }
}
const slow = !process.argv.includes('--no-slow');
const scripts = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')).scripts ?? {};
if (slow && scripts['test:reliability']) {
  const json = path.join(results, 'reliability.json');
  countReport('the reliability suite', json, run('reliability (short)', 'npm', ['run', '--silent', 'test:reliability', '--', '--short', '--json', json]));
}
const benchSmoke = path.join(root, 'scripts', 'bench-smoke.mjs');
if (slow && existsSync(benchSmoke)) {
  const json = path.join(results, 'bench-smoke.json');
  countReport('the benchmark smoke', json, run('benchmarks (quick)', process.execPath, [benchSmoke, '--json', json]));
}

process.stdout.write(`\ntime: ${timings.join(', ')}; ${Math.round((performance.now() - started) / 1000)} s in all\n`);
if (failures.length > 0) {
  process.stdout.write(`\nfailed (${failures.length}):\n`);
  for (const f of failures.slice(0, 40)) process.stdout.write(`  ${f}\n`);
  if (failures.length > 40) process.stdout.write(`  … and ${failures.length - 40} more\n`);
}
const summary = `${totals.passed} passed, ${totals.failed} failed, ${totals.skipped} skipped`;
writeFileSync(path.join(results, 'summary.txt'), `${summary}\n`);
process.stdout.write(`\n${summary}\n`);
process.exitCode = totals.failed > 0 ? 1 : 0;
