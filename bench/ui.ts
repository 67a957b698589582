// UI benchmark: the Traffic screen under 5,000 tensor events a second for 30 s, in Debian's
// Chromium through playwright-core, against the real console binding (bench/console-server.ts
// publishes synthetic events into the router's own bus, so they reach the page through the
// real WebSocket stream). It measures frame times in the page (requestAnimationFrame deltas)
// and the latency of a click on a path filter until the table shows only the filtered rows.
// Targets (issue 11): median frame < 20 ms, p95 < 50 ms, filter click < 100 ms.
//
// Usage: npm run bench:ui [-- --quick]   (--quick: 5 s, a CI smoke run)
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { chromium, type Browser, type Page } from 'playwright-core';
import { ensureRendererBuilt } from '../core/cli/renderer-build.ts';

const root = path.resolve(import.meta.dirname, '..');
const quick = process.argv.includes('--quick');
const RATE = 5_000;
const MEASURE_MS = quick ? 5_000 : 30_000;
const CLICKS = quick ? 3 : 7;
const TARGET = { median: 20, p95: 50, click: 100 };

const percentile = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? NaN;
};

let published = 0;
function startConsoleServer(): Promise<{ child: ChildProcess; info: { console: string; token: string } }> {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(root, 'bench', 'console-server.ts'), '--events-per-second', String(RATE)], {
    cwd: root,
    env: { ...process.env, MMTC_MALLOC_HUGETLB: '0' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('bench/console-server.ts printed no console URL within 60 s')), 60_000);
    const lines = createInterface({ input: child.stdout });
    lines.on('line', (line) => {
      const m = /^published (\d+)/.exec(line);
      if (m) published = Number(m[1]);
      if (!line.startsWith('{')) return;
      clearTimeout(timer);
      resolve({ child, info: JSON.parse(line) as { console: string; token: string } });
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`bench/console-server.ts exited with ${code} before printing its URL`));
    });
  });
}

