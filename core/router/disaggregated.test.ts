// Disaggregated serving end to end: the router in this process (real HTTP, preprocessing and
// /dev/shm), every worker a separate `mmtc worker --role …` process over TokenSpeed. What is
// checked is what the decode worker says it got (through the prefill worker, from each encode
// worker: which worker, which room, each tensor's path and fingerprint), the files left in
// /dev/shm, the traffic events, and the error an operator sees when a leg fails.
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { readTransportEnvironment } from '../config/env.ts';
import { startMmtc } from '../test/cli.ts';
import { makeFamilyModel } from '../test/family-models.ts';
import { makeTestImages } from '../test/images.ts';
import { createRouter } from './create.ts';
import type { RunningRouter } from './server.ts';

const images = makeTestImages();
const environment = readTransportEnvironment({});
const ourFiles = () => readdirSync('/dev/shm').filter((f) => f.startsWith(`smg-tokenspeed-${process.pid}-`));
const stops: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const stop of stops.splice(0).reverse()) await stop();
  expect(ourFiles()).toEqual([]);
});
const llavaScratch = mkdtempSync(path.join(tmpdir(), 'mmtc-epd-llava-'));
afterAll(() => {
  images.remove();
  rmSync(llavaScratch, { recursive: true, force: true });
});

interface RoleWorker {
  url: string;
  bootstrapPort: number | undefined;
  pid: number;
  stop(): Promise<unknown>;
}

async function worker(role: 'encode' | 'prefill' | 'decode' | 'regular', extra: string[] = [], runtime = 'tokenspeed'): Promise<RoleWorker> {
  const served = role === 'encode' || role === 'prefill';
  const w = await startMmtc(
    ['worker', '--runtime', runtime, '--port', '0', '--role', role, ...(served ? ['--bootstrap-port', '0'] : []), ...extra],
    served ? /bootstrap server on http:\/\// : /listening on grpc:\/\//,
  );
  stops.push(() => w.stop());
  const out = w.output();
  return {
    url: /listening on (grpc:\/\/\S+)/.exec(out)![1]!,
    bootstrapPort: served ? Number(/bootstrap server on http:\/\/\S+:(\d+)/.exec(out)![1]) : undefined,
    pid: w.pid,
    stop: () => w.stop(),
  };
}

