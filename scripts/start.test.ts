// `npm start` (scripts/start.mjs) run for real where Electron's binary is not installed, as on
// this machine and on an air-gapped box: it says so at once, with how to get it, downloads
// nothing, and opens the console in the browser (`mmtc serve`); a terminal's Ctrl-C (SIGINT
// to the whole process group: start.mjs, bin/mmtc.js's re-exec and the router, each passing
// it on) stops it normally, leaving none of the router's files in /dev/shm.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cacheAnImage, cacheFilesOfAny } from '../core/test/router-process.ts';

const root = path.resolve(import.meta.dirname, '..');
const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0).reverse()) cleanup();
});

/** Every process under `pid` (children first found through /proc). */
function descendants(pid: number): number[] {
  const file = `/proc/${pid}/task/${pid}/children`;
  if (!existsSync(file)) return [];
  const children = readFileSync(file, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  return children.flatMap((c) => [c, ...descendants(c)]);
}

describe('npm start without the Electron binary', () => {
  it('says at once that the binary is missing and how to get it, downloads nothing, serves the console in the browser, and stops cleanly on Ctrl-C', async () => {
    const home = mkdtempSync(path.join(tmpdir(), 'mmtc-start-'));
    cleanups.push(() => rmSync(home, { recursive: true, force: true }));
    // Its own process group, as a terminal's foreground job: Ctrl-C goes to all of it. No
    // ELECTRON_SKIP_BINARY_DOWNLOAD, no DISPLAY: what an air-gapped headless box has.
    const child = spawn(process.execPath, [path.join(root, 'scripts', 'start.mjs'), '--port', '0', '--console-port', '0'], {
      cwd: root,
      detached: true,
      env: { PATH: process.env.PATH ?? '', HOME: home, XDG_CONFIG_HOME: home },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    let pids: number[] = [];
    cleanups.push(() => {
      if (child.exitCode === null && child.signalCode === null) process.kill(-child.pid!, 'SIGKILL');
      for (const f of cacheFilesOfAny(pids)) rmSync(path.join('/dev/shm', f), { force: true });
    });
    const consoleLine = /^mmtc console: (http:\/\/\S+)/m;
    for (let i = 0; i < 600 && !consoleLine.test(out) && child.exitCode === null; i++) await new Promise((r) => setTimeout(r, 100));
    expect(out, err).toMatch(consoleLine);

    const said = out.split('\n').find((l) => l.startsWith('The desktop app cannot open here'));
    expect(said, out).toBe(
      "The desktop app cannot open here: Electron's binary is not installed (npm install does not run its download here: allowScripts in package.json, or ELECTRON_SKIP_BINARY_DOWNLOAD); for the desktop app, download it once with `node node_modules/electron/install.js` where github.com (or your ELECTRON_MIRROR) is reachable, without ELECTRON_SKIP_BINARY_DOWNLOAD set (air-gapped: electron/README.md). Opening the console in your browser instead: mmtc serve",
    );
    expect(out).not.toMatch(/download(ing)? it once \(|could not be downloaded/i);
    expect(out.indexOf(said!)).toBeLessThan(out.search(consoleLine));

    // The browser console answers, and its router caches an image in /dev/shm.
    const consoleUrl = consoleLine.exec(out)![1]!;
    expect((await fetch(consoleUrl)).status).toBe(200);
    const routerUrl = /mmtc router listening on (http:\/\/\S+)/.exec(out)![1]!;
    pids = descendants(child.pid!);
    const held = await cacheAnImage(routerUrl, () => cacheFilesOfAny(pids));
    expect(held.length, out + err).toBeGreaterThanOrEqual(2);

    // Ctrl-C in the terminal.
    process.kill(-child.pid!, 'SIGINT');
    expect(await exited, out + err).toBe(0);
    expect(err).toContain('mmtc: SIGINT: stopping');
    expect(cacheFilesOfAny(pids)).toEqual([]);
  }, 90_000);
});
