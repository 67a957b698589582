import { describe, expect, it } from 'vitest';
import { WorkerSpecSchema } from '../config/schema.ts';
import type { WorkerClient } from './client.ts';
import { WorkerRegistry } from './registry.ts';

// Selection only looks at health, load and priority; the gRPC client is not exercised here
// (router.test.ts drives real workers), so a placeholder stands in for a connected client.
const connected = { runtime: 'vllm', client: { close() {} } } as unknown as WorkerClient;

function registry(...priorities: number[]) {
  const r = new WorkerRegistry(priorities.map((priority, i) => WorkerSpecSchema.parse({ url: `grpc://w${i}:1`, priority })), { healthIntervalMs: 60_000 });
  for (const w of r.list()) {
    w.healthy = true;
    w.client = connected;
  }
  return r;
}

describe('worker selection', () => {
  it('round_robin cycles over healthy workers and skips unhealthy ones', () => {
    const r = registry(50, 50, 50);
    r.list()[1]!.healthy = false;
    expect([1, 2, 3, 4].map(() => r.select('round_robin')!.spec.url)).toEqual(['grpc://w0:1', 'grpc://w2:1', 'grpc://w0:1', 'grpc://w2:1']);
  });

  it('least_load picks the fewest in flight, then the higher priority', () => {
    const r = registry(10, 90, 50);
    const [a, b, c] = r.list();
    a!.inFlight = 1;
    b!.inFlight = 3;
    c!.inFlight = 1;
    expect(r.select('least_load')!.spec.url).toBe('grpc://w2:1'); // tie at 1: priority 50 beats 10
    c!.inFlight = 5;
    expect(r.select('least_load')!.spec.url).toBe('grpc://w0:1');
  });

  it('no healthy worker selects nothing', () => {
    const r = registry(50);
    r.markDown(r.list()[0]!, 'UNAVAILABLE');
    expect(r.select('least_load')).toBeUndefined();
    expect(r.list()[0]!.lastError).toBe('UNAVAILABLE');
  });

  it('replace keeps the discovered state of workers that stay and drops the others', async () => {
    const r = registry(50, 50);
    r.list()[0]!.runtime = 'vllm';
    r.list()[0]!.discoveredLabels = { shm_namespace_id: 'a:1' };
    await r.replace([WorkerSpecSchema.parse({ url: 'grpc://w0:1', labels: { zone: 'x' } })]);
    expect(r.list()).toHaveLength(1);
    expect(r.list()[0]).toMatchObject({ runtime: 'vllm', labels: { shm_namespace_id: 'a:1', zone: 'x' } });
    r.close();
  });
});
