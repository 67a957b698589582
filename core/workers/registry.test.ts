import { describe, expect, it } from 'vitest';
import { WorkerSpecSchema, type WorkerSpec } from '../config/schema.ts';
import type { EngineConnection, GenerateSink } from '../engines/engine.ts';
import { inRotation, MAX_CONCURRENT_PROBES, withAnswerClock, WorkerRegistry, type WorkerState } from './registry.ts';

// Selection and reconciliation only look at health, load, priority and urls; the gRPC side is
// exercised against real workers in router.test.ts and live-config.test.ts, so a connection
// that records whether it was closed stands in at the network edge.
function fakeConnection(url: string): EngineConnection & { closed: boolean } {
  return {
    runtime: 'vllm',
    url,
    closed: false,
    generate: () => ({ cancel() {} }),
    abort() {},
    health: async () => ({ healthy: true, message: '' }),
    info: async () => ({ labels: {} }),
    close() {
      this.closed = true;
    },
  };
}

const spec = (i: number, priority = 50): WorkerSpec => WorkerSpecSchema.parse({ url: `grpc://w${i}:1`, priority });

function registry(...priorities: number[]) {
  const specs = priorities.map((p, i) => spec(i, p));
  const r = new WorkerRegistry(specs, { healthIntervalMs: 60_000 });
  for (const w of r.list()) {
    w.healthy = true;
    w.runtime = 'vllm';
    w.connection = fakeConnection(w.spec.url);
  }
  return { r, specs };
}

describe('worker selection', () => {
  it('round_robin cycles over healthy workers and skips unhealthy ones', () => {
    const { r, specs } = registry(50, 50, 50);
    r.list()[1]!.healthy = false;
    expect([1, 2, 3, 4].map(() => r.select('round_robin', specs)!.spec.url)).toEqual(['grpc://w0:1', 'grpc://w2:1', 'grpc://w0:1', 'grpc://w2:1']);
  });

  it("least_load picks the fewest in flight, then the higher priority of the request's own entries", () => {
    const { r, specs } = registry(10, 90, 50);
    const [a, b, c] = r.list();
    a!.inFlight = 1;
    b!.inFlight = 3;
    c!.inFlight = 1;
    expect(r.select('least_load', specs)!.spec.url).toBe('grpc://w2:1'); // tie at 1: priority 50 beats 10
    // The request's snapshot may hold other priorities than the registry's newest entries.
    expect(r.select('least_load', [spec(0, 99), specs[1]!, specs[2]!])!.spec.url).toBe('grpc://w0:1');
    c!.inFlight = 5;
    expect(r.select('least_load', specs)!.spec.url).toBe('grpc://w0:1');
  });

  it("only the workers the request's snapshot lists are eligible", () => {
    const { r, specs } = registry(50, 50);
    expect(r.select('round_robin', [specs[1]!])!.spec.url).toBe('grpc://w1:1');
    expect(r.select('round_robin', [spec(7)])).toBeUndefined();
  });

  it('no healthy worker selects nothing', () => {
    const { r, specs } = registry(50);
    r.markDown(r.list()[0]!, 'UNAVAILABLE');
    expect(r.select('least_load', specs)).toBeUndefined();
    expect(r.list()[0]!.lastError).toBe('UNAVAILABLE');
  });
});

