// The router end to end over loopback: this process runs the router (real HTTP server,
// real preprocessing threads, real /dev/shm writes), each worker is a separate `mmtc worker`
// process that reads tensors as real workers do. For each runtime and mode a chat request
// with a PNG and a JPEG goes through; we check the bytes the worker read (fingerprints)
// against the bytes the router produced, the path each tensor took, that /dev/shm holds
// none of our files afterwards, and /metrics.
import { asQwenConfig } from '../multimodal/families/index.ts';
import { createServer } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import type { TransportMode } from '../config/schema.ts';
import { encodeFloat32As } from '../transport/dtype.ts';
import { fnv1a64Hex } from '../util/fnv.ts';
import { readNamespaceToken } from '../transport/namespace.ts';
import { decodeToRgb } from '../multimodal/decode.ts';
import { loadModelDirectory } from '../multimodal/model-dir.ts';
import { preprocessRgb } from '../multimodal/qwen-vl.ts';
import { startMmtc } from '../test/cli.ts';
import { ourTensorFiles, useRouterRig } from '../test/router-rig.ts';
import { makeTestImages } from '../test/images.ts';
import type { RunningRouter } from './server.ts';

const images = makeTestImages();
const model = await loadModelDirectory();
const token = readNamespaceToken().token!;
const OTHER_SHM = `${token.slice(0, token.lastIndexOf(':'))}:999999`;
const { stops, startWorker, router } = useRouterRig();
const ourFiles = ourTensorFiles;
afterAll(() => images.remove());

const dataUrl = (name: string, mime: string) => `data:${mime};base64,${images.bytes(name).toString('base64')}`;
const chatBody = (stream = false) => ({
  model: 'qwen2-vl-mini',
  stream,
  messages: [
    {
      role: 'user',
      content: [
        { type: 'image_url', image_url: { url: dataUrl('rgb.png', 'image/png') } },
        { type: 'text', text: 'and' },
        { type: 'image_url', image_url: { url: dataUrl('photo.jpg', 'image/jpeg') } },
        { type: 'text', text: 'What differs?' },
      ],
    },
  ],
});

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a JSON reply, read field by field as each test asserts it
type Json = any;
const json = async (res: Response | Promise<Response>): Promise<Json> => (await res).json();

