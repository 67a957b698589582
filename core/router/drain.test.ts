// Draining a worker (the operator's maintenance state) through a real router over real
// reference workers: a drained worker gets no new request, nor a leg of one under PD, while the
// request it has in flight completes; /health no longer counts it; returned to rotation, it is
// picked again.
import { readdirSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { readTransportEnvironment } from '../config/env.ts';
import { startMmtc } from '../test/cli.ts';
import { createRouter } from './create.ts';
import type { RunningRouter } from './server.ts';

const environment = readTransportEnvironment({});
const ourFiles = () => readdirSync('/dev/shm').filter((f) => f.startsWith(`smg-tokenspeed-${process.pid}-`));
const stops: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const stop of stops.splice(0).reverse()) await stop();
  expect(ourFiles()).toEqual([]);
});

async function worker(role: 'regular' | 'prefill' | 'decode', extra: string[] = []): Promise<{ url: string; bootstrapPort?: number }> {
  const served = role === 'prefill';
  const w = await startMmtc(
    ['worker', '--runtime', 'tokenspeed', '--port', '0', '--role', role, ...(served ? ['--bootstrap-port', '0'] : []), ...extra],
    served ? /bootstrap server on http:\/\// : /listening on grpc:\/\//,
  );
  stops.push(() => w.stop());
  const out = w.output();
  const url = /listening on (grpc:\/\/\S+)/.exec(out)![1]!;
  return served ? { url, bootstrapPort: Number(/bootstrap server on http:\/\/\S+:(\d+)/.exec(out)![1]) } : { url };
}

async function start(config: Record<string, unknown>): Promise<RunningRouter> {
  const router = createRouter({ port: 0, health_check_interval_secs: 0.2, policy: 'round_robin', ...config }, { environment });
  const running = await router.start({ log: () => {} });
  stops.push(() => running.close());
  return running;
}

/** Until `f()` holds, polled every 20 ms for at most `ms`. */
async function until(f: () => boolean, ms: number): Promise<void> {
  const end = performance.now() + ms;
  while (!f()) {
    if (performance.now() > end) throw new Error(`not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

interface Answer {
  status: number;
  id: string;
  content: string;
}

async function chat(r: RunningRouter): Promise<Answer> {
  const res = await fetch(`${r.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ max_tokens: 16, messages: [{ role: 'user', content: 'hello' }] }),
  });
  const json = (await res.json()) as { id: string; choices?: Array<{ message: { content: string } }>; error?: { message: string } };
  return { status: res.status, id: json.id, content: json.choices?.[0]?.message.content ?? json.error!.message };
}

/** The worker the router sent a finished request to, from its request log. */
const servedBy = (r: RunningRouter, a: Answer) => r.context.requests!.get(a.id)?.worker;

const health = async (r: RunningRouter) => {
  const res = await fetch(`${r.url}/health`);
  return {
    status: res.status,
    body: (await res.json()) as {
      status: string;
      critical: Array<{ message: string; remedy: string }>;
      workers: Array<{ url: string; in_flight: number; drained?: boolean }>;
    },
  };
};

describe('draining a worker', () => {
  it('a drained worker gets no new request while its in-flight one completes; returned to rotation, it is picked again', async () => {
    const slow = await worker('regular', ['--delay-ms', '1500']);
    const other = await worker('regular');
    const r = await start({ workers: [{ url: slow.url }, { url: other.url }] });
    const registry = r.context.registry;
    await until(() => registry.list().every((w) => w.healthy), 10_000);

    // round_robin starts at the first worker: this request is the slow worker's, held 1.5 s.
    const inFlight = chat(r);
    await until(() => registry.get(slow.url)!.inFlight === 1, 5_000);
    registry.drain(registry.get(slow.url)!);

    const during: Answer[] = [];
    for (let i = 0; i < 4; i++) during.push(await chat(r));
    expect(during.map((a) => [a.status, servedBy(r, a)])).toEqual(Array.from({ length: 4 }, () => [200, other.url]));
    const drainedHealth = await health(r);
    expect(drainedHealth.status).toBe(200);
    expect(drainedHealth.body.workers.find((w) => w.url === slow.url)).toMatchObject({ drained: true, in_flight: 1 });

    const held = await inFlight;
    expect([held.status, servedBy(r, held)]).toEqual([200, slow.url]);
    expect(held.content.length).toBeGreaterThan(0);
    expect(registry.get(slow.url)!.inFlight).toBe(0);

    // Every worker drained: no capacity, and the 503 says why.
    registry.drain(registry.get(other.url)!);
    const none = await health(r);
    expect([none.status, none.body.status]).toEqual([503, 'unavailable']);
    expect(none.body.critical.map((c) => [c.message, c.remedy])).toEqual([
      [
        `no worker in rotation (every one is drained): every request fails with 503 (${slow.url}: drained by the operator (out of rotation); ${other.url}: drained by the operator (out of rotation))`,
        'return a drained worker to rotation (Workers)',
      ],
    ]);
    const refused = await chat(r);
    expect(refused.status).toBe(503);
    expect(refused.content).toBe(
      `no healthy worker (${slow.url}: drained by the operator (out of rotation); ${other.url}: drained by the operator (out of rotation))`,
    );

    registry.returnToRotation(registry.get(slow.url)!);
    registry.returnToRotation(registry.get(other.url)!);
    const after = [await chat(r), await chat(r)];
    expect(after.map((a) => a.status)).toEqual([200, 200]);
    expect(new Set(after.map((a) => servedBy(r, a)))).toEqual(new Set([slow.url, other.url]));
  });

  it('under PD, a drained prefill worker leaves its role: every request takes the other prefill worker', async () => {
    const p1 = await worker('prefill');
    const p2 = await worker('prefill');
    const d = await worker('decode');
    const r = await start({
      disaggregation: 'pd',
      workers: [
        { url: p1.url, worker_type: 'prefill', bootstrap_port: p1.bootstrapPort },
        { url: p2.url, worker_type: 'prefill', bootstrap_port: p2.bootstrapPort },
        { url: d.url, worker_type: 'decode' },
      ],
    });
    const registry = r.context.registry;
    await until(() => registry.list().every((w) => w.healthy), 10_000);
    registry.drain(registry.get(p1.url)!);
    const answers: Answer[] = [];
    for (let i = 0; i < 4; i++) answers.push(await chat(r));
    // A PD request's log names its prefill worker.
    expect(answers.map((a) => [a.status, servedBy(r, a)])).toEqual(Array.from({ length: 4 }, () => [200, p2.url]));
    registry.returnToRotation(registry.get(p1.url)!);
    const after = [await chat(r), await chat(r)];
    expect(new Set(after.map((a) => servedBy(r, a)))).toEqual(new Set([p1.url, p2.url]));
  });
});
