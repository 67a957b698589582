#!/usr/bin/env node
// `npm start [-- router flags]`: open the console. The desktop app when it can open here,
// else the same console in the browser (`mmtc serve`), with one line saying why, so a fresh
// checkout always ends with a working console. Builds the renderer first when it is missing or stale.
// Electron's binary is fetched at most once here (its install script, bounded in time): this
// repository does not let npm run that script on install (`allowScripts`), and CI skips it.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { register } from 'tsx/esm/api';

const root = fileURLToPath(new URL('..', import.meta.url));
const args = process.argv.slice(2);
const mmtc = path.join(root, 'bin', 'mmtc.js');
const INSTALL_TIMEOUT_MS = 120_000;

/** Run a child with our terminal; resolve with the exit code it should leave us with. */
function runInherited(command, commandArgs) {
  return new Promise((resolve) => {
    const child = spawn(command, commandArgs, { cwd: process.cwd(), stdio: 'inherit' });
    // Ctrl+C reaches the child through the terminal; we wait for it to finish closing.
    const ignore = () => {};
    for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, ignore);
    child.once('error', (err) => {
      process.stderr.write(`could not run ${command}: ${err.message}\n`);
      resolve(1);
    });
    child.once('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0)));
  });
}

/** Run electron's own install script once; null when it succeeded, else why not (one line). */
function installElectron() {
  const script = path.join(root, 'node_modules', 'electron', 'install.js');
  if (!existsSync(script)) return 'the electron package is not installed';
  const env = { ...process.env };
  delete env.ELECTRON_SKIP_BINARY_DOWNLOAD;
  process.stdout.write(
    `Electron's binary is not installed; downloading it once (node node_modules/electron/install.js, up to ${INSTALL_TIMEOUT_MS / 1000} s)\n`,
  );
  const r = spawnSync(process.execPath, [script], { cwd: root, env, timeout: INSTALL_TIMEOUT_MS, stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8' });
  if (r.error?.code === 'ETIMEDOUT') return `the download did not finish within ${INSTALL_TIMEOUT_MS / 1000} s`;
  if (r.error) return r.error.message;
  if (r.status !== 0) {
    const line = `${r.stderr}\n${r.stdout}`
      .split('\n')
      .map((l) => l.trim())
      .find((l) => l !== '' && !l.startsWith('at '));
    return line ?? `the install script exited with status ${r.status}`;
  }
  return null;
}

async function main() {
  register();
  const { ensureRendererBuilt } = await import('../core/cli/renderer-build.ts');
  const notBuilt = ensureRendererBuilt();
  if (notBuilt) {
    process.stderr.write(`${notBuilt}\n`);
    return 1;
  }

  const { locateElectronBinary, displayProblem, EXIT_DESKTOP_UNAVAILABLE } = await import('../electron/launch.ts');

  let electron = locateElectronBinary();
  if (!electron.found) {
    const failed = installElectron();
    if (failed === null) electron = locateElectronBinary();
    if (!electron.found) {
      process.stdout.write(
        `Electron's binary is not installed and could not be downloaded (${failed ?? electron.reason}); opening the console in your browser instead: mmtc serve\n`,
      );
      return runInherited(process.execPath, [mmtc, 'serve', ...args]);
    }
  }
  const noDisplay = displayProblem();
  if (noDisplay) {
    process.stdout.write(`The desktop app cannot open here (${noDisplay}); opening the console in your browser instead: mmtc serve\n`);
    return runInherited(process.execPath, [mmtc, 'serve', ...args]);
  }

  const code = await runInherited(process.execPath, [mmtc, 'desktop', ...args]);
  if (code !== EXIT_DESKTOP_UNAVAILABLE) return code;
  // `mmtc desktop` said why it could not open; the browser still can.
  process.stdout.write('opening the console in your browser instead: mmtc serve\n');
  return runInherited(process.execPath, [mmtc, 'serve', ...args]);
}

process.exitCode = await main();
