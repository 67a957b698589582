#!/usr/bin/env node
// `npm start [-- router flags]`: open the console. The desktop app when it can open here,
// else the same console in the browser (`mmtc serve`), with one line saying why, so a fresh
// checkout always ends with a working console. Builds the renderer first when it is missing or stale.
// It never downloads Electron's binary: a start must not stall on a download that cannot be
// done (an air-gapped box). A missing binary is said at once, with how to get it, and the
// browser console opens instead.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { register } from 'tsx/esm/api';

const root = fileURLToPath(new URL('..', import.meta.url));
const args = process.argv.slice(2);
const mmtc = path.join(root, 'bin', 'mmtc.js');

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

async function main() {
  register();
  const { ensureRendererBuilt } = await import('../core/cli/renderer-build.ts');
  const notBuilt = ensureRendererBuilt();
  if (notBuilt) {
    process.stderr.write(`${notBuilt}\n`);
    return 1;
  }

  const { locateElectronBinary, displayProblem, EXIT_DESKTOP_UNAVAILABLE } = await import('../electron/launch.ts');

  const electron = locateElectronBinary();
  const cannotOpen = electron.found ? displayProblem() : electron.reason;
  if (cannotOpen) {
    process.stdout.write(`The desktop app cannot open here: ${cannotOpen}. Opening the console in your browser instead: mmtc serve\n`);
    return runInherited(process.execPath, [mmtc, 'serve', ...args]);
  }

  const code = await runInherited(process.execPath, [mmtc, 'desktop', ...args]);
  if (code !== EXIT_DESKTOP_UNAVAILABLE) return code;
  // `mmtc desktop` said why it could not open; the browser still can.
  process.stdout.write('opening the console in your browser instead: mmtc serve\n');
  return runInherited(process.execPath, [mmtc, 'serve', ...args]);
}

process.exitCode = await main();
