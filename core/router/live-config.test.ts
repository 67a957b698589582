// Live reconfiguration of a running router, end to end: the router runs in this process
// (real HTTP, real preprocessing, real /dev/shm), the workers are separate `mmtc worker`
// processes. Each apply goes through createRouter().applyConfig (the embedding API) on the
// started router, and what is checked is what a worker and an operator see: the path the
// worker says each tensor took, the files in /dev/shm, the revision on the response header,
// on every traffic event and in the request's log line.
import { readdirSync } from 'node:fs';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { readTransportEnvironment } from '../config/env.ts';
import { ConfigError } from '../config/errors.ts';
import { ConfigConflictError, RestartRequiredError } from '../config/store.ts';
import { startMmtc } from '../test/cli.ts';
import { makeTestImages } from '../test/images.ts';
import { createRouter, type Router } from './create.ts';
import type { RunningRouter } from './server.ts';

const images = makeTestImages();
const environment = readTransportEnvironment({});
const ourFiles = () => readdirSync('/dev/shm').filter((f) => f.startsWith(`smg-tokenspeed-${process.pid}-`));
const stops: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const stop of stops.splice(0).reverse()) await stop();
  expect(ourFiles()).toEqual([]);
});
afterAll(() => images.remove());

async function startWorker(runtime: 'tokenspeed' | 'vllm', extra: string[] = []): Promise<string> {
  const w = await startMmtc(['worker', '--runtime', runtime, '--port', '0', ...extra], /listening on grpc:\/\//);
  stops.push(() => w.stop());
  return w.line.match(/grpc:\/\/\S+/)![0];
}

async function start(options: Parameters<typeof createRouter>[0]): Promise<{ router: Router; running: RunningRouter; logs: string[] }> {
  const router = createRouter({ port: 0, health_check_interval_secs: 0.2, ...options }, { environment });
  const logs: string[] = [];
  const running = await router.start({ log: (l) => logs.push(l) });
  stops.push(() => running.close());
  return { router, running, logs };
}

const body = {
  messages: [
    {
      role: 'user',
      content: [
        { type: 'image_url', image_url: { url: `data:image/png;base64,${images.bytes('rgb.png').toString('base64')}` } },
        { type: 'text', text: 'describe' },
      ],
    },
  ],
};

async function chat(r: RunningRouter): Promise<{ status: number; revision: string | null; content: string; id: string }> {
  const res = await fetch(`${r.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const json = (await res.json()) as { id: string; choices: Array<{ message: { content: string } }>; error?: { message: string } };
  return {
    status: res.status,
    revision: res.headers.get('x-mmtc-config-revision'),
    content: json.choices?.[0]?.message.content ?? json.error!.message,
    id: json.id,
  };
}

/** The encoder tensor's path as the worker reported it. */
const encoderPath = (content: string) => /(?:encoder_input|pixel_values) \[[\d,]+\] \w+ via (\w+)/.exec(content)?.[1];

function eventsOf(r: RunningRouter, requestId: string) {
  return r.context.events.recent().filter((e) => e.requestId === requestId);
}

describe('applying a configuration to a running router', () => {
  it('a router-wide mode change, then a worker override, reach the next request; each request carries its revision', async () => {
    const worker = await startWorker('tokenspeed');
    const { router, running, logs } = await start({ multimodal_tensor_transport: 'inline', workers: [{ url: worker }] });

    const first = await chat(running);
    expect(first).toMatchObject({ status: 200, revision: '1' });
    expect(encoderPath(first.content)).toBe('inline');
    expect(eventsOf(running, first.id).map((e) => [e.tensor, e.path, e.revision, e.reason])).toEqual([
      ['encoder_input', 'inline', 1, 'mode_inline'],
      ['image_grid_thw', 'inline', 1, 'mode_inline'],
      ['patches_per_image', 'inline', 1, 'mode_inline'],
    ]);

    expect(router.applyConfig({ ...router.config, multimodal_tensor_transport: 'auto' })).toBe(2);
    const second = await chat(running);
    expect(second).toMatchObject({ status: 200, revision: '2' });
    expect(encoderPath(second.content)).toBe('shm');
    expect(eventsOf(running, second.id)[0]).toMatchObject({ path: 'shm', revision: 2, reason: 'auto_tokens_equal' });

    // Router back to inline, the worker's own override to shm: the worker layer wins.
    router.applyConfig({ ...router.config, multimodal_tensor_transport: 'inline', workers: [{ url: worker, multimodal_tensor_transport: 'shm' }] });
    expect(router.resolveTransport()[0]!.multimodal_tensor_transport).toMatchObject({ value: 'shm', source: 'worker' });
    const third = await chat(running);
    expect(third).toMatchObject({ status: 200, revision: '3' });
    expect(encoderPath(third.content)).toBe('shm');
    expect(eventsOf(running, third.id)[0]).toMatchObject({ path: 'shm', revision: 3, reason: 'shm_writable' });

    const lines = logs.filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
    expect(lines.map((l) => [l.id, l.status, l.revision, l.worker, l.tensors])).toEqual([
      [first.id, 200, 1, worker, { inline: 3, shm: 0, remote: 0 }],
      [second.id, 200, 2, worker, { inline: 2, shm: 1, remote: 0 }],
      [third.id, 200, 3, worker, { inline: 2, shm: 1, remote: 0 }],
    ]);
    expect(lines[0].latency_ms).toBeGreaterThan(0);
  });

  it('an added worker is discovered before it is used; then both take requests', async () => {
    const a = await startWorker('tokenspeed');
    const b = await startWorker('vllm');
    const { router, running } = await start({ multimodal_tensor_transport: 'auto', workers: [{ url: a }] });
    router.applyConfig({ ...router.config, workers: [{ url: a }, { url: b }] });
    await running.reconciled();
    expect(running.context.registry.get(b)).toMatchObject({ runtime: 'vllm', healthy: true });
    const replies = [await chat(running), await chat(running)];
    expect(replies.map((r) => r.status)).toEqual([200, 200]);
    // round_robin: one TokenSpeed item (encoder_input) and one vLLM batch (pixel_values), both through SHM.
    expect(replies.map((r) => /^1 image: (\w+)/.exec(r.content)?.[1]).sort()).toEqual(['encoder_input', 'pixel_values']);
    expect(replies.map((r) => encoderPath(r.content))).toEqual(['shm', 'shm']);
  });

  it('a removed worker finishes its in-flight request on its revision, then takes no more and closes', async () => {
    const slow = await startWorker('tokenspeed', ['--delay-ms', '1500']);
    const other = await startWorker('vllm');
    const { router, running } = await start({ multimodal_tensor_transport: 'shm', workers: [{ url: slow }, { url: other, worker_type: 'decode' }] });
    const inFlight = chat(running);
    for (let i = 0; i < 100 && ourFiles().length === 0; i++) await new Promise((r) => setTimeout(r, 20));
    expect(ourFiles()).toHaveLength(1); // its encoder input waits in /dev/shm for the slow worker

    router.applyConfig({ ...router.config, workers: [{ url: other }] });
    expect(running.context.registry.drainingWorkers().map((w) => w.spec.url)).toEqual([slow]);
    const next = await chat(running);
    expect(next).toMatchObject({ status: 200, revision: '2' });
    expect(next.content).toMatch(/^1 image: pixel_values/);

    const old = await inFlight;
    expect(old).toMatchObject({ status: 200, revision: '1' });
    expect(encoderPath(old.content)).toBe('shm');
    expect(eventsOf(running, old.id).every((e) => e.revision === 1 && e.worker === slow)).toBe(true);
    expect(running.context.registry.drainingWorkers()).toEqual([]);
    expect(running.context.registry.get(slow)).toBeUndefined();
    expect(ourFiles()).toEqual([]);
  });

  it('an invalid config, a start-only setting and a stale revision change nothing', async () => {
    const worker = await startWorker('tokenspeed');
    const { router, running } = await start({ multimodal_tensor_transport: 'inline', workers: [{ url: worker }] });
    const before = router.store.current();
    expect(() => router.applyConfig({ ...router.config, multimodal_tensor_transport: 'fast' as never })).toThrow(ConfigError);
    expect(() => router.applyConfig({ ...router.config, port: 1234, multimodal_tensor_transport: 'shm' })).toThrow(RestartRequiredError);
    expect(router.store.current()).toBe(before);

    // Two clients edit revision 1 at once: exactly one wins, the other's change is nowhere.
    const outcomes = await Promise.allSettled(
      ['shm', 'auto'].map(async (mode) => router.applyConfig({ ...before.config, multimodal_tensor_transport: mode as 'shm' | 'auto' }, 1)),
    );
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected']);
    expect((outcomes[1] as PromiseRejectedResult).reason).toBeInstanceOf(ConfigConflictError);
    const reply = await chat(running);
    expect(reply.revision).toBe('2');
    expect(encoderPath(reply.content)).toBe('shm');
  });
});

describe('worker_type', () => {
  it('with only disaggregated workers the router answers 503 naming them, and never sends a chat request to them', async () => {
    const worker = await startWorker('tokenspeed');
    const { running } = await start({
      workers: [
        { url: worker, worker_type: 'prefill' },
        { url: worker.replace(/:\d+$/, ':1'), worker_type: 'decode' },
      ],
    });
    const reply = await chat(running);
    expect(reply.status).toBe(503);
    expect(reply.content).toBe(
      'no regular worker is configured (configured: 1 prefill, 1 decode); routing one request across prefill, decode and encode workers needs disaggregation: pd or epd',
    );
    expect(running.context.events.recent()).toEqual([]);
  });
});