function stop(child: ChildProcess | undefined): Promise<void> {
  return new Promise((resolve) => {
    if (!child || child.exitCode !== null || child.signalCode !== null) return resolve();
    const kill = setTimeout(() => child.kill('SIGKILL'), 5_000);
    child.once('exit', () => {
      clearTimeout(kill);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

/** Click a path filter inside the page and time until every rendered row has that path. */
async function clickLatency(page: Page, path: 'shm' | 'inline'): Promise<number> {
  return page.evaluate<number>(`new Promise((resolve, reject) => {
    const p = ${JSON.stringify(path)};
    const input = document.querySelector('[data-testid="filter-path-' + p + '"]');
    if (!input) return reject(new Error('no path filter on the page'));
    const t0 = performance.now();
    input.click();
    const check = () => {
      const cells = [...document.querySelectorAll('[data-testid="event-table"] [data-path]')];
      if (cells.length > 0 && cells.every((c) => c.getAttribute('data-path') === p)) return resolve(performance.now() - t0);
      if (performance.now() - t0 > 5000) return reject(new Error('the table did not show only ' + p + ' rows within 5 s'));
      requestAnimationFrame(check);
    };
    check();
  })`);
}

let child: ChildProcess | undefined;
let browser: Browser | undefined;
let failed = false;
// The Traffic screen is the built UI: built here when missing or stale, or the run stops in one line.
const notBuilt = ensureRendererBuilt();
if (notBuilt) {
  process.stderr.write(`bench:ui: ${notBuilt}\n`);
  process.exit(1);
}
try {
  const started = await startConsoleServer();
  child = started.child;
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  const page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(`${started.info.console}#token=${started.info.token}`);
  await page
    .getByRole('navigation', { name: 'Screens' })
    .getByRole('link', { name: /^Traffic/ })
    .click();
  await page.getByTestId('event-table').locator('[data-path]').first().waitFor({ timeout: 20_000 });
  // Warm-up, then frame deltas collected in the page itself.
  await page.waitForTimeout(1_000);
  // Page scripts as strings: tsx's keepNames helpers (__name) do not exist in the page.
  await page.evaluate(`(() => {
    window.__long = [];
    new PerformanceObserver((list) => { for (const e of list.getEntries()) window.__long.push(e.duration); }).observe({ type: 'longtask' });
    window.__frames = [];
    window.__stop = false;
    let last = performance.now();
    const tick = (t) => {
      window.__frames.push(t - last);
      last = t;
      if (!window.__stop) requestAnimationFrame(tick);
    };
    requestAnimationFrame((t) => { last = t; requestAnimationFrame(tick); });
  })()`);
  const publishedAtStart = published;
  await page.waitForTimeout(MEASURE_MS);
  const publishedDuring = published - publishedAtStart;
  const longTasks = await page.evaluate<number[]>('window.__long');
  const frames = await page.evaluate<number[]>('(() => { window.__stop = true; return window.__frames; })()');
  const rows = Number(((await page.getByTestId('row-count').textContent()) ?? '0').replace(/,/g, ''));
  const dropped = /[\d,]+ dropped/.exec((await page.getByTestId('dropped').textContent()) ?? '')?.[0] ?? 'dropped count not shown';

  const clicks: number[] = [];
  for (let i = 0; i < CLICKS; i++) {
    clicks.push(await clickLatency(page, i % 2 === 0 ? 'shm' : 'inline'));
    await page.waitForTimeout(300);
  }

  const median = percentile(frames, 50);
  const p95 = percentile(frames, 95);
  const clickMedian = percentile(clicks, 50);
  const clickMax = Math.max(...clicks);
  const line = (ok: boolean, what: string) => {
    if (!ok) failed = true;
    process.stdout.write(`${ok ? 'PASS' : 'MISS'} ${what}\n`);
  };
  const blocking = longTasks.reduce((n, d) => n + Math.max(0, d - 50), 0);
  process.stdout.write(
    `\nTraffic screen at ${RATE} events/s for ${MEASURE_MS / 1000} s: the server published about ${publishedDuring.toLocaleString('en-US')} events meanwhile; ${frames.length} frames, ${longTasks.length} long tasks (${blocking.toFixed(0)} ms blocking), ${rows.toLocaleString('en-US')} rows shown (of at most 10,000 kept), ${dropped}${errors.length ? `, page errors: ${errors.join('; ')}` : ''}\n`,
  );
  line(median < TARGET.median, `median frame time ${median.toFixed(1)} ms (target < ${TARGET.median} ms)`);
  line(p95 < TARGET.p95, `p95 frame time ${p95.toFixed(1)} ms (target < ${TARGET.p95} ms)`);
  line(
    clickMax < TARGET.click,
    `filter click until the table shows the filtered rows: median ${clickMedian.toFixed(1)} ms, worst ${clickMax.toFixed(1)} ms of ${clicks.length} (target < ${TARGET.click} ms)`,
  );
  line(errors.length === 0, `no page errors`);
  process.stdout.write(
    [
      '',
      `| metric (${RATE} events/s, ${MEASURE_MS / 1000} s${quick ? ', quick' : ''}) | measured | target |`,
      '|---|---:|---:|',
      `| median frame time | ${median.toFixed(1)} ms | < ${TARGET.median} ms |`,
      `| p95 frame time | ${p95.toFixed(1)} ms | < ${TARGET.p95} ms |`,
      `| filter click → filtered table (median / worst) | ${clickMedian.toFixed(1)} / ${clickMax.toFixed(1)} ms | < ${TARGET.click} ms |`,
      `| frames measured | ${frames.length} | |`,
      `| long tasks (> 50 ms) / total blocking | ${longTasks.length} / ${blocking.toFixed(0)} ms | |`,
      `| events published during the measurement | ${publishedDuring.toLocaleString('en-US')} | ${((RATE * MEASURE_MS) / 1000).toLocaleString('en-US')} |`,
      '',
    ].join('\n'),
  );
} catch (err) {
  failed = true;
  process.stderr.write(`bench:ui failed: ${(err as Error).stack ?? String(err)}\n`);
} finally {
  // close() failing (a crashed browser) changes nothing: Playwright kills the browsers it launched when this process exits.
  await browser?.close().catch(() => {});
  await stop(child);
}
process.exitCode = failed ? 1 : 0;