async function post(r: RunningRouter, body: unknown): Promise<Response> {
  return fetch(`${r.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
}

/** The encoder bytes the router must have produced for our two images, in the wire dtype. */
async function expectedFingerprints(dtype: 'float32' | 'bfloat16') {
  const out: string[] = [];
  const all: Float32Array[] = [];
  for (const name of ['rgb.png', 'photo.jpg']) {
    const img = await decodeToRgb(images.bytes(name));
    const p = preprocessRgb(img.rgb, img.width, img.height, asQwenConfig(model.imageConfig));
    all.push(p.pixelValues!);
    out.push(fnv1a64Hex(encodeFloat32As(dtype, p.pixelValues!)));
  }
  const joined = new Float32Array(all[0]!.length + all[1]!.length);
  joined.set(all[0]!);
  joined.set(all[1]!, all[0]!.length);
  return { perImage: out, batched: fnv1a64Hex(encodeFloat32As('float32', joined)) };
}

function readStream(text: string): { content: string; finish: string | null; done: boolean } {
  let content = '';
  let finish: string | null = null;
  const events = text.split('\n\n').filter((e) => e.startsWith('data: '));
  for (const e of events) {
    const data = e.slice(6);
    if (data === '[DONE]') continue;
    const chunk = JSON.parse(data);
    expect(chunk.object).toBe('chat.completion.chunk');
    for (const c of chunk.choices) {
      content += c.delta.content ?? '';
      finish = c.finish_reason ?? finish;
    }
  }
  return { content, finish, done: events.at(-1) === 'data: [DONE]' };
}

const CASES: Array<{ name: string; mode: TransportMode; workerArgs: string[]; shm: boolean }> = [
  { name: 'inline', mode: 'inline', workerArgs: [], shm: false },
  { name: 'shm', mode: 'shm', workerArgs: ['--shm-namespace-id', ''], shm: true },
  { name: 'auto with a matching token', mode: 'auto', workerArgs: [], shm: true },
  { name: 'auto with a different token', mode: 'auto', workerArgs: ['--shm-namespace-id', OTHER_SHM], shm: false },
  { name: 'auto with no token', mode: 'auto', workerArgs: ['--shm-namespace-id', ''], shm: false },
];

describe.each(['tokenspeed', 'vllm'] as const)('%s worker', (runtime) => {
  it.each(CASES)("$name: the worker reads the router's exact bytes over the decided path", async ({ mode, workerArgs, shm }) => {
    const worker = await startWorker(runtime, workerArgs);
    const r = await router(worker, mode);
    const res = await post(r, chatBody(mode === 'shm'));
    expect(res.status).toBe(200);
    const content = mode === 'shm' ? readStream(await res.text()).content : (await json(res)).choices[0].message.content;
    const path = shm ? 'shm' : 'inline';
    const fp = await expectedFingerprints(runtime === 'tokenspeed' ? 'bfloat16' : 'float32');
    if (runtime === 'tokenspeed') {
      expect(content).toMatch(/^2 images: /);
      expect(content).toContain(`encoder_input[0] [616,1176] bfloat16 via ${path}, 1448832 bytes, fnv1a ${fp.perImage[0]}`);
      expect(content).toContain(`encoder_input[1] [616,1176] bfloat16 via ${path}, 1448832 bytes, fnv1a ${fp.perImage[1]}`);
      expect(content).toContain('image_grid_thw[0] [1,3] int64 via inline, 24 bytes');
    } else {
      expect(content).toContain(`pixel_values [1232,1176] float32 via ${path}, 5795328 bytes, fnv1a ${fp.batched}`);
      expect(content).toContain('image_grid_thw [2,3] int64 via inline, 48 bytes');
      // The gateway's layout: pixel_values split into the images by patches_per_image.
      expect(content).toContain('patches_per_image [2] int64 via inline, 16 bytes');
    }
    const metrics = await (await fetch(`${r.url}/metrics`)).text();
    const big = runtime === 'tokenspeed' ? 2 : 1;
    const small = runtime === 'tokenspeed' ? 4 : 2;
    if (shm) {
      expect(metrics).toContain(`smg_mm_tensors_total{runtime="${runtime}",path="shm"} ${big}`);
      expect(metrics).toContain(`smg_mm_tensors_total{runtime="${runtime}",path="inline"} ${small}`);
    } else {
      expect(metrics).toContain(`smg_mm_tensors_total{runtime="${runtime}",path="inline"} ${big + small}`);
      expect(metrics).not.toContain('path="shm"} ');
    }
    expect(ourFiles()).toEqual([]);
  });
});

describe('OpenAI API behaviour', () => {
  it('streams SSE in OpenAI format with usage, and the same text as non-streaming', async () => {
    const r = await router(await startWorker('tokenspeed'), 'auto');
    const plain = await json(post(r, chatBody(false)));
    const res = await post(r, { ...chatBody(true), stream_options: { include_usage: true } });
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    const text = await res.text();
    const streamed = readStream(text);
    expect(streamed).toMatchObject({ content: plain.choices[0].message.content, finish: 'stop', done: true });
    const usage = JSON.parse(
      text
        .split('\n\n')
        .filter((e) => e.startsWith('data: {'))
        .at(-1)!
        .slice(6),
    ).usage;
    expect(usage).toEqual(plain.usage);
    // Two images of 616 patches: 154 image tokens each, plus the text.
    expect(plain.usage.prompt_tokens).toBeGreaterThan(2 * 154);
    expect(plain.usage.total_tokens).toBe(plain.usage.prompt_tokens + plain.usage.completion_tokens);
  });

  it('max_tokens truncates with finish_reason length; JSON responses say where the time went', async () => {
    const r = await router(await startWorker('vllm'), 'inline');
    const res = await post(r, { ...chatBody(false), max_tokens: 5 });
    const spans = Object.fromEntries(
      res.headers
        .get('server-timing')!
        .split(', ')
        .map((p) => p.split(';dur=') as [string, string]),
    );
    expect(Object.keys(spans)).toEqual(['body', 'fetch', 'preprocess', 'prompt', 'place', 'worker', 'total']);
    expect(Number(spans.total)).toBeGreaterThanOrEqual(Number(spans.preprocess) + Number(spans.worker));
    const body = await json(res);
    expect(body.choices[0].finish_reason).toBe('length');
    expect(body.usage.completion_tokens).toBe(5);
  });

  it.each([
    [{ messages: [] }, 400, 'invalid messages: expected at least one message'],
    [{ messages: [{ role: 'user', content: 'hi' }], temperature: 3 }, 400, 'invalid temperature: expected a number from 0 to 2'],
    // What the engines refuse or misread is refused here, by the gateway's bounds: SGLang would divide its logits by a repetition_penalty of 0.
    [
      { messages: [{ role: 'user', content: 'hi' }], repetition_penalty: 0 },
      400,
      'invalid repetition_penalty: expected a number above 0 and at most 2 (1 is no penalty)',
    ],
    [{ messages: [{ role: 'user', content: 'hi' }], top_p: 0 }, 400, 'invalid top_p: expected a number above 0 and at most 1'],
    [{ messages: [{ role: 'user', content: 'hi' }], top_k: 0 }, 400, 'invalid top_k: expected -1 (off) or a whole number from 1'],
    [{ messages: [{ role: 'user', content: 'hi' }], stop: ['end', ''] }, 400, 'invalid stop[1]: expected a non-empty stop sequence'],
    [
      { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } }] }] },
      400,
      'image 0: not a decodable image',
    ],
    [
      { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'file:///etc/passwd' } }] }] },
      400,
      "image 0: unsupported image URL scheme 'file:'",
    ],
    [
      {
        messages: [
          { role: 'user', content: [{ type: 'image_url', image_url: { url: `data:image/png;base64,${Buffer.alloc(21 * 1024 * 1024).toString('base64')}` } }] },
        ],
      },
      413,
      'image 0: image is 21.0 MiB, above the 20.0 MiB limit',
    ],
  ])('bad input %# gets an OpenAI error body', async (body, status, message) => {
    const r = await router(await startWorker('tokenspeed'), 'inline');
    const res = await post(r, body);
    expect(res.status).toBe(status);
    const err = (await json(res)).error;
    expect(err.message.startsWith(message)).toBe(true);
    expect(err.type).toBe('invalid_request_error');
  });

  it('/v1/models and /health', async () => {
    const r = await router(await startWorker('vllm'), 'inline');
    expect((await json(fetch(`${r.url}/v1/models`))).data[0].id).toBe('qwen2-vl-mini');
    const health = await json(fetch(`${r.url}/health`));
    expect(health.workers[0]).toMatchObject({ runtime: 'vllm', healthy: true, in_flight: 0 });
  });
});

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

describe('worker failures', () => {
  it('a worker killed mid-request gives 502 and leaves no file in /dev/shm; restarted, it is rediscovered and used; the log says when it left and came back', async () => {
    const port = String(await freePort());
    const slow = await startMmtc(['worker', '--runtime', 'tokenspeed', '--port', port, '--delay-ms', '3000'], /listening on/);
    const logs: string[] = [];
    const r = await router(`grpc://127.0.0.1:${port}`, 'shm', {}, (l) => logs.push(l));
    const pending = post(r, chatBody(false));
    for (let i = 0; i < 100 && ourFiles().length < 2; i++) await new Promise((res) => setTimeout(res, 50));
    expect(ourFiles()).toHaveLength(2); // both encoder inputs are in /dev/shm, not yet read
    await slow.stop('SIGKILL'); // a crash, not a shutdown
    const res = await pending;
    expect(res.status).toBe(502);
    expect((await json(res)).error.message).toMatch(new RegExp(`^worker grpc://127.0.0.1:${port} failed`));
    expect(ourFiles()).toEqual([]);
    const down = await json(fetch(`${r.url}/health`));
    expect(down.workers[0].healthy).toBe(false);
    expect((await post(r, chatBody(false))).status).toBe(503);

    await startWorker('tokenspeed', ['--port', port]);
    for (let i = 0; i < 100; i++) {
      if ((await json(fetch(`${r.url}/health`))).workers[0].healthy) break;
      await new Promise((res) => setTimeout(res, 100));
    }
    const again = await post(r, chatBody(false));
    expect(again.status).toBe(200);
    expect((await json(again)).choices[0].message.content).toContain('via shm');
    const rotation = logs.filter((l) => l.includes('"event":"worker_')).map((l) => JSON.parse(l));
    expect(rotation).toEqual([
      {
        time: expect.any(String),
        event: 'worker_out_of_rotation',
        worker: `grpc://127.0.0.1:${port}`,
        worker_type: 'regular',
        reason: expect.stringMatching(/^(HealthCheck failed: )?UNAVAILABLE: /),
      },
      { time: expect.any(String), event: 'worker_in_rotation', worker: `grpc://127.0.0.1:${port}`, worker_type: 'regular' },
    ]);
  });

  it("a worker slower than request_timeout_secs gives 504 and the request's files are unlinked", async () => {
    const worker = await startWorker('tokenspeed', ['--delay-ms', '4000']);
    const r = await router(worker, 'shm', { request_timeout_secs: 1 });
    const res = await post(r, chatBody(false));
    expect(res.status).toBe(504);
    expect(await json(res)).toMatchObject({ error: { type: 'timeout', message: `worker ${worker} did not finish within 1 s` } });
    expect(ourFiles()).toEqual([]);
  });

  it('a client that disconnects mid-request cancels it and its files are unlinked', async () => {
    const worker = await startWorker('vllm', ['--delay-ms', '3000']);
    const r = await router(worker, 'shm');
    const controller = new AbortController();
    const pending = fetch(`${r.url}/v1/chat/completions`, { method: 'POST', body: JSON.stringify(chatBody(false)), signal: controller.signal }).catch(
      (e: Error) => e,
    );
    for (let i = 0; i < 100 && ourFiles().length < 1; i++) await new Promise((res) => setTimeout(res, 50));
    expect(ourFiles()).toHaveLength(1);
    controller.abort();
    expect(await pending).toBeInstanceOf(Error);
    for (let i = 0; i < 50 && ourFiles().length > 0; i++) await new Promise((res) => setTimeout(res, 20));
    expect(ourFiles()).toEqual([]);
    expect((await json(fetch(`${r.url}/health`))).workers[0].in_flight).toBe(0);
  });
});

