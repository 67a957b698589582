// Launching with no mock at all: the electron package's own index.js honours
// ELECTRON_OVERRIDE_DIST_PATH, so a shell script standing in for the Electron binary shows
// what launchDesktop really runs (arguments, environment, exit code), and an empty
// directory shows what it says when there is no binary.
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  ELECTRON_INSTALL_HINT,
  ENTRY_PATH,
  EXIT_DESKTOP_UNAVAILABLE,
  displayProblem,
  electronEnvironment,
  launchDesktop,
  locateElectronBinary,
  preloadIsStale,
} from './launch.ts';

let dir: string;
let binDir: string;
let emptyDir: string;
let record: string;

beforeAll(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'mmtc-launch-'));
  binDir = path.join(dir, 'dist');
  emptyDir = path.join(dir, 'empty');
  record = path.join(dir, 'record.txt');
  mkdirSync(binDir);
  mkdirSync(emptyDir);
  const script = [
    '#!/bin/sh',
    `out=${JSON.stringify(record)}`,
    'for a in "$@"; do printf "arg=%s\\n" "$a" >> "$out"; done',
    'printf "parent=%s\\n" "$MMTC_EXIT_WITH_PARENT" >> "$out"',
    'printf "run_as_node=%s\\n" "${ELECTRON_RUN_AS_NODE-unset}" >> "$out"',
    'printf "tunables=%s\\n" "$GLIBC_TUNABLES" >> "$out"',
    'if [ "$2" = "--die" ]; then kill -TERM $$; fi',
    'exit 7',
    '',
  ].join('\n');
  writeFileSync(path.join(binDir, 'electron'), script);
  chmodSync(path.join(binDir, 'electron'), 0o755);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));
afterEach(() => {
  vi.unstubAllEnvs();
  rmSync(record, { force: true });
});

const recorded = () => readFileSync(record, 'utf8').trim().split('\n');

describe('locateElectronBinary', () => {
  it('finds the binary the electron package points at', () => {
    vi.stubEnv('ELECTRON_OVERRIDE_DIST_PATH', binDir);
    expect(locateElectronBinary()).toEqual({ found: true, path: path.join(binDir, 'electron') });
  });

  it('says where it looked when the binary is missing', () => {
    vi.stubEnv('ELECTRON_OVERRIDE_DIST_PATH', emptyDir);
    expect(locateElectronBinary()).toEqual({
      found: false,
      reason: `the Electron binary is missing at ${path.join(emptyDir, 'electron')}; ${ELECTRON_INSTALL_HINT}`,
    });
    expect(ELECTRON_INSTALL_HINT).toContain('node node_modules/electron/install.js');
  });
});

describe('displayProblem', () => {
  it('needs X11 or Wayland on Linux only', () => {
    expect(displayProblem({}, 'linux')).toMatch(/neither DISPLAY nor WAYLAND_DISPLAY/);
    expect(displayProblem({ DISPLAY: ':0' }, 'linux')).toBeNull();
    expect(displayProblem({ WAYLAND_DISPLAY: 'wayland-0' }, 'linux')).toBeNull();
    expect(displayProblem({}, 'darwin')).toBeNull();
  });
});

describe('electronEnvironment', () => {
  it('keeps the environment, ties the child to us, restores the whole malloc setting and drops ELECTRON_RUN_AS_NODE', () => {
    const env = {
      PATH: '/usr/bin',
      GLIBC_TUNABLES: 'glibc.malloc.hugetlb=1',
      MMTC_GLIBC_TUNABLES: 'glibc.malloc.hugetlb=1:glibc.malloc.arena_max=2',
      ELECTRON_RUN_AS_NODE: '1',
    };
    expect(electronEnvironment(env, 4242)).toEqual({
      PATH: '/usr/bin',
      GLIBC_TUNABLES: 'glibc.malloc.hugetlb=1:glibc.malloc.arena_max=2',
      MMTC_GLIBC_TUNABLES: 'glibc.malloc.hugetlb=1:glibc.malloc.arena_max=2',
      MMTC_EXIT_WITH_PARENT: '4242',
    });
    expect(env.ELECTRON_RUN_AS_NODE).toBe('1');
  });
});

describe('launchDesktop', () => {
  it('runs Electron on entry.mjs with the arguments and resolves with its exit code', async () => {
    vi.stubEnv('ELECTRON_OVERRIDE_DIST_PATH', binDir);
    vi.stubEnv('DISPLAY', ':0');
    vi.stubEnv('ELECTRON_RUN_AS_NODE', '1');
    vi.stubEnv('MMTC_GLIBC_TUNABLES', 'glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1');
    const log = vi.fn();
    const result = await launchDesktop({ args: ['--config', 'my router.yaml'], log });
    expect(result).toEqual({ status: 'exited', exitCode: 7 });
    expect(recorded()).toEqual([
      `arg=${ENTRY_PATH}`,
      'arg=--config',
      'arg=my router.yaml',
      `parent=${process.pid}`,
      'run_as_node=unset',
      'tunables=glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1',
    ]);
    // The preload is rebuilt when missing or stale, so the app always gets a current bridge.
    expect(preloadIsStale()).toBe(false);
  });

  it('reports 128 + the signal number when a signal ended Electron', async () => {
    vi.stubEnv('ELECTRON_OVERRIDE_DIST_PATH', binDir);
    vi.stubEnv('DISPLAY', ':0');
    const result = await launchDesktop({ args: ['--die'], log: () => {} });
    expect(result).toEqual({ status: 'exited', exitCode: 128 + 15 });
  });

  it('says the binary is missing, with a code of its own, without starting anything', async () => {
    vi.stubEnv('ELECTRON_OVERRIDE_DIST_PATH', emptyDir);
    vi.stubEnv('DISPLAY', ':0');
    const result = await launchDesktop({ args: [], log: () => {} });
    expect(result).toEqual({
      status: 'unavailable',
      problem: 'electron-missing',
      reason: expect.stringContaining('missing at'),
      exitCode: EXIT_DESKTOP_UNAVAILABLE,
    });
    expect(EXIT_DESKTOP_UNAVAILABLE).not.toBe(1);
    expect(EXIT_DESKTOP_UNAVAILABLE).not.toBe(2);
  });

  it('says there is no display on a headless Linux host, without starting anything', async () => {
    if (process.platform !== 'linux') return;
    vi.stubEnv('ELECTRON_OVERRIDE_DIST_PATH', binDir);
    vi.stubEnv('DISPLAY', '');
    vi.stubEnv('WAYLAND_DISPLAY', '');
    const result = await launchDesktop({ args: [], log: () => {} });
    expect(result).toMatchObject({ status: 'unavailable', problem: 'no-display', exitCode: EXIT_DESKTOP_UNAVAILABLE });
    expect(() => readFileSync(record)).toThrow();
  });
});
