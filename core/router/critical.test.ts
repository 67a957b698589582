// Can requests succeed now: the critical states from a real registry (a worker taken out as the
// router takes it out, markDown) and a real request log, and /health over HTTP with a worker
// killed (kill -9) under EPD: degraded, naming the encode worker, and ok again once it is back.
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { readTransportEnvironment } from '../config/env.ts';
import { RouterConfigSchema, type RouterConfig } from '../config/schema.ts';
import type { EngineConnection } from '../engines/engine.ts';
import { startMmtc } from '../test/cli.ts';
import { makeTestImages } from '../test/images.ts';
import { RequestLog } from '../telemetry/requests.ts';
import { WorkerRegistry } from '../workers/registry.ts';
import { createRouter } from './create.ts';
import { criticalStates, healthStatus, RecentOutcomes } from './critical.ts';

function connection(url: string): EngineConnection {
  return {
    runtime: 'tokenspeed',
    url,
    generate: () => ({ cancel() {} }),
    abort() {},
    health: async () => ({ healthy: true, message: '' }),
    info: async () => ({ labels: {} }),
    close() {},
  };
}

const E = 'grpc://encode:1';
const P = 'grpc://prefill:1';
const D = 'grpc://decode:1';

/** A registry over `config`'s workers, each discovered and healthy (the connection is the network edge). */
function healthyRegistry(config: RouterConfig): WorkerRegistry {
  const r = new WorkerRegistry(config.workers, { healthIntervalMs: 60_000 });
  for (const w of r.list()) {
    w.healthy = true;
    w.runtime = 'tokenspeed';
    w.lastCheckedAt = Date.now();
    w.connection = connection(w.spec.url);
  }
  return r;
}

const epd = RouterConfigSchema.parse({
  disaggregation: 'epd',
  workers: [
    { url: E, worker_type: 'encode', bootstrap_port: 9001 },
    { url: P, worker_type: 'prefill', bootstrap_port: 9002 },
    { url: D, worker_type: 'decode' },
  ],
});
const store = (config: RouterConfig) => ({ current: () => ({ config }) });

describe('critical states', () => {
  it('EPD: no healthy encode worker fails the requests with an image (degraded, 200); no healthy decode worker fails every request (unavailable, 503)', () => {
    const registry = healthyRegistry(epd);
    const ctx = { store: store(epd), registry };
    expect(criticalStates(ctx)).toEqual([]);
    expect(healthStatus([])).toEqual({ status: 'ok', httpStatus: 200 });

    registry.markDown(registry.get(E)!, 'HealthCheck failed: 14 UNAVAILABLE: No connection established');
    const encodeDown = criticalStates(ctx);
    expect(encodeDown).toEqual([
      {
        kind: 'no_healthy_worker',
        role: 'encode',
        fails: 'image_requests',
        workers: [{ url: E, error: 'HealthCheck failed: 14 UNAVAILABLE: No connection established' }],
        message: `no healthy encode worker: every request with an image fails with 503 (${E}: HealthCheck failed: 14 UNAVAILABLE: No connection established)`,
        remedy: "restart or bring back the encode worker (Doctor shows each one's checks); requests succeed again as soon as one answers its health check",
      },
    ]);
    expect(healthStatus(encodeDown)).toEqual({ status: 'degraded', httpStatus: 200 });

    registry.markDown(registry.get(D)!, 'worker grpc://decode:1 failed: 14 UNAVAILABLE');
    const both = criticalStates(ctx);
    expect(both.map((s) => s.message)).toEqual([
      `no healthy encode worker: every request with an image fails with 503 (${E}: HealthCheck failed: 14 UNAVAILABLE: No connection established)`,
      `no healthy decode worker: every request fails with 503 (${D}: worker grpc://decode:1 failed: 14 UNAVAILABLE)`,
    ]);
    expect(healthStatus(both)).toEqual({ status: 'unavailable', httpStatus: 503 });
  });

  it('not disaggregated: only the regular workers count, and a worker not yet discovered says so', () => {
    const config = RouterConfigSchema.parse({ workers: [{ url: 'grpc://a:1' }, { url: 'grpc://b:1' }] });
    const registry = new WorkerRegistry(config.workers, { healthIntervalMs: 60_000 });
    registry.markDown(registry.get('grpc://a:1')!, 'unreachable');
    expect(criticalStates({ store: store(config), registry }).map((s) => [s.role, s.fails, s.message])).toEqual([
      ['regular', 'every_request', 'no healthy worker: every request fails with 503 (grpc://a:1: unreachable; grpc://b:1: not yet discovered)'],
    ]);
  });

  it('every recent request failing: the last 5 failed on our side within 60 s; a success, a client error or time passing clears it', () => {
    const config = RouterConfigSchema.parse({ workers: [{ url: 'grpc://a:1' }] });
    const registry = healthyRegistry(config);
    let now = 1_700_000_000_000;
    const log = new RequestLog();
    const outcomes = new RecentOutcomes(log, () => now);
    let flips = 0;
    outcomes.onChange(() => flips++);
    const ctx = { store: store(config), registry, outcomes };
    const fail = (i: number, status = 502) =>
      log.add({ id: `r${i}`, time: now, status, worker: 'grpc://a:1', error: `worker grpc://a:1 failed: INTERNAL: boom ${i}` });
    for (let i = 1; i <= 4; i++) fail(i);
    expect(criticalStates(ctx)).toEqual([]);
    fail(5);
    const states = criticalStates(ctx);
    expect(states.map((s) => [s.kind, s.message, s.workers])).toEqual([
      [
        'requests_failing',
        'every recent request failed: the last 5, within 60 s; the latest with 502: worker grpc://a:1 failed: INTERNAL: boom 5',
        [{ url: 'grpc://a:1', error: 'worker grpc://a:1 failed: INTERNAL: boom 5' }],
      ],
    ]);
    expect(healthStatus(states)).toEqual({ status: 'degraded', httpStatus: 200 });
    expect(flips).toBe(1);
    // A client's own error is no failure of ours: it breaks the run.
    log.add({ id: 'r6', time: now, status: 400, error: 'request body is not valid JSON' });
    expect(criticalStates(ctx)).toEqual([]);
    expect(flips).toBe(2);
    for (let i = 7; i <= 11; i++) fail(i, 503);
    expect(criticalStates(ctx)).toHaveLength(1);
    now += 60_001;
    expect(criticalStates(ctx)).toEqual([]);
    now -= 60_001;
    log.add({ id: 'r12', time: now, status: 200 });
    expect(criticalStates(ctx)).toEqual([]);
    // The console's own requests (test tensors to a drained worker, calibration) are not the API's failing.
    for (let i = 13; i <= 18; i++)
      log.add({
        id: `r${i}`,
        time: now,
        status: 503,
        source: 'console',
        worker: 'grpc://a:1',
        error: 'no healthy worker (grpc://a:1: drained by the operator (out of rotation))',
      });
    expect(criticalStates(ctx)).toEqual([]);
  });
});