describe('a worker that answers nonsense', () => {
  it('token ids outside the vocabulary give 502 naming the id, not silently dropped text', async () => {
    // A stand-in worker at the network edge only: real gRPC, real router, a bad reply.
    const grpc = await import('@grpc/grpc-js');
    const { VllmEngineService, GetModelInfoResponse, GetServerInfoResponse } = await import('../gen/vllm/grpc/engine.ts');
    const server = new grpc.Server();
    server.addService(VllmEngineService, {
      healthCheck: (_c: unknown, cb: (e: null, r: object) => void) => cb(null, { healthy: true, message: '' }),
      getModelInfo: (_c: unknown, cb: (e: null, r: object) => void) => cb(null, GetModelInfoResponse.fromPartial({})),
      getServerInfo: (_c: unknown, cb: (e: null, r: object) => void) => cb(null, GetServerInfoResponse.fromPartial({})),
      abort: (_c: unknown, cb: (e: null, r: object) => void) => cb(null, {}),
      generate: (call: { write(m: object): void; end(): void }) => {
        call.write({
          response: {
            $case: 'complete',
            value: { outputIds: [1_000_000_000], finishReason: 'stop', promptTokens: 1, completionTokens: 1, cachedTokens: 0, index: 0 },
          },
        });
        call.end();
      },
    });
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
    );
    stops.push(() => new Promise<void>((resolve) => server.tryShutdown(() => resolve())));
    const r = await router(`grpc://127.0.0.1:${port}`, 'shm');
    const res = await post(r, chatBody(false));
    expect(res.status).toBe(502);
    expect((await json(res)).error.message).toBe(`worker grpc://127.0.0.1:${port} sent token id 1000000000, outside the model's vocabulary of 151936`);
  });
});

describe('mmtc router with no worker configured (the README command)', () => {
  it('starts the embedded reference worker, says so, serves a multimodal request, and stops it on exit', async () => {
    const r = await startMmtc(['router', '--port', '0', '--multimodal-tensor-transport', 'auto'], /^\s+transport /);
    const out = r.output();
    const url = /listening on (http:\/\/\S+)/.exec(out)![1]!;
    const workerUrl = /worker (grpc:\/\/\S+) \(tokenspeed, embedded reference worker\): healthy/.exec(out)![1]!;
    expect(r.line).toBe("  transport auto (from router), shm_min_bytes 65536: auto: the worker shares the router's /dev/shm (namespace tokens equal)");
    const res = await fetch(`${url}/v1/chat/completions`, { method: 'POST', body: JSON.stringify(chatBody(false)) });
    expect(res.status).toBe(200);
    expect((await json(res)).choices[0].message.content).toContain('encoder_input[1] [616,1176] bfloat16 via shm');
    expect(await r.stop()).toBe(0);
    const after = await import('../workers/discovery.ts').then((m) => m.probeWorker(workerUrl, { timeoutMs: 1000 }));
    expect(after.reachable).toBe(false);
  });
});
