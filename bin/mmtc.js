#!/usr/bin/env node
// Runs the TypeScript sources directly (no build step to forget): tsx compiles on load.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';

// Long-running commands move large tensor and image buffers. glibc's malloc settings in
// malloc-tunables.json make them up to 5-7x cheaper on these machines (docs/performance.md),
// and they only take effect at process start: re-run ourselves once with them, unless the
// operator set GLIBC_TUNABLES already or opted out with MMTC_MALLOC_HUGETLB=0.
const LONG_RUNNING = new Set(['router', 'serve', 'worker', 'desktop']);
if (
  LONG_RUNNING.has(process.argv[2] ?? '') &&
  process.env.GLIBC_TUNABLES === undefined &&
  process.env.MMTC_MALLOC_HUGETLB !== '0' &&
  process.platform === 'linux'
) {
  const tunables = JSON.parse(readFileSync(new URL('./malloc-tunables.json', import.meta.url), 'utf8')).GLIBC_TUNABLES;
  const child = spawn(process.execPath, [...process.execArgv, ...process.argv.slice(1)], {
    stdio: 'inherit',
    // glibc rewrites GLIBC_TUNABLES in a process's own environment down to its first entry,
    // so children would inherit less than we set; MMTC_GLIBC_TUNABLES keeps the whole value
    // for the processes mmtc starts in turn (the router's embedded worker).
    env: { ...process.env, GLIBC_TUNABLES: tunables, MMTC_GLIBC_TUNABLES: tunables, MMTC_MALLOC_HUGETLB: '0', MMTC_EXIT_WITH_PARENT: String(process.pid) },
  });
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, () => child.kill(signal));
  child.on('exit', (code, signal) => {
    if (signal) process.kill(process.pid, signal);
    else process.exit(code ?? 1);
  });
} else {
  // The protobuf code under core/gen is generated, never committed; make it on first use.
  if (!existsSync(new URL('../core/gen/.stamp', import.meta.url))) {
    const gen = spawnSync(process.execPath, [new URL('../scripts/generate.mjs', import.meta.url).pathname], { stdio: ['ignore', 'ignore', 'inherit'] });
    if (gen.status !== 0) process.exit(gen.status ?? 1);
  }
  // Started by another mmtc process (the re-exec above, a router's embedded worker): do not
  // outlive it, even when it is killed without a chance to stop us.
  const parent = Number(process.env.MMTC_EXIT_WITH_PARENT);
  if (parent > 0) {
    setInterval(() => {
      try {
        process.kill(parent, 0);
      } catch {
        // ESRCH: the parent is gone. EPERM: its pid now belongs to another user's process, so
        // the parent is gone too. Either way, go with it.
        process.exit(1);
      }
    }, 500).unref();
  }
  // tsx only here: the re-exec above (a long-running command's first process) never loads TypeScript.
  const { register } = await import('tsx/esm/api');
  register();
  const { main } = await import('../core/cli/program.ts');
  // The desktop shell lives beside the core, not in it: load it only for `mmtc desktop`.
  const shells = process.argv[2] === 'desktop' ? { launchDesktop: (await import('../electron/launch.ts')).launchDesktop } : {};
  process.exitCode = await main(process.argv, shells);
}