const images = makeTestImages();
afterAll(() => images.remove());
const stops: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const stop of stops.splice(0).reverse()) await stop();
});

async function roleWorker(role: 'encode' | 'prefill' | 'decode', port = 0, bootstrapPort = 0) {
  const served = role !== 'decode';
  const w = await startMmtc(
    ['worker', '--runtime', 'tokenspeed', '--port', String(port), '--role', role, ...(served ? ['--bootstrap-port', String(bootstrapPort)] : [])],
    served ? /bootstrap server on http:\/\// : /listening on grpc:\/\//,
  );
  stops.push(() => w.stop());
  const out = w.output();
  const url = /listening on (grpc:\/\/\S+)/.exec(out)![1]!;
  return {
    url,
    port: Number(new URL(url.replace('grpc:', 'http:')).port),
    bootstrapPort: served ? Number(/bootstrap server on http:\/\/\S+:(\d+)/.exec(out)![1]) : 0,
    kill: () => w.stop('SIGKILL'),
  };
}

async function health(url: string): Promise<{ httpStatus: number; status: string; critical: Array<{ role: string; message: string }> }> {
  const res = await fetch(`${url}/health`);
  return { httpStatus: res.status, ...((await res.json()) as { status: string; critical: Array<{ role: string; message: string }> }) };
}

async function until<T>(f: () => Promise<T | undefined>, ms: number): Promise<T> {
  const end = performance.now() + ms;
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    if (performance.now() > end) throw new Error(`not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('/health', () => {
  it('EPD, the encode worker killed (kill -9): 200 degraded naming it within 5 s, an image request 503; ok again once it is back', async () => {
    const [encode, prefill, decode] = await Promise.all([roleWorker('encode'), roleWorker('prefill'), roleWorker('decode')]);
    const router = createRouter(
      {
        port: 0,
        health_check_interval_secs: 0.5,
        disaggregation: 'epd',
        workers: [
          { url: encode.url, worker_type: 'encode', bootstrap_port: encode.bootstrapPort },
          { url: prefill.url, worker_type: 'prefill', bootstrap_port: prefill.bootstrapPort },
          { url: decode.url, worker_type: 'decode' },
        ],
      },
      { environment: readTransportEnvironment({}) },
    );
    const r = await router.start({ log: () => {} });
    stops.push(() => r.close());
    expect(await health(r.url)).toMatchObject({ httpStatus: 200, status: 'ok', critical: [] });

    await encode.kill();
    const down = await until(async () => {
      const h = await health(r.url);
      return h.status === 'degraded' ? h : undefined;
    }, 5_000);
    expect(down.httpStatus).toBe(200);
    expect(down.critical).toHaveLength(1);
    expect(down.critical[0]!.message).toMatch(
      new RegExp(`^no healthy encode worker: every request with an image fails with 503 \\(${encode.url.replace(/[.:/]/g, '\\$&')}: .+\\)$`),
    );

    // What /health says is what a client gets: its image request is refused naming the same worker.
    const image = images.bytes('photo.jpg').toString('base64');
    const res = await fetch(`${r.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        max_tokens: 8,
        messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: `data:image/jpeg;base64,${image}` } }] }],
      }),
    });
    expect(res.status).toBe(503);
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(
      new RegExp(`^no healthy encode worker \\(${encode.url.replace(/[.:/]/g, '\\$&')}: `),
    );

    await roleWorker('encode', encode.port, encode.bootstrapPort);
    const back = await until(async () => {
      const h = await health(r.url);
      return h.status === 'ok' ? h : undefined;
    }, 30_000);
    expect(back).toMatchObject({ httpStatus: 200, critical: [] });
  }, 90_000);

  it('no worker can be reached: 503 unavailable, naming the worker and why', async () => {
    const router = createRouter(
      { port: 0, health_check_interval_secs: 0.5, workers: [{ url: 'grpc://127.0.0.1:1', runtime: 'tokenspeed' }] },
      {
        environment: readTransportEnvironment({}),
      },
    );
    const r = await router.start({ log: () => {} });
    stops.push(() => r.close());
    const h = await health(r.url);
    expect(h.httpStatus).toBe(503);
    expect(h.status).toBe('unavailable');
    expect(h.critical.map((s) => s.role)).toEqual(['regular']);
    expect(h.critical[0]!.message).toMatch(/^no healthy worker: every request fails with 503 \(grpc:\/\/127\.0\.0\.1:1: .+\)$/);
  }, 30_000);
});
