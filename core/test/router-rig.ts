// What the router's integration tests start: `mmtc worker` processes and in-process routers
// over them, stopped after each test in reverse order, after which no file of this process
// may be left in /dev/shm.
import { readdirSync } from 'node:fs';
import { afterEach, expect } from 'vitest';
import { readTransportEnvironment } from '../config/env.ts';
import { RouterConfigSchema, type TransportMode, type WireRuntime } from '../config/schema.ts';
import { startRouter, type RunningRouter } from '../router/server.ts';
import { startMmtc } from './cli.ts';

/** Tensor files of this process in /dev/shm. */
export const ourTensorFiles = (): string[] => readdirSync('/dev/shm').filter((f) => f.startsWith(`smg-tokenspeed-${process.pid}-`));
/** Pixel-cache files of this process in /dev/shm (a router's, until it closes): entries and the cache's heartbeat (seq 0). */
const ourCacheNames = (): string[] => readdirSync('/dev/shm').filter((f) => new RegExp(`^smg-tokenspeed-cache-\\d+-${process.pid}-`).test(f));
/** Pixel-cache entries of this process in /dev/shm, without the heartbeat. */
export const ourCacheFiles = (): string[] => ourCacheNames().filter((f) => !f.endsWith('-0'));

export interface RouterRig {
  /** Anything else a test starts, stopped with the rest. */
  stops: Array<() => Promise<unknown>>;
  /** A reference worker (`--port 0` unless `extra` gives one); its grpc:// URL. */
  startWorker(runtime: WireRuntime, extra?: string[], env?: Record<string, string>): Promise<string>;
  /** A router in this process over one worker, in `mode`, health-checked every 0.2 s; its log lines go to `log` (default: nowhere). */
  router(workerUrl: string, mode: TransportMode, extra?: Record<string, unknown>, log?: (line: string) => void): Promise<RunningRouter>;
}

export function useRouterRig(): RouterRig {
  const stops: Array<() => Promise<unknown>> = [];
  afterEach(async () => {
    for (const stop of stops.splice(0).reverse()) await stop();
    expect(ourTensorFiles()).toEqual([]);
    expect(ourCacheNames()).toEqual([]);
  });
  return {
    stops,
    async startWorker(runtime, extra = [], env = {}) {
      const port = extra.includes('--port') ? [] : ['--port', '0'];
      const w = await startMmtc(['worker', '--runtime', runtime, ...port, ...extra], /listening on grpc:\/\//, env);
      stops.push(() => w.stop());
      return w.line.match(/grpc:\/\/\S+/)![0];
    },
    async router(workerUrl, mode, extra = {}, log = () => {}) {
      const r = await startRouter({
        config: RouterConfigSchema.parse({
          port: 0,
          multimodal_tensor_transport: mode,
          health_check_interval_secs: 0.2,
          workers: [{ url: workerUrl }],
          ...extra,
        }),
        env: readTransportEnvironment({}),
        processEnv: {},
        log,
      });
      stops.push(() => r.close());
      return r;
    },
  };
}
