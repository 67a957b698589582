// `mmtc serve`: the router plus the operator console over HTTP, for a headless rig reached
// through an SSH tunnel (and for the end-to-end tests). The console binds its own address,
// `--console-host` (127.0.0.1 by default), on `--console-port`: a router opened to the network
// with `--host 0.0.0.0` does not take its console along. A random token per launch is printed
// once inside the URL's fragment; a console on anything but loopback is said at start,
// because the token is then all that stands between the network and the router.
import { randomBytes } from 'node:crypto';
import type { ConfigFlags } from '../config/load.ts';
import { startConsole } from '../console/console.ts';
import { startConsoleServer } from '../console/http.ts';
import { ensureRendererBuilt, RENDERER_DIR } from './renderer-build.ts';

function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\./.test(host);
}

export async function serveConsole(options: {
  flags: ConfigFlags;
  consolePort: number;
  consoleHost?: string;
  log?: (line: string) => void;
}): Promise<() => Promise<void>> {
  const log = options.log ?? ((line: string) => process.stdout.write(`${line}\n`));
  // The UI, built now when it is missing or stale: the printed URL must open a working console.
  const notBuilt = ensureRendererBuilt({ log });
  if (notBuilt) log(`warning: ${notBuilt}; the console URL below serves a page that says so`);
  const running = await startConsole({ flags: options.flags, log });
  const host = options.consoleHost ?? '127.0.0.1';
  const token = randomBytes(24).toString('base64url');
  let server;
  try {
    server = await startConsoleServer({ backend: running.backend, host, port: options.consolePort, token, staticDir: RENDERER_DIR });
  } catch (err) {
    await running.close();
    throw err;
  }
  if (!isLoopback(host))
    log(
      `warning: the console listens on ${host} (--console-host), not on loopback: it is reachable from other machines, and anyone with the URL below can change this router`,
    );
  log(`config file ${running.configFile}`);
  log(`mmtc console: ${server.url}#token=${token}`);
  return async () => {
    await server.close();
    await running.close();
  };
}
