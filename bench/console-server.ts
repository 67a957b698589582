// A console for benchmarks: the real router and console backend behind the real HTTP +
// WebSocket binding (as `mmtc serve` runs them), plus a synthetic traffic source that
// publishes tensor events into the router's own event bus at a fixed rate, so the stream
// path (bus -> per-client feed -> WebSocket) carries a known load. Used by bench:console and
// bench:ui; never part of the product.
//
// Usage: tsx bench/console-server.ts --events-per-second N [--config FILE]
// Prints one JSON line: {"console": url, "token": …, "router": url, "worker": url}; then a line
// per second with the events published so far. Stops on SIGTERM/SIGINT. Lines on stdin:
// `records on` / `records off` turn the router's request records on and off (the internal
// RouterContext.recordRequests, bench:console's baseline), `events off` stops the synthetic
// events; each is answered with the same line on stdout.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startConsole } from '../core/console/console.ts';
import { startConsoleServer } from '../core/console/http.ts';
import { RENDERER_DIR } from '../core/cli/renderer-build.ts';
import type { TensorEvent } from '../core/transport/event-schema.ts';

const args = process.argv.slice(2);
const arg = (name: string, fallback: string) => (args.includes(name) ? args[args.indexOf(name) + 1]! : fallback);
const rate = Number(arg('--events-per-second', '0'));
const dir = mkdtempSync(path.join(os.tmpdir(), 'mmtc-bench-console-'));
const running = await startConsole({
  flags: { config: arg('--config', path.join(dir, 'router.yaml')), port: '0', multimodalTensorTransport: 'auto' },
  log: () => {},
});
const token = randomBytes(24).toString('base64url');
const server = await startConsoleServer({ backend: running.backend, host: '127.0.0.1', port: 0, token, staticDir: RENDERER_DIR });
const worker = running.router.store.current().config.workers[0]!.url;
process.stdout.write(`${JSON.stringify({ console: server.url, token, router: running.routerUrl, worker })}\n`);

// Events in 10 ms slices, as a busy router places them: mixed sizes and paths.
const sizes = [24, 8, 2_502_528, 11_524_800, 65_536, 9_633_792];
let published = 0;
let seq = 0;
const bus = running.router.context.events;
const started = performance.now();
const timer =
  rate > 0
    ? setInterval(() => {
        const due = Math.floor(((performance.now() - started) / 1000) * rate);
        for (; published < due; published++) {
          const nbytes = sizes[seq % sizes.length]!;
          const shm = nbytes >= 65_536 && seq % 3 !== 0;
          const e: TensorEvent = {
            time: Date.now(),
            revision: 1,
            requestId: `bench-${Math.floor(seq / 3)}`,
            source: seq % 50 === 0 ? 'console' : 'api',
            worker,
            runtime: 'tokenspeed',
            tensor: ['encoder_input', 'image_grid_thw', 'patches_per_image'][seq % 3]!,
            shape: [nbytes / 2352 || 1, 1176],
            dtype: 'bfloat16',
            nbytes,
            path: shm ? 'shm' : 'inline',
            reason: shm ? 'auto_tokens_equal' : nbytes < 65_536 ? 'below_threshold' : 'auto_different_shm',
            writeMicros: shm ? 900 : 0,
          };
          seq += 1;
          bus.publish(e);
        }
      }, 10)
    : undefined;
let stdinBuf = '';
process.stdin.on('data', (d: Buffer) => {
  stdinBuf += d.toString();
  for (const line of stdinBuf.split('\n').slice(0, -1)) {
    const command = line.trim();
    if (command === 'records on' || command === 'records off') running.router.context.recordRequests = command === 'records on';
    else if (command === 'events off') clearInterval(timer);
    else continue;
    process.stdout.write(`${command}\n`);
  }
  stdinBuf = stdinBuf.slice(stdinBuf.lastIndexOf('\n') + 1);
});
const report = setInterval(() => process.stdout.write(`published ${published}\n`), 1000);

const stop = async () => {
  if (timer) clearInterval(timer);
  clearInterval(report);
  await server.close();
  await running.close();
  rmSync(dir, { recursive: true, force: true });
  process.exit(0);
};
process.once('SIGTERM', () => void stop());
process.once('SIGINT', () => void stop());