/** `f()` once it is defined, polled every 20 ms for at most `ms`. */
async function until<T>(f: () => T | undefined, ms: number): Promise<T> {
  const end = performance.now() + ms;
  for (;;) {
    const v = f();
    if (v !== undefined) return v;
    if (performance.now() > end) throw new Error(`not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const spec = (w: RoleWorker, worker_type: 'encode' | 'prefill' | 'decode', more: Record<string, unknown> = {}) => ({
  url: w.url,
  worker_type,
  ...(w.bootstrapPort ? { bootstrap_port: w.bootstrapPort } : {}),
  ...more,
});

async function start(config: Record<string, unknown>): Promise<RunningRouter> {
  const router = createRouter({ port: 0, health_check_interval_secs: 0.2, multimodal_tensor_transport: 'auto', ...config }, { environment });
  const running = await router.start({ log: () => {} });
  stops.push(() => running.close());
  return running;
}

const imageUrl = (name: string) => ({ type: 'image_url', image_url: { url: `data:image/png;base64,${images.bytes(name).toString('base64')}` } });

async function chat(r: RunningRouter, names: string[], stream = false, maxTokens = 4000): Promise<{ status: number; content: string; id: string; ms: number }> {
  const t = performance.now();
  const body = { stream, max_tokens: maxTokens, messages: [{ role: 'user', content: [...names.map(imageUrl), { type: 'text', text: 'describe' }] }] };
  const res = await fetch(`${r.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const text = await res.text();
  if (stream && res.status === 200) {
    let content = '';
    let id = '';
    for (const line of text.split('\n')) {
      if (!line.startsWith('data: {')) continue;
      const chunk = JSON.parse(line.slice(6)) as { id: string; choices: Array<{ delta: { content?: string } }>; error?: { message: string } };
      id = chunk.id ?? id;
      if (chunk.error) content += `[error] ${chunk.error.message}`;
      content += chunk.choices?.[0]?.delta.content ?? '';
    }
    return { status: res.status, content, id, ms: performance.now() - t };
  }
  const json = JSON.parse(text) as { id: string; choices?: Array<{ message: { content: string } }>; error?: { message: string } };
  return { status: res.status, content: json.choices?.[0]?.message.content ?? json.error!.message, id: json.id, ms: performance.now() - t };
}

/** A TCP proxy to `url` that passes a closed connection on `lagMs` late; its grpc:// URL. */
async function laggingProxy(url: string, lagMs: number): Promise<string> {
  const target = new URL(url.replace('grpc://', 'http://'));
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port), target.hostname);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
    }
    client.pipe(upstream);
    upstream.on('data', (d) => client.write(d));
    const close = () => setTimeout(() => client.destroy(), lagMs);
    upstream.on('close', close).on('error', close);
    client.on('close', () => upstream.destroy()).on('error', () => upstream.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  stops.push(
    () =>
      new Promise((resolve) => {
        server.close(resolve);
        for (const socket of sockets) socket.destroy();
      }),
  );
  return `grpc://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
}

/** What the decode worker says of item `i`: its encode worker, its room, its encoder input's path. */
function item(content: string, i: number): { worker: string; room: string; path: string; fnv: string } | undefined {
  const m = new RegExp(`item ${i} from encode worker (grpc://\\S+), room (\\d+): encoder_input \\[[\\d,]+\\] \\w+ via (\\w+), \\d+ bytes, fnv1a (\\w+)`).exec(
    content,
  );
  return m ? { worker: m[1]!, room: m[2]!, path: m[3]!, fnv: m[4]! } : undefined;
}

describe('EPD', () => {
  it("each image goes to its encode worker by that worker's transport: SHM to the one sharing /dev/shm, inline to the other; the decode worker names both, with their rooms; no file is left", async () => {
    const [near, far, prefill, decode] = await Promise.all([
      worker('encode'),
      worker('encode', ['--shm-namespace-id', 'another-host']),
      worker('prefill'),
      worker('decode'),
    ]);
    const r = await start({
      disaggregation: 'epd',
      encode_policy: 'round_robin',
      workers: [spec(near, 'encode'), spec(far, 'encode'), spec(prefill, 'prefill'), spec(decode, 'decode')],
    });
    for (const stream of [false, true]) {
      const reply = await chat(r, ['rgb.png', 'photo.jpg'], stream);
      expect(reply.status, reply.content).toBe(200);
      expect(reply.content).toMatch(new RegExp(`^2 images via epd, prefill ${prefill.url}, kv room \\d+\\. item 0 from encode worker`));
      const items = [item(reply.content, 0)!, item(reply.content, 1)!];
      expect(new Set(items.map((it) => it.worker))).toEqual(new Set([near.url, far.url]));
      // Both encoder inputs reach the threshold: by SHM where the encode worker shares /dev/shm.
      for (const it of items) expect(it.path).toBe(it.worker === near.url ? 'shm' : 'inline');
      // The traffic events say the same: leg encode, the room the decode worker names.
      const events = r.context.events.recent().filter((e) => e.requestId === reply.id && e.tensor.startsWith('encoder_input'));
      expect(events.map((e) => [e.leg, e.worker, e.room, e.path]).sort()).toEqual(items.map((it) => ['encode', it.worker, it.room, it.path]).sort());
      expect(ourFiles()).toEqual([]);
    }
  });

  it('LLaVA-1.5 (a family without a grid): each image reaches its encode worker as one [1, 3, 336, 336] CLIP crop, which that worker judges by its shape; no file is left', async () => {
    const dir = makeFamilyModel(path.join(llavaScratch, 'llava'), 'llava');
    const model = ['--model-path', dir];
    const [encode, prefill, decode] = await Promise.all([worker('encode', model), worker('prefill', model), worker('decode', model)]);
    const r = await start({ disaggregation: 'epd', model_path: dir, workers: [spec(encode, 'encode'), spec(prefill, 'prefill'), spec(decode, 'decode')] });
    // LLaVA-1.5's context is 4096 tokens: two images (1152) and room for the reply.
    const reply = await chat(r, ['rgb.png', 'photo.jpg'], false, 2000);
    expect(reply.status, reply.content).toBe(200);
    for (const i of [0, 1])
      expect(reply.content).toMatch(new RegExp(`item ${i} from encode worker ${encode.url}, room \\d+: encoder_input \\[1,3,336,336\\] float16 via shm`));
    expect(ourFiles()).toEqual([]);
  });

  it('Kimi-K2.5 (a family whose grid is grid_thws): each image reaches its encode worker as MoonViT patches with its grid_thws; the prefill worker, which refuses an item without its grid, takes the request; no file is left', async () => {
    const dir = makeFamilyModel(path.join(llavaScratch, 'kimi'), 'kimi_k25');
    const model = ['--model-path', dir];
    const [encode, prefill, decode] = await Promise.all([worker('encode', model), worker('prefill', model), worker('decode', model)]);
    const r = await start({ disaggregation: 'epd', model_path: dir, workers: [spec(encode, 'encode'), spec(prefill, 'prefill'), spec(decode, 'decode')] });
    const reply = await chat(r, ['rgb.png', 'photo.jpg']);
    expect(reply.status, reply.content).toBe(200);
    // 400x300 padded to 420x308: 22x30 patches of [3, 14, 14], bfloat16 (the checkpoint's torch_dtype).
    for (const i of [0, 1])
      expect(reply.content).toMatch(new RegExp(`item ${i} from encode worker ${encode.url}, room \\d+: encoder_input \\[660,3,14,14\\] bfloat16 via shm`));
    expect(reply.content.match(/grid_thws \[1,3\] int64/g)).toHaveLength(2);
    expect(ourFiles()).toEqual([]);
  });

  it('Phi-3-vision (batched crops, image_sizes its grid, num_img_tokens shared): each image reaches its encode worker as 17 crops with its image_sizes; the prefill worker, which refuses an item without them, takes the request; no file is left', async () => {
    const dir = makeFamilyModel(path.join(llavaScratch, 'phi3'), 'phi3_v');
    const model = ['--model-path', dir];
    const [encode, prefill, decode] = await Promise.all([worker('encode', model), worker('prefill', model), worker('decode', model)]);
    const r = await start({ disaggregation: 'epd', model_path: dir, workers: [spec(encode, 'encode'), spec(prefill, 'prefill'), spec(decode, 'decode')] });
    const reply = await chat(r, ['rgb.png', 'photo.jpg']);
    expect(reply.status, reply.content).toBe(200);
    // 400x300: 1344x1008, its 12 tiles and the global image among 17 crops, bfloat16 (the checkpoint's torch_dtype).
    for (const i of [0, 1])
      expect(reply.content).toMatch(new RegExp(`item ${i} from encode worker ${encode.url}, room \\d+: encoder_input \\[1,17,3,336,336\\] bfloat16 via shm`));
    expect(reply.content.match(/image_sizes \[1,2\] int64/g)).toHaveLength(2);
    // num_img_tokens has no field layout: each encode item gets the request's whole, as the gateway sends it.
    expect(reply.content.match(/num_img_tokens \[2\] int64/g)).toHaveLength(2);
    expect(ourFiles()).toEqual([]);
  });

  it('an override on one encode worker changes only its items; four images in one request, each to one encode worker', async () => {
    const [a, b, prefill, decode] = await Promise.all([worker('encode'), worker('encode'), worker('prefill'), worker('decode')]);
    const r = await start({
      disaggregation: 'epd',
      encode_policy: 'round_robin',
      workers: [spec(a, 'encode', { multimodal_tensor_transport: 'inline' }), spec(b, 'encode'), spec(prefill, 'prefill'), spec(decode, 'decode')],
    });
    const reply = await chat(r, ['rgb.png', 'photo.jpg', 'gray.png', 'photo444.jpg']);
    expect(reply.status, reply.content).toBe(200);
    const items = [0, 1, 2, 3].map((i) => item(reply.content, i)!);
    expect(items.filter((it) => it.worker === a.url)).toHaveLength(2);
    for (const it of items) expect(it.path).toBe(it.worker === a.url ? 'inline' : 'shm');
    const inlineReason = r.context.events.recent().find((e) => e.requestId === reply.id && e.worker === a.url && e.tensor.startsWith('encoder_input'))!;
    expect(inlineReason.reason).toBe('mode_inline');
    expect(ourFiles()).toEqual([]);
  });

  it('an encode worker added to a running router (live apply) takes its share of the images, by its own transport, from the next request on', async () => {
    const [first, prefill, decode] = await Promise.all([worker('encode'), worker('prefill'), worker('decode')]);
    const router = createRouter(
      {
        port: 0,
        health_check_interval_secs: 0.2,
        multimodal_tensor_transport: 'auto',
        disaggregation: 'epd',
        encode_policy: 'round_robin',
        workers: [spec(first, 'encode'), spec(prefill, 'prefill'), spec(decode, 'decode')],
      },
      { environment },
    );
    const r = await router.start({ log: () => {} });
    stops.push(() => r.close());
    const before = await chat(r, ['rgb.png', 'photo.jpg']);
    expect([item(before.content, 0)!.worker, item(before.content, 1)!.worker]).toEqual([first.url, first.url]);

    const added = await worker('encode', ['--shm-namespace-id', 'another-host']);
    router.applyConfig({ ...router.config, workers: [...router.config.workers, spec(added, 'encode')] });
    await until(() => (r.context.registry.get(added.url)?.healthy ? true : undefined), 10_000);
    const after = await chat(r, ['rgb.png', 'photo.jpg']);
    expect(after.status, after.content).toBe(200);
    const items = [item(after.content, 0)!, item(after.content, 1)!];
    expect(new Set(items.map((it) => it.worker))).toEqual(new Set([first.url, added.url]));
    for (const it of items) expect(it.path).toBe(it.worker === added.url ? 'inline' : 'shm');
    expect(r.context.events.recent().find((e) => e.requestId === after.id && e.worker === added.url && e.tensor.startsWith('encoder_input'))).toMatchObject({
      leg: 'encode',
      path: 'inline',
      reason: expect.stringMatching(/^auto_different_(host|shm)$/),
    });
  });

  it("the start-up lines name each worker's role", async () => {
    const [e, prefill, decode] = await Promise.all([worker('encode'), worker('prefill'), worker('decode')]);
    const lines: string[] = [];
    const router = createRouter(
      { port: 0, multimodal_tensor_transport: 'auto', disaggregation: 'epd', workers: [spec(e, 'encode'), spec(prefill, 'prefill'), spec(decode, 'decode')] },
      { environment },
    );
    const r = await router.start({ log: (l) => lines.push(l) });
    stops.push(() => r.close());
    expect(lines.filter((l) => l.startsWith('worker '))).toEqual([
      `worker ${e.url} (tokenspeed, encode worker): healthy`,
      `worker ${prefill.url} (tokenspeed, prefill worker): healthy`,
      `worker ${decode.url} (tokenspeed, decode worker): healthy`,
    ]);
  });

  it('consistent hashing keeps an image on one encode worker; a text-only request runs as PD', async () => {
    const [a, b, prefill, decode] = await Promise.all([worker('encode'), worker('encode'), worker('prefill'), worker('decode')]);
    const r = await start({ disaggregation: 'epd', workers: [spec(a, 'encode'), spec(b, 'encode'), spec(prefill, 'prefill'), spec(decode, 'decode')] });
    const seen = new Map<string, Set<string>>();
    for (let round = 0; round < 3; round++) {
      for (const name of ['rgb.png', 'photo.jpg', 'gray.png']) {
        const reply = await chat(r, [name]);
        expect(reply.status, reply.content).toBe(200);
        (seen.get(name) ?? seen.set(name, new Set()).get(name)!).add(item(reply.content, 0)!.worker);
      }
    }
    for (const [, workers] of seen) expect(workers.size).toBe(1);
    const text = await chat(r, []);
    expect(text.status).toBe(200);
    expect(text.content).toMatch(new RegExp(`^no images via pd, prefill ${prefill.url}, kv room \\d+$`));
  });

  it('an encode worker that does not accept, and one that never hands the embedding over: 502 naming the worker and the image, in bounded time, no file left', async () => {
    const [refusing, prefill, decode] = await Promise.all([
      worker('encode', ['--encode-accept', 'false']),
      worker('prefill', ['--embedding-timeout-ms', '1000']),
      worker('decode'),
    ]);
    const r = await start({ disaggregation: 'epd', workers: [spec(refusing, 'encode'), spec(prefill, 'prefill'), spec(decode, 'decode')] });
    const refused = await chat(r, ['photo.jpg']);
    expect(refused.status).toBe(502);
    expect(refused.content).toBe(`encode worker ${refusing.url} (image 0) did not accept the image (EncodeResponse.accepted is false)`);
    expect(refused.ms).toBeLessThan(10_000);
    expect(ourFiles()).toEqual([]);

    const [dropping, prefill2] = await Promise.all([worker('encode', ['--encode-drop']), worker('prefill', ['--embedding-timeout-ms', '1000'])]);
    const r2 = await start({ disaggregation: 'epd', workers: [spec(dropping, 'encode'), spec(prefill2, 'prefill'), spec(decode, 'decode')] });
    const lost = await chat(r2, ['photo.jpg']);
    expect(lost.status).toBe(502);
    expect(lost.content).toMatch(
      new RegExp(
        `^prefill worker ${prefill2.url} failed: DEADLINE_EXCEEDED: item 0: no embedding from 127\\.0\\.0\\.1:${dropping.bootstrapPort} room \\d+ within 1000 ms$`,
      ),
    );
    // Bounded by the prefill's 1 s wait, not the router's 600 s deadline (generous: a loaded machine is slow).
    expect(lost.ms).toBeLessThan(1000 + 9_000);
    const health = await fetch(`${r2.url}/health`);
    expect(health.status).toBe(200);
  }, 45_000);

  it("1,000 idle fetches at an encode worker's bootstrap server (anyone can send them) do not shut out a request's prefill: 200, its image through that encode worker", async () => {
    // Held 1.5 s before it reads its image: the prefill worker's fetch for the embedding comes first and must wait.
    const [encode, prefill, decode] = await Promise.all([
      worker('encode', ['--delay-ms', '1500']),
      worker('prefill', ['--embedding-timeout-ms', '20000']),
      worker('decode'),
    ]);
    const r = await start({ disaggregation: 'epd', workers: [spec(encode, 'encode'), spec(prefill, 'prefill'), spec(decode, 'decode')] });
    const idle: http.ClientRequest[] = [];
    stops.push(async () => idle.forEach((q) => q.destroy()));
    for (let i = 0; i < 1000; i++) {
      const q = http.get({ host: '127.0.0.1', port: encode.bootstrapPort, path: `/embedding/${900_000 + i}?wait_ms=60000`, agent: false }, (res) =>
        res.resume(),
      );
      q.on('error', () => {}); // destroyed unanswered at the end (stops): its "socket hang up" is expected
      idle.push(q);
    }
    await until(() => (idle.every((q) => q.writableFinished) ? true : undefined), 10_000);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const reply = await chat(r, ['photo.jpg']);
    expect(reply.status, reply.content).toBe(200);
    expect(item(reply.content, 0)).toMatchObject({ worker: encode.url });
  }, 60_000);

  it('an encode worker killed while it holds its image: 502 naming it (not the prefill worker that could not reach its bootstrap server first), and it is out of rotation at once', async () => {
    for (const lagMs of [0, 50]) {
      const [victim, prefill, decode] = await Promise.all([
        worker('encode', ['--delay-ms', '3000']),
        worker('prefill', ['--embedding-timeout-ms', '10000']),
        worker('decode'),
      ]);
      // With a lag the router hears of the dead connection 50 ms after the prefill worker
      // (whose fetch from the encode worker's bootstrap server fails at once) has answered.
      const url = lagMs ? await laggingProxy(victim.url, lagMs) : victim.url;
      const r = await start({ disaggregation: 'epd', workers: [{ ...spec(victim, 'encode'), url }, spec(prefill, 'prefill'), spec(decode, 'decode')] });
      const pending = chat(r, ['photo.jpg']);
      // Its Encode call placed (and sent just after): killed while it holds it, the prefill
      // worker waiting at its bootstrap server for the embedding.
      await until(() => (r.context.events.recent().some((e) => e.leg === 'encode') ? true : undefined), 5_000);
      await new Promise((resolve) => setTimeout(resolve, 500));
      process.kill(victim.pid, 'SIGKILL');
      const reply = await pending;
      expect(reply.status).toBe(502);
      expect(reply.content).toMatch(new RegExp(`^encode worker ${url} \\(image 0\\) failed: UNAVAILABLE: `));
      const next = await chat(r, ['photo.jpg']);
      expect(next.status).toBe(503);
      expect(ourFiles()).toEqual([]);
    }
  }, 60_000);

  it("an encode worker that hangs mid-request (SIGSTOP): 504 at the router's deadline naming it and the image first among the legs still running, /health answers meanwhile, no file left", async () => {
    const [hung, prefill, decode] = await Promise.all([
      worker('encode', ['--delay-ms', '1500']),
      worker('prefill', ['--embedding-timeout-ms', '30000']),
      worker('decode'),
    ]);
    const r = await start({
      disaggregation: 'epd',
      request_timeout_secs: 2,
      workers: [spec(hung, 'encode'), spec(prefill, 'prefill'), spec(decode, 'decode')],
    });
    // Held 1.5 s in its Encode call: stopped while it has the image (its file written, not yet read).
    const pending = chat(r, ['photo.jpg']);
    await until(() => (ourFiles().length > 0 ? true : undefined), 10_000);
    process.kill(hung.pid, 'SIGSTOP');
    stops.push(async () => process.kill(hung.pid, 'SIGCONT'));
    const t = performance.now();
    const health = await fetch(`${r.url}/health`);
    expect(health.status).toBe(200);
    expect(performance.now() - t).toBeLessThan(5_000);
    const reply = await pending;
    expect(reply.status).toBe(504);
    // Every leg still running at the deadline is named, the pipeline's first (the hung one) first.
    expect(reply.content).toBe(`encode worker ${hung.url} (image 0), prefill worker ${prefill.url} and decode worker ${decode.url} did not finish within 2 s`);
    // At the router's 2 s deadline, not whenever the stopped worker would answer (never): generous for a loaded machine.
    expect(reply.ms).toBeLessThan(2_000 + 8_000);
    expect(ourFiles()).toEqual([]);
  }, 30_000);

  it("an encode worker that hangs (SIGSTOP, its bootstrap server with it) while its prefill worker gives up waiting for the embedding: the 502 names the encode worker whose Encode call never finished, then the prefill's words", async () => {
    const [hung, prefill, decode] = await Promise.all([
      worker('encode', ['--delay-ms', '1500']),
      worker('prefill', ['--embedding-timeout-ms', '1000']),
      worker('decode'),
    ]);
    const r = await start({
      disaggregation: 'epd',
      request_timeout_secs: 30,
      workers: [spec(hung, 'encode'), spec(prefill, 'prefill'), spec(decode, 'decode')],
    });
    const pending = chat(r, ['photo.jpg']);
    await until(() => (ourFiles().length > 0 ? true : undefined), 10_000);
    process.kill(hung.pid, 'SIGSTOP');
    stops.push(async () => process.kill(hung.pid, 'SIGCONT'));
    const reply = await pending;
    expect(reply.status).toBe(502);
    expect(reply.content).toMatch(
      new RegExp(
        `^encode worker ${hung.url} \\(image 0\\) had not answered its Encode call after \\d+\\.\\d s; prefill worker ${prefill.url} rejected the request: FAILED_PRECONDITION: item 0: the bootstrap server 127\\.0\\.0\\.1:${hung.bootstrapPort} cannot be reached: timed out$`,
      ),
    );
    expect(reply.ms).toBeLessThan(30_000);
    expect(ourFiles()).toEqual([]);
  }, 60_000);

  it.runIf(process.getuid?.() === 0)(
    'an encode worker that cannot open the files (another uid) gets its image again inline, attempt 2, and its lane stays inline',
    async () => {
      const [nobody, prefill, decode] = await Promise.all([worker('encode', ['--user', 'nobody']), worker('prefill'), worker('decode')]);
      const r = await start({
        disaggregation: 'epd',
        multimodal_tensor_transport: 'shm',
        workers: [spec(nobody, 'encode'), spec(prefill, 'prefill'), spec(decode, 'decode')],
      });
      const reply = await chat(r, ['photo.jpg']);
      expect(reply.status, reply.content).toBe(200);
      expect(item(reply.content, 0)).toMatchObject({ worker: nobody.url, path: 'inline' });
      const events = r.context.events.recent().filter((e) => e.requestId === reply.id && e.tensor.startsWith('encoder_input'));
      expect(events.map((e) => [e.path, e.attempt ?? 1, e.reason])).toEqual([
        ['shm', 1, 'shm_writable'],
        ['inline', 2, 'shm_worker_read_failed'],
      ]);
      expect(r.context.registry.get(nobody.url)!.shmLane).toBeDefined();
      expect(ourFiles()).toEqual([]);
    },
  );
});

describe('files and their count while legs run', () => {
  it('an image file handed to its Encode call still counts against the outstanding bytes until the call returns; a client that leaves mid-prefill leaves no file and no count', async () => {
    // The Encode call is held 8 s; the file shows up after preprocessing, which on a loaded CI
    // machine (the pool's threads run at nice 10) can take seconds, so the wait for it is 7.5 s (a miss fails, not hangs).
    const [slow, prefill, decode] = await Promise.all([worker('encode', ['--delay-ms', '8000']), worker('prefill'), worker('decode')]);
    const r = await start({ disaggregation: 'epd', workers: [spec(slow, 'encode'), spec(prefill, 'prefill'), spec(decode, 'decode')] });
    const writer = r.context.writer;
    const pending = chat(r, ['photo.jpg']);
    // Once the file is written (while its Encode call is held), the count is its size: once,
    // whether the request's scope or the pixel cache (which keeps the same inode) counts it.
    const counted = () => writer.outstanding + (r.context.pixelCache?.stats().heldBytes ?? 0);
    const sizes = () => ourFiles().reduce((n, f) => n + statSync(`/dev/shm/${f}`).size, 0);
    expect(await until(() => (sizes() > 0 && sizes() === counted() ? counted() : undefined), 7_500)).toBeGreaterThan(1_000_000);
    expect((await pending).status).toBe(200);
    expect(writer.outstanding).toBe(0);

    const slowPrefill = await worker('prefill', ['--delay-ms', '8000']);
    const r2 = await start({ disaggregation: 'pd', workers: [spec(slowPrefill, 'prefill'), spec(decode, 'decode')] });
    const body = JSON.stringify({ max_tokens: 50, messages: [{ role: 'user', content: [imageUrl('photo.jpg'), { type: 'text', text: 'describe' }] }] });
    const u = new URL(`${r2.url}/v1/chat/completions`);
    const req = http.request({
      host: u.hostname,
      port: u.port,
      path: u.pathname,
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    });
    const gone = new Promise((resolve) => req.on('error', () => resolve('gone')).on('close', () => resolve('gone')));
    req.end(body);
    await until(() => (ourFiles().length > 0 ? true : undefined), 7_500);
    req.destroy();
    expect(await gone).toBe('gone');
    await until(() => (ourFiles().length === 0 && r2.context.writer.outstanding === 0 ? true : undefined), 10_000);
  }, 60_000);
});

describe('PD', () => {
  it('the prefill worker reads the pixels by its own transport; the decode worker answers, streamed or not, and gets none', async () => {
    const [prefill, decode] = await Promise.all([worker('prefill'), worker('decode')]);
    const r = await start({ disaggregation: 'pd', workers: [spec(prefill, 'prefill'), spec(decode, 'decode')] });
    for (const stream of [false, true]) {
      const reply = await chat(r, ['photo.jpg', 'rgb.png'], stream);
      expect(reply.status, reply.content).toBe(200);
      expect(reply.content).toMatch(
        new RegExp(`^2 images via pd, prefill ${prefill.url}, kv room \\d+: encoder_input\\[0\\] \\[[\\d,]+\\] bfloat16 via shm, `),
      );
      // The pixels went to the prefill worker only; the decode leg carried the images' small metadata tensors, inline.
      const events = r.context.events.recent().filter((e) => e.requestId === reply.id);
      expect(new Set(events.filter((e) => e.tensor.startsWith('encoder_input')).map((e) => `${e.leg}:${e.worker}:${e.path}`))).toEqual(
        new Set([`prefill:${prefill.url}:shm`]),
      );
      expect(
        events.filter((e) => e.leg === 'decode').every((e) => e.worker === decode.url && e.path === 'inline' && !e.tensor.startsWith('encoder_input')),
      ).toBe(true);
    }
    expect(ourFiles()).toEqual([]);
  });

  it("a decode worker whose KV never comes: 502 in its own words (not a timeout of the router's), the prefill call ended with it", async () => {
    const [prefill, decode] = await Promise.all([worker('prefill', ['--delay-ms', '8000']), worker('decode', ['--kv-timeout-ms', '500'])]);
    const r = await start({ disaggregation: 'pd', workers: [spec(prefill, 'prefill'), spec(decode, 'decode')] });
    const reply = await chat(r, ['rgb.png']);
    expect(reply.status).toBe(502);
    expect(reply.content).toMatch(
      new RegExp(
        `^decode worker ${decode.url} failed: DEADLINE_EXCEEDED: the KV: no KV from 127\\.0\\.0\\.1:${prefill.bootstrapPort} room \\d+ within 500 ms$`,
      ),
    );
    // The decode's 500 ms, not the prefill's 8 s (generous for a loaded machine).
    expect(reply.ms).toBeLessThan(6_000);
    // Both workers stay in service: a peer's missing record is not a transport failure.
    expect(r.context.registry.get(prefill.url)!.healthy && r.context.registry.get(decode.url)!.healthy).toBe(true);
  });

  it('vLLM: the prefill first, asked for one token; the decode takes the KV transfer parameters it returned', async () => {
    const [prefill, decode] = await Promise.all([worker('prefill', [], 'vllm'), worker('decode', [], 'vllm')]);
    const r = await start({
      disaggregation: 'pd',
      workers: [
        { ...spec(prefill, 'prefill'), runtime: 'vllm' },
        { ...spec(decode, 'decode'), runtime: 'vllm' },
      ],
    });
    for (const stream of [false, true]) {
      const reply = await chat(r, ['rgb.png', 'photo.jpg'], stream);
      expect(reply.status, reply.content).toBe(200);
      expect(reply.content).toMatch(new RegExp(`^2 images via pd, prefill ${prefill.url}, transfer ${reply.id}: pixel_values \\[[\\d,]+\\] float32 via shm, `));
      const events = r.context.events.recent().filter((e) => e.requestId === reply.id);
      expect(new Set(events.filter((e) => e.tensor === 'pixel_values').map((e) => `${e.leg}:${e.worker}`))).toEqual(new Set([`prefill:${prefill.url}`]));
    }
    expect(ourFiles()).toEqual([]);
  });

  it("vLLM by the prefill worker's KV connector: Mooncake, a transfer id the router mints and decode parameters it builds; without an engine id, the legacy host and port", async () => {
    const [prefill, decode] = await Promise.all([
      worker('prefill', ['--kv-connector', 'mooncake'], 'vllm'),
      worker('decode', ['--kv-connector', 'mooncake'], 'vllm'),
    ]);
    const logs: string[] = [];
    const router = createRouter(
      {
        port: 0,
        health_check_interval_secs: 0.2,
        multimodal_tensor_transport: 'auto',
        disaggregation: 'pd',
        workers: [
          { ...spec(prefill, 'prefill'), runtime: 'vllm' },
          { ...spec(decode, 'decode'), runtime: 'vllm' },
        ],
      },
      { environment },
    );
    const r = await router.start({ log: (l) => logs.push(l) });
    stops.push(() => r.close());
    const reply = await chat(r, ['rgb.png', 'photo.jpg'], true);
    expect(reply.status, reply.content).toBe(200);
    // The decode took the record the prefill kept under the router's transfer id, at the address the router gave it.
    expect(reply.content).toMatch(
      new RegExp(
        `^2 images via pd, prefill ${prefill.url}, transfer xfer-[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}: pixel_values \\[[\\d,]+\\] float32 via shm, `,
      ),
    );
    await until(() => logs.find((l) => l.includes(reply.id)), 2000);
    expect(JSON.parse(logs.find((l) => l.includes(reply.id))!)).toMatchObject({ kv_handoff: 'mooncake' });
    // Without the prefill worker's engine id (an operator label clears it): the legacy typed host and port, keyed by the request id.
    const s = r.store.current();
    r.store.apply(
      { ...s.config, workers: s.config.workers.map((w) => (w.worker_type === 'prefill' ? { ...w, labels: { kv_engine_id: '' } } : w)) },
      s.revision,
      { origin: 'test', client: 'api' },
    );
    const legacy = await chat(r, ['rgb.png']);
    expect(legacy.status, legacy.content).toBe(200);
    expect(legacy.content).toMatch(new RegExp(`^1 image via pd, prefill ${prefill.url}, transfer ${legacy.id}: pixel_values`));
  });

  it('vLLM without a KV connector: the prefill runs untagged and the decode computes the prompt itself, with the pixels (which the gateway would not send it)', async () => {
    const [prefill, decode] = await Promise.all([worker('prefill', ['--kv-connector', 'none'], 'vllm'), worker('decode', ['--kv-connector', 'none'], 'vllm')]);
    const logs: string[] = [];
    const router = createRouter(
      {
        port: 0,
        health_check_interval_secs: 0.2,
        multimodal_tensor_transport: 'auto',
        disaggregation: 'pd',
        workers: [
          { ...spec(prefill, 'prefill'), runtime: 'vllm' },
          { ...spec(decode, 'decode'), runtime: 'vllm' },
        ],
      },
      { environment },
    );
    const r = await router.start({ log: (l) => logs.push(l) });
    stops.push(() => r.close());
    const reply = await chat(r, ['rgb.png', 'photo.jpg']);
    expect(reply.status, reply.content).toBe(200);
    expect(reply.content).toMatch(/^2 images via pd, recomputed \(no KV handoff\): pixel_values \[[\d,]+\] float32 via shm, /);
    const events = r.context.events.recent().filter((e) => e.requestId === reply.id && e.tensor === 'pixel_values');
    expect(events.map((e) => `${e.leg}:${e.worker}`).sort()).toEqual([`decode:${decode.url}`, `prefill:${prefill.url}`]);
    await until(() => logs.find((l) => l.includes(reply.id)), 2000);
    expect(JSON.parse(logs.find((l) => l.includes(reply.id))!).kv_handoff).toBe(
      'none: the prefill worker has no KV connector: the decode computes the prompt again',
    );
    expect(ourFiles()).toEqual([]);
  });

  it('prefill and decode workers of a runtime without disaggregated serving: 503 saying why', async () => {
    const [prefill, decode] = await Promise.all([worker('regular', [], 'sglang'), worker('regular', [], 'sglang')]);
    const r = await start({
      disaggregation: 'pd',
      workers: [
        { url: prefill.url, worker_type: 'prefill', runtime: 'sglang' },
        { url: decode.url, worker_type: 'decode', runtime: 'sglang' },
      ],
    });
    const reply = await chat(r, ['rgb.png']);
    expect(reply.status).toBe(503);
    expect(reply.content).toBe('SGLang workers do not serve disaggregated requests: disaggregation pd needs TokenSpeed and vLLM prefill and decode workers');
  });
});
