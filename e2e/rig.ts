// The real backend for the end-to-end specs: `mmtc serve` with its own temp XDG_CONFIG_HOME
// and --config file, and real reference workers (`mmtc worker`), each a child process
// started the way an operator starts them. Everything is killed after the spec, and the
// spec checks that the serve process left no tensor file in /dev/shm.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect, test, type Page, type TestInfo } from '@playwright/test';
import type { WireRuntime } from '../core/config/schema.ts';

export const ROOT = path.resolve(import.meta.dirname, '..');
const BIN = path.join(ROOT, 'bin', 'mmtc.js');

/** The host's /dev/shm namespace token, `<boot_id>:<st_dev>` (docs/transport.md). */
export function hostToken(): { token: string; bootId: string; stDev: string } {
  const bootId = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  const stDev = String(statSync('/dev/shm', { bigint: true }).dev);
  return { token: `${bootId}:${stDev}`, bootId, stDev };
}

/** A token with this host's boot_id but another st_dev: a container without the host's /dev/shm. */
export function otherShmToken(): string {
  const { bootId, stDev } = hostToken();
  return `${bootId}:${stDev === '424242' ? '424243' : '424242'}`;
}

function baseEnv(extra: Record<string, string> = {}): Record<string, string> {
  // Exactly these variables, so the host's SMG_* never leak into the run.
  return { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/tmp', MMTC_MALLOC_HUGETLB: '0', ...extra };
}

interface Started {
  child: ChildProcess;
  match: RegExpMatchArray;
  output: () => string;
}

function startProcess(args: string[], ready: RegExp, env: Record<string, string>, timeoutMs = 45_000, prefix: string[] = []): Promise<Started> {
  // A prefix (setpriv …) execs node in its place, so the child is still the worker itself.
  const argv = [...prefix, process.execPath, BIN, ...args];
  const child = spawn(argv[0]!, argv.slice(1), { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`mmtc ${args.join(' ')} not ready after ${timeoutMs} ms:\n${out}`));
    }, timeoutMs);
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      const m = ready.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({ child, match: m, output: () => out });
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`mmtc ${args.join(' ')} exited with ${code} before it was ready:\n${out}`));
    });
  });
}