describe('reconcile', () => {
  it('a changed entry with the same url keeps its connection and discovered labels', async () => {
    const { r } = registry(50, 50);
    const w0 = r.list()[0]!;
    const connection = w0.connection;
    w0.discoveredLabels = { shm_namespace_id: 'a:1' };
    await r.reconcile([WorkerSpecSchema.parse({ url: 'grpc://w0:1', labels: { zone: 'x' }, priority: 70 })]);
    expect(r.list()).toHaveLength(1);
    expect(r.list()[0]).toBe(w0);
    expect(w0.connection).toBe(connection);
    expect(w0).toMatchObject({ healthy: true, labels: { shm_namespace_id: 'a:1', zone: 'x' }, spec: { priority: 70 } });
  });

  it('a removed worker takes no new requests, finishes its in-flight one, then closes', async () => {
    const { r, specs } = registry(50, 50);
    const w1 = r.list()[1]!;
    const connection = w1.connection as ReturnType<typeof fakeConnection>;
    r.acquire(w1);
    await r.reconcile([specs[0]!]);
    expect(r.select('round_robin', specs)!.spec.url).toBe('grpc://w0:1');
    expect(r.select('round_robin', specs)!.spec.url).toBe('grpc://w0:1');
    expect(r.drainingWorkers()).toEqual([w1]);
    expect(connection.closed).toBe(false);
    r.release(w1);
    expect(connection.closed).toBe(true);
    expect(r.drainingWorkers()).toEqual([]);
  });

  it('a drained worker removed and added again while its request finishes is back in rotation, as a worker added anew', async () => {
    const { r, specs } = registry(50, 50);
    const w1 = r.list()[1]!;
    r.drain(w1);
    r.acquire(w1);
    await r.reconcile([specs[0]!]);
    expect(r.drainingWorkers()).toEqual([w1]);
    await r.reconcile(specs);
    expect(r.get(specs[1]!.url)!.drainedAt).toBeUndefined();
    expect(inRotation(r.get(specs[1]!.url))).toBe(true);
    r.release(w1);
    r.close();
  });

  it('an added worker is not selectable before discovery says it is healthy', async () => {
    const { r, specs } = registry(50);
    // grpc://127.0.0.1:1 refuses connections: discovery finishes unhealthy, with the reason.
    const added = WorkerSpecSchema.parse({ url: 'grpc://127.0.0.1:1' });
    const reconciled = r.reconcile([specs[0]!, added]);
    expect(r.get(added.url)!.healthy).toBe(false);
    expect(r.select('round_robin', [added])).toBeUndefined();
    await reconciled;
    expect(r.get(added.url)).toMatchObject({ healthy: false, lastError: expect.stringContaining('no worker protocol answered HealthCheck') });
    r.close();
  });
});

describe('health checks', () => {
  it('a worker that restarted between two checks with another /dev/shm token has its new labels honoured, and its SHM lane judged afresh', async () => {
    const { r } = registry(50);
    const w = r.list()[0]!;
    w.discoveredLabels = { shm_namespace_id: 'boot:1' };
    w.labels = { ...w.discoveredLabels };
    w.shmLane = { error: 'EACCES', since: 1 };
    let advertised: Record<string, string> = { shm_namespace_id: 'boot:1' };
    w.connection = { ...fakeConnection(w.spec.url), info: async () => ({ labels: advertised }) };
    await r.checkAll();
    expect(w).toMatchObject({ healthy: true, labels: { shm_namespace_id: 'boot:1' }, shmLane: { error: 'EACCES' } });
    advertised = { shm_namespace_id: 'boot:2' };
    await r.checkAll();
    expect(w.healthy).toBe(true);
    expect(w.labels).toEqual({ shm_namespace_id: 'boot:2' });
    expect(w.shmLane).toBeUndefined();
    // The operator's labels still win over what the worker advertises; a failed read changes nothing.
    await r.reconcile([WorkerSpecSchema.parse({ url: w.spec.url, labels: { shm_namespace_id: 'pinned' } })]);
    w.connection = { ...fakeConnection(w.spec.url), info: async () => Promise.reject(new Error('UNAVAILABLE')) };
    await r.checkAll();
    expect(w.labels).toEqual({ shm_namespace_id: 'pinned' });
    expect(w.discoveredLabels).toEqual({ shm_namespace_id: 'boot:2' });
    r.close();
  });
});

