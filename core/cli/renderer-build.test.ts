// The console UI is built when it is missing or older than its sources, into a directory of
// its own that replaces dist/renderer by rename, one build at a time per checkout.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, utimesSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT, ensureRendererBuilt, rendererStaleness } from './renderer-build.ts';

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));
const tempRoot = () => {
  const d = mkdtempSync(path.join(tmpdir(), 'mmtc-ui-build-'));
  dirs.push(d);
  return d;
};

describe('the console UI build', () => {
  it('is missing, up to date, or stale by the modification times of its sources', () => {
    const root = tempRoot();
    for (const d of ['renderer/src', 'core/console', 'core/gen']) mkdirSync(path.join(root, d), { recursive: true });
    writeFileSync(path.join(root, 'renderer/src/App.tsx'), '');
    writeFileSync(path.join(root, 'core/console/contract.ts'), '');
    expect(rendererStaleness(root)).toBe('it has not been built in this checkout');
    mkdirSync(path.join(root, 'dist/renderer'), { recursive: true });
    writeFileSync(path.join(root, 'dist/renderer/index.html'), '');
    const built = Date.now() / 1000;
    utimesSync(path.join(root, 'dist/renderer/index.html'), built, built);
    for (const f of ['renderer/src/App.tsx', 'core/console/contract.ts']) utimesSync(path.join(root, f), built - 60, built - 60);
    expect(rendererStaleness(root)).toBeUndefined();
    // A test file or generated code changing does not make the UI stale; a source does.
    writeFileSync(path.join(root, 'core/console/contract.test.ts'), '');
    writeFileSync(path.join(root, 'core/gen/x.ts'), '');
    expect(rendererStaleness(root)).toBeUndefined();
    utimesSync(path.join(root, 'core/console/contract.ts'), built + 60, built + 60);
    expect(rendererStaleness(root)).toBe('its sources changed since it was built');
  });

  it('two starts at once build once: the second waits for the first, and nothing half-built is left', async () => {
    const root = tempRoot();
    for (const d of ['renderer', 'core', 'node_modules']) symlinkSync(path.join(ROOT, d), path.join(root, d));
    const code = `const { ensureRendererBuilt } = await import(${JSON.stringify(path.join(ROOT, 'core/cli/renderer-build.ts'))}); const r = ensureRendererBuilt({ root: ${JSON.stringify(root)} }); if (r) { console.log(r); process.exit(1); }`;
    const run = () =>
      new Promise<{ code: number | null; out: string }>((resolve) => {
        const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
        let out = '';
        child.stdout.on('data', (d: Buffer) => (out += d.toString()));
        child.stderr.on('data', (d: Buffer) => (out += d.toString()));
        child.on('exit', (c) => resolve({ code: c, out }));
      });
    const [a, b] = await Promise.all([run(), run()]);
    expect([a.code, b.code], a.out + b.out).toEqual([0, 0]);
    expect((a.out + b.out).match(/building the console UI/g)).toHaveLength(1);
    expect(existsSync(path.join(root, 'dist/renderer/index.html'))).toBe(true);
    expect(readdirSync(path.join(root, 'dist')).sort()).toEqual(['renderer']);
    expect(rendererStaleness(root)).toBeUndefined();
  }, 120_000);

  it('a lock that cannot be read (a link to itself) is an error, not a wait that never ends', () => {
    const root = tempRoot();
    mkdirSync(path.join(root, 'node_modules/vite/bin'), { recursive: true });
    writeFileSync(path.join(root, 'node_modules/vite/bin/vite.js'), '');
    mkdirSync(path.join(root, 'dist'));
    const lock = path.join(root, 'dist/.renderer-build.lock');
    symlinkSync(lock, lock);
    const log: string[] = [];
    expect(() => ensureRendererBuilt({ root, force: true, log: (l) => log.push(l) })).toThrow(/ELOOP/);
    expect(log).toEqual([]);
  });
});