function stopProcess(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    const kill = setTimeout(() => child.kill('SIGKILL'), 5000);
    child.once('exit', () => {
      clearTimeout(kill);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

export interface Worker {
  url: string;
  stop(): Promise<void>;
}

export async function startWorker(
  runtime: WireRuntime,
  extra: string[] = [],
  options: { prefix?: string[]; env?: Record<string, string> } = {},
): Promise<Worker> {
  const s = await startProcess(
    ['worker', '--runtime', runtime, '--port', '0', ...extra],
    /listening on (grpc:\/\/\S+)/,
    baseEnv(options.env),
    45_000,
    options.prefix,
  );
  return { url: s.match[1]!, stop: () => stopProcess(s.child) };
}

/**
 * A reference worker in a /dev/shm of its own: a private mount namespace with a fresh tmpfs
 * over /dev/shm (root only), as a container without --ipc=host. Its token has this host's
 * boot_id and another st_dev, and it really cannot see the router's files.
 */
export function startWorkerInPrivateShm(runtime: WireRuntime): Promise<Worker> {
  return startWorker(runtime, [], {
    prefix: ['unshare', '--mount', '--propagation', 'private', 'sh', '-c', 'mount -t tmpfs -o size=64m mmtc-e2e /dev/shm && exec "$0" "$@"'],
  });
}

/** A reference worker of disaggregated serving (`--role`), with its bootstrap server's port for an encode or prefill worker; `privateShm`: in a /dev/shm of its own, as above. */
export async function startRoleWorker(
  role: 'encode' | 'prefill' | 'decode',
  options: { privateShm?: boolean; port?: number; bootstrapPort?: number } = {},
): Promise<Worker & { bootstrapPort: number | undefined; kill(): void }> {
  const served = role !== 'decode';
  const prefix = options.privateShm
    ? ['unshare', '--mount', '--propagation', 'private', 'sh', '-c', 'mount -t tmpfs -o size=64m mmtc-e2e /dev/shm && exec "$0" "$@"']
    : [];
  const s = await startProcess(
    [
      'worker',
      '--runtime',
      'tokenspeed',
      '--port',
      String(options.port ?? 0),
      '--role',
      role,
      ...(served ? ['--bootstrap-port', String(options.bootstrapPort ?? 0)] : []),
    ],
    served ? /listening on (grpc:\/\/\S+)\n[\s\S]*?bootstrap server on http:\/\/\S+:(\d+)/ : /listening on (grpc:\/\/\S+)/,
    baseEnv(),
    45_000,
    prefix,
  );
  // kill(): kill -9, a crash (no shutdown, no goodbye to the router).
  return { url: s.match[1]!, bootstrapPort: served ? Number(s.match[2]) : undefined, stop: () => stopProcess(s.child), kill: () => s.child.kill('SIGKILL') };
}

/** This process (and so every serve it starts) runs as root: its /dev/shm files (0600) are unreadable to another uid. */
export const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;

/**
 * A reference worker serving as nobody (`--user nobody`, HOME=/tmp): it cannot open a root
 * router's 0600 files in /dev/shm. Root only; it starts as root and drops once loaded, so it
 * runs from a checkout nobody cannot enter.
 */
export function startWorkerAsNobody(runtime: WireRuntime = 'tokenspeed'): Promise<Worker> {
  return startWorker(runtime, ['--user', 'nobody'], { env: { HOME: '/tmp' } });
}

export interface Serve {
  url: string;
  token: string;
  pid: number;
  dir: string;
  configFile: string;
  /** The flags the serve got, for comparing with `mmtc config export`. */
  routerFlags: string[];
  output(): string;
  /** Call a console command over the HTTP binding, as the page does. */
  call<T = unknown>(command: string, input?: unknown): Promise<T>;
  /** Tensor files of the serve process in /dev/shm. */
  shmFiles(): string[];
  /** Stop it; its dir (config file, history) is removed unless `keep` (for a restart with `again`). */
  stop(options?: { keep?: boolean }): Promise<void>;
}

/**
 * `mmtc serve` on a config file in a temp dir of its own, with `flags` after `--config FILE
 * --port 0`. With `again`, the same dir and file as an earlier serve (stopped with
 * `stop({ keep: true })`) and the same console port: a restart, whose file is what the
 * earlier one left.
 */
export async function startServe(options: { config: string; env?: Record<string, string>; flags?: string[]; again?: Serve }): Promise<Serve> {
  const dir = options.again?.dir ?? mkdtempSync(path.join(tmpdir(), 'mmtc-e2e-'));
  const configFile = path.join(dir, 'router.yaml');
  if (!options.again) writeFileSync(configFile, options.config);
  const routerFlags = ['--config', configFile, '--port', '0', ...(options.flags ?? [])];
  // A restart listens where the earlier one did: the same console address, with a new token.
  const consolePort = options.again ? new URL(options.again.url).port : '0';
  const s = await startProcess(
    ['serve', ...routerFlags, '--console-port', consolePort],
    /mmtc console: (http:\/\/\S+?)#token=(\S+)/,
    baseEnv({ XDG_CONFIG_HOME: dir, ...(options.env ?? {}) }),
  );
  const url = s.match[1]!;
  const token = s.match[2]!;
  const pid = s.child.pid!;
  return {
    url,
    token,
    pid,
    dir,
    configFile,
    routerFlags,
    output: s.output,
    async call<T>(command: string, input: unknown = {}) {
      const res = await fetch(`${url}api/${command}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify(input),
      });
      const body = (await res.json()) as T & { error?: { message: string } };
      if (!res.ok) throw new Error(`${command}: ${body.error?.message ?? res.status}`);
      return body;
    },
    shmFiles: () => readdirSync('/dev/shm').filter((f) => f.startsWith(`smg-tokenspeed-${pid}-`)),
    async stop(stopOptions: { keep?: boolean } = {}) {
      await stopProcess(s.child);
      if (!stopOptions.keep) rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** `mmtc config export` with the serve's router flags: what the console's download must equal. */
export function cliExport(flags: string[]): string {
  const r = spawnSync(process.execPath, [BIN, 'config', 'export', ...flags], { env: baseEnv(), encoding: 'utf8', timeout: 60_000 });
  if (r.status !== 0) throw new Error(`mmtc config export failed: ${r.stderr}`);
  return r.stdout;
}

/** Open the console as an operator does: the printed URL with its #token= fragment. */
export async function openConsole(page: Page, serve: Serve, screen = 'overview'): Promise<void> {
  await page.goto(`${serve.url}#token=${serve.token}`);
  await page.getByRole('navigation', { name: 'Screens' }).waitFor();
  if (screen !== 'overview') await goTo(page, screen);
}

const NAV_LABEL: Record<string, string> = {
  overview: 'Overview',
  router: 'Router settings',
  workers: 'Workers',
  precedence: 'Precedence',
  traffic: 'Traffic',
  requests: 'Requests',
  doctor: 'Doctor',
  yaml: 'YAML',
  history: 'History',
};

export async function goTo(page: Page, screen: string): Promise<void> {
  await page
    .getByRole('navigation', { name: 'Screens' })
    .getByRole('link', { name: new RegExp(`^${NAV_LABEL[screen]}`) })
    .click();
  await page.getByRole('heading', { level: 1, name: NAV_LABEL[screen] }).waitFor();
}

/** Wait until the serve's router sees every configured worker healthy. */
export async function waitHealthy(serve: Serve, count: number): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const r = await serve.call<{ workers: Array<{ health: string }> }>('workers.list');
    if (r.workers.length >= count && r.workers.every((w) => w.health === 'healthy')) return;
    await new Promise((res) => setTimeout(res, 200));
  }
  throw new Error('workers did not become healthy');
}

/** One chat request with a synthetic image straight to the router's OpenAI API (source 'api'), as a client sends it. */
export async function apiChat(serve: Serve, width: number, height: number): Promise<number> {
  return (await apiChatRequest(serve, width, height)).status;
}

/** The same, with the request id the router gave it (the id of its rows on the Traffic table). */
export async function apiChatRequest(serve: Serve, width: number, height: number): Promise<{ status: number; id: string | undefined }> {
  const { default: sharp } = await import('sharp');
  const pixels = Buffer.alloc(width * height * 3);
  let x = 0x2545f491 ^ (width * 7919) ^ height;
  for (let i = 0; i < pixels.length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    pixels[i] = x & 0xff;
  }
  const png = await sharp(pixels, { raw: { width, height, channels: 3 } })
    .png({ compressionLevel: 1 })
    .toBuffer();
  const overview = await serve.call<{ router: { url: string } }>('overview');
  const res = await fetch(`${overview.router.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      max_tokens: 16,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'image_url', image_url: { url: `data:image/png;base64,${png.toString('base64')}` } },
            { type: 'text', text: 'what is this?' },
          ],
        },
      ],
    }),
  });
  const text = await res.text();
  let id: string | undefined;
  try {
    id = (JSON.parse(text) as { id?: string }).id;
  } catch {
    /* not a JSON answer: the status says why */
  }
  return { status: res.status, id };
}

/**
 * The whole screen as it is (the window grown to the content, which scrolls inside <main>),
 * attached to the test's results; with docs and MMTC_UPDATE_SCREENSHOTS=1 also
 * docs/screenshots/<name>-<scheme>.png.
 */
export async function shot(page: Page, testInfo: TestInfo, name: string, options: { docs?: boolean; scheme?: 'light' | 'dark' } = {}): Promise<void> {
  const height = await page.evaluate(() => Math.ceil(document.getElementById('main')!.scrollHeight));
  const before = page.viewportSize() ?? { width: 1440, height: 900 };
  await page.setViewportSize({ width: before.width, height: Math.min(4000, Math.max(900, height)) });
  await page.waitForTimeout(300);
  const file = testInfo.outputPath(`${name}-${options.scheme ?? 'light'}.png`);
  await page.screenshot({ path: file });
  await page.setViewportSize(before);
  await testInfo.attach(`${name}-${options.scheme ?? 'light'}`, { path: file, contentType: 'image/png' });
  if (options.docs && process.env.MMTC_UPDATE_SCREENSHOTS === '1') {
    mkdirSync(path.join(ROOT, 'docs', 'screenshots'), { recursive: true });
    copyFileSync(file, path.join(ROOT, 'docs', 'screenshots', `${name}-${options.scheme ?? 'light'}.png`));
  }
}

/**
 * One reference worker and an `mmtc serve` configured with it, for every test of a spec file:
 * started before the first (the serve waits for the worker to be healthy), stopped after the
 * last, which fails if a file of theirs is left in /dev/shm. Read `rig.serve` and `rig.worker`
 * inside the tests.
 */
export function serveWithWorker(options: {
  runtime: WireRuntime;
  workerArgs?: string[];
  config: (workerUrl: string) => string;
  env?: Record<string, string>;
}): { worker: Worker; serve: Serve } {
  const rig = {} as { worker: Worker; serve: Serve };
  test.beforeAll(async () => {
    rig.worker = await startWorker(options.runtime, options.workerArgs ?? []);
    rig.serve = await startServe({ config: options.config(rig.worker.url), ...(options.env ? { env: options.env } : {}) });
    await waitHealthy(rig.serve, 1);
  });
  test.afterAll(async () => {
    const files = rig.serve?.shmFiles() ?? [];
    await rig.serve?.stop();
    await rig.worker?.stop();
    expect(files).toEqual([]);
  });
  return rig;
}

/**
 * What is clipped on the screen shown: the page or the content column wider than the window,
 * a table region that scrolls sideways, a column header or cell whose text is cut (wider than
 * its box, cut by the box that holds it, or covered by the next cell: a sticky column over
 * another), a button outside its cell, table or panel, a text broken into lines of a few
 * characters, and chart labels drawn over each other. Empty when the layout holds.
 */
export async function layoutProblems(page: Page): Promise<string[]> {
  return page.evaluate(() => {
    const out: string[] = [];
    const m = document.getElementById('main')!;
    const shown = (e: Element) => (e as HTMLElement).offsetParent !== null || e instanceof SVGElement;
    const text = (e: Element) => (e.textContent ?? '').replace(/\s+/g, ' ').trim().slice(0, 40);
    if (document.documentElement.scrollWidth > window.innerWidth)
      out.push(`the page is wider than the window (${document.documentElement.scrollWidth} > ${window.innerWidth})`);
    if (m.scrollWidth > m.clientWidth + 1) out.push(`the content column scrolls sideways (${m.scrollWidth} > ${m.clientWidth})`);
    for (const r of document.querySelectorAll<HTMLElement>('.table-scroll, .ttable'))
      if (r.scrollWidth > r.clientWidth + 1) out.push(`${r.getAttribute('aria-label') ?? r.className} scrolls sideways (${r.scrollWidth} > ${r.clientWidth})`);
    /** The nearest ancestor that clips what overflows it sideways. */
    const clipper = (e: Element): HTMLElement | null => {
      for (let a = e.parentElement; a && a !== document.body; a = a.parentElement) if (getComputedStyle(a).overflowX !== 'visible') return a;
      return null;
    };
    for (const h of m.querySelectorAll<HTMLElement>('th, td, [role="columnheader"], [role="cell"]')) {
      if (!shown(h) || text(h) === '') continue;
      const kind = h.tagName === 'TH' || h.getAttribute('role') === 'columnheader' ? 'column' : 'cell';
      // A cell that ends its text with an ellipsis and carries the whole of it in its title is cut on purpose (Traffic's request ids); a header never is.
      const onPurpose = kind === 'cell' && getComputedStyle(h).textOverflow === 'ellipsis' && h.title !== '';
      if (h.scrollWidth > h.clientWidth + 1 && !onPurpose) out.push(`${kind} "${text(h)}" is cut (${h.scrollWidth} > ${h.clientWidth})`);
      const box = h.getBoundingClientRect();
      if (box.right > window.innerWidth + 0.5) out.push(`${kind} "${text(h)}" is off screen (right ${Math.round(box.right)})`);
      const clip = clipper(h);
      // A scroll region that scrolls is reported above; here, a box that hides what sticks out.
      if (clip && clip.scrollWidth <= clip.clientWidth + 1 && box.right > clip.getBoundingClientRect().right + 1)
        out.push(`${kind} "${text(h)}" is cut by its container (right ${Math.round(box.right)} > ${Math.round(clip.getBoundingClientRect().right)})`);
    }
    // A table wider than the box it sits in (it runs over the panel's padding or edge: Router's Limits "From").
    for (const t of m.querySelectorAll<HTMLElement>('table')) {
      if (!shown(t) || !t.parentElement) continue;
      const holder = t.parentElement;
      const right = holder.getBoundingClientRect().left + holder.clientLeft + holder.clientWidth - parseFloat(getComputedStyle(holder).paddingRight);
      if (holder.scrollWidth <= holder.clientWidth + 1 && t.getBoundingClientRect().right > right + 1)
        out.push(
          `table "${text(t.querySelector('th') ?? t)}…" runs out of its box (right ${Math.round(t.getBoundingClientRect().right)} > ${Math.round(right)})`,
        );
    }
    // Cells of one row side by side: one drawn over the next (a sticky column over the others) hides its text.
    for (const row of m.querySelectorAll<HTMLElement>('tr, [role="row"]')) {
      if (!shown(row)) continue;
      const cells = [...row.children].filter((c) => shown(c) && getComputedStyle(c).display !== 'none').map((c) => ({ c, box: c.getBoundingClientRect() }));
      for (let i = 0; i + 1 < cells.length; i++) {
        const [a, b] = [cells[i]!, cells[i + 1]!];
        if (a.box.width > 0 && b.box.width > 0 && a.box.right > b.box.left + 1)
          out.push(`"${text(a.c) || a.c.tagName}" and "${text(b.c) || b.c.tagName}" overlap in a row (${Math.round(a.box.right)} > ${Math.round(b.box.left)})`);
      }
    }
    for (const b of m.querySelectorAll<HTMLElement>('button')) {
      if (!shown(b)) continue;
      const box = b.getBoundingClientRect();
      const holders = [b.closest('td, th'), b.closest('table'), b.closest('.panel')].filter((h): h is Element => h !== null);
      if (box.right > window.innerWidth + 0.5 || holders.some((h) => box.right > h.getBoundingClientRect().right + 0.5))
        out.push(`button "${text(b)}" is clipped or sticks out of its box (right ${Math.round(box.right)})`);
    }
    // A text broken into lines of a few characters (a column squeezed to nothing).
    const walker = document.createTreeWalker(m, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      const t = (n.textContent ?? '').trim();
      if (t.length < 6 || !shown(n.parentElement!)) continue;
      const range = document.createRange();
      range.selectNodeContents(n);
      const lines = new Set([...range.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.top))).size;
      // More lines than words: words themselves were broken ("within the noise" on three lines is not).
      const words = t.split(/\s+/).length;
      if (lines >= 3 && lines > words && t.length / lines < 6) out.push(`"${t.slice(0, 30)}" is broken into ${lines} lines of a few characters`);
    }
    // Chart labels drawn over each other: a uPlot chart's x axis (drawn on its canvas, so the
    // chart notes where: data-x-labels), and an SVG's text.
    for (const chart of m.querySelectorAll<HTMLElement>('.chart[data-x-labels]')) {
      if (!shown(chart)) continue;
      const boxes = JSON.parse(chart.dataset.xLabels!) as Array<[number, number, string, number]>;
      for (const a of boxes)
        for (const b of boxes)
          if (a !== b && a[3] === b[3] && a[0] <= b[0] && a[1] > b[0] - 2)
            out.push(`chart "${chart.getAttribute('aria-label')}": axis labels "${a[2]}" and "${b[2]}" overlap`);
    }
    for (const svg of m.querySelectorAll('svg')) {
      const labels = [...svg.querySelectorAll('text')].filter((t) => (t.textContent ?? '').trim() !== '').map((t) => ({ t, box: t.getBoundingClientRect() }));
      for (let i = 0; i < labels.length; i++)
        for (let j = i + 1; j < labels.length; j++) {
          const [a, b] = [labels[i]!.box, labels[j]!.box];
          if (a.width > 0 && b.width > 0 && a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1)
            out.push(`chart labels "${labels[i]!.t.textContent}" and "${labels[j]!.t.textContent}" overlap`);
        }
    }
    return out;
  });
}