// Under load a worker's HealthCheck can go unanswered past its timeout while the worker answers
// request after request (the reliability suite's 128 clients: 503 "no healthy worker" on all
// three). The check is the registry's own; only the worker's replies are scripted.
describe('a HealthCheck with no answer', () => {
  function slowHealth(r: WorkerRegistry, w: WorkerState, answerDuringCheck: boolean) {
    let sink: GenerateSink | undefined;
    const inner: EngineConnection = {
      ...fakeConnection(w.spec.url),
      generate: (_req, _opts, s) => ((sink = s), { cancel() {} }),
      health: async () => {
        if (answerDuringCheck) sink!.event({ kind: 'chunk', tokenIds: [1], promptTokens: 1, completionTokens: 1 });
        await new Promise((resolve) => setTimeout(resolve, 20));
        throw Object.assign(new Error('Deadline exceeded'), { code: 4, details: 'Deadline exceeded after 3.000s' });
      },
    };
    w.connection = withAnswerClock(inner, () => (w.lastAnsweredAt = performance.now()));
    w.connection.generate({ runtime: 'vllm', message: {} }, { deadline: Date.now() + 1000 }, { event() {}, failure() {}, end() {} });
    return r;
  }

  it('keeps a worker that answered a request meanwhile, and takes out one that answered nothing, naming the failure', async () => {
    const { r, specs } = registry(50, 50);
    const [busy, silent] = r.list() as WorkerState[];
    slowHealth(r, busy!, true);
    slowHealth(r, silent!, false);
    await r.checkAll();
    expect(busy!.healthy).toBe(true);
    expect(r.select('round_robin', [specs[0]!])?.spec.url).toBe(busy!.spec.url);
    expect(silent).toMatchObject({ healthy: false, lastError: 'HealthCheck failed: DEADLINE_EXCEEDED: Deadline exceeded after 3.000s' });
    // The next check with no answer from it takes the busy one out too.
    slowHealth(r, busy!, false);
    await r.checkAll();
    expect(busy!.healthy).toBe(false);
    r.close();
  });

  it('a worker that answers it is unhealthy is taken at its word, however busy', async () => {
    const { r } = registry(50);
    const w = r.list()[0]!;
    w.connection = withAnswerClock(
      { ...fakeConnection(w.spec.url), health: async () => ((w.lastAnsweredAt = performance.now()), { healthy: false, message: 'draining' }) },
      () => (w.lastAnsweredAt = performance.now()),
    );
    await r.checkAll();
    expect(w).toMatchObject({ healthy: false, lastError: 'worker reports unhealthy: draining' });
    r.close();
  });
});

// A list applied in one go must not open a channel to every worker at once (10,000 workers
// held 10,031 descriptors). Forty loopback servers accept and never answer, so no probe can
// end before its 300 ms timeout: until then only the workers of the first probes may have
// been contacted. (gRPC keeps closed channels' sockets a while, so open sockets would not tell.)
describe('discovery concurrency', () => {
  it(`probes at most ${MAX_CONCURRENT_PROBES} workers at once, however many there are`, async () => {
    const { createServer } = await import('node:net');
    const firstContact = new Map<number, number>();
    const sockets = new Set<import('node:net').Socket>();
    const servers = await Promise.all(
      Array.from({ length: 40 }, (_, i) => {
        const server = createServer((socket) => {
          sockets.add(socket);
          if (!firstContact.has(i)) firstContact.set(i, performance.now());
          socket.on('error', () => {}); // a probe giving up resets its connection: expected, not the test's subject
        });
        return new Promise<typeof server>((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
      }),
    );
    const specs = servers.map((s) => WorkerSpecSchema.parse({ url: `grpc://127.0.0.1:${(s.address() as import('node:net').AddressInfo).port}` }));
    const r = new WorkerRegistry(specs, { healthIntervalMs: 60_000, probeTimeoutMs: 300 });
    try {
      const t0 = performance.now();
      await r.discoverAll();
      const elapsed = performance.now() - t0;
      expect(r.list().every((w) => !w.healthy && w.lastError !== undefined)).toBe(true);
      expect(firstContact.size).toBe(40);
      // No probe ends before its 300 ms timeout (these workers never answer), so the workers
      // first reached within 250 ms of the first one are one wave of probes: at most the limit,
      // and more than one (they run at once). Measured from the first contact, not from the
      // call, so that a loaded machine slow to start the wave cannot fail it.
      const contacts = [...firstContact.values()].sort((a, b) => a - b);
      const firstWave = contacts.filter((t) => t - contacts[0]! < 250).length;
      expect(firstWave).toBeGreaterThan(1);
      expect(firstWave).toBeLessThanOrEqual(MAX_CONCURRENT_PROBES);
      // 40 workers, 16 at a time: three waves of at least one timeout each (unlimited: one).
      expect(elapsed).toBeGreaterThanOrEqual(3 * 300 - 50);
    } finally {
      r.close();
      for (const s of sockets) s.destroy();
      await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
    }
  }, 30_000);
});
