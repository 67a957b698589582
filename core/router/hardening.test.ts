// The router against hostile or careless clients and workers, over real processes: one
// request must not take it down, grow it without bound, reach inside the host, or break
// another router's tensors; every refusal names the field and the limit, with the right
// status, a log line and metrics.
import { readdirSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import sharp from 'sharp';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { readTransportEnvironment } from '../config/env.ts';
import { RouterConfigSchema, type RouterConfigInput } from '../config/schema.ts';
import { startMmtc } from '../test/cli.ts';
import { makeTestImages } from '../test/images.ts';
import { startOversizedWorker } from '../test/oversized-worker.ts';
import { startRouter, type RunningRouter } from './server.ts';

const images = makeTestImages();
const stops: Array<() => Promise<unknown>> = [];
const isRoot = process.getuid?.() === 0;
const ourFiles = (pid = process.pid) => readdirSync('/dev/shm').filter((f) => f.startsWith(`smg-tokenspeed-${pid}-`));
afterEach(async () => {
  for (const stop of stops.splice(0).reverse()) await stop();
  expect(ourFiles()).toEqual([]);
});
afterAll(() => images.remove());

async function startWorker(runtime: 'tokenspeed' | 'vllm', extra: string[] = [], prefix: string[] = []): Promise<string> {
  const w = await startMmtc(['worker', '--runtime', runtime, '--port', '0', ...extra], /listening on grpc:\/\//, prefix.length ? { HOME: '/tmp' } : {}, prefix);
  stops.push(() => w.stop());
  return w.line.match(/grpc:\/\/\S+/)![0];
}

async function router(worker: string, extra: RouterConfigInput = {}): Promise<{ r: RunningRouter; logs: string[] }> {
  const logs: string[] = [];
  const r = await startRouter({
    config: RouterConfigSchema.parse({ port: 0, health_check_interval_secs: 0.5, workers: [{ url: worker }], ...extra }),
    env: readTransportEnvironment({}),
    processEnv: {},
    log: (l) => logs.push(l),
  });
  stops.push(() => r.close());
  return { r, logs };
}

const png = (name = 'rgb.png') => `data:image/png;base64,${images.bytes(name).toString('base64')}`;
const withImages = (urls: string[], text = 'describe') => ({
  messages: [{ role: 'user', content: [...urls.map((url) => ({ type: 'image_url', image_url: { url } })), { type: 'text', text }] }],
});

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a JSON reply, read field by field as each test asserts it
type Json = any;

/** POST a body (Buffer or object) with node:http: the status and the parsed body, however the router answers. */
function post(
  base: string,
  body: unknown,
  options: { chunks?: Buffer[]; delayMs?: number; headers?: Record<string, string> } = {},
): Promise<{ status: number; body: Json; ms: number }> {
  const u = new URL(`${base}/v1/chat/completions`);
  const data = Buffer.isBuffer(body) ? body : Buffer.from(JSON.stringify(body));
  const t = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: u.hostname,
        port: u.port,
        path: u.pathname,
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(options.chunks ? {} : { 'content-length': data.byteLength }), ...options.headers },
      },
      (res) => {
        const parts: Buffer[] = [];
        res.on('data', (c: Buffer) => parts.push(c));
        res.on('end', () => {
          const text = Buffer.concat(parts).toString();
          let parsed: unknown = text;
          try {
            parsed = JSON.parse(text);
          } catch {
            /* not JSON */
          }
          resolve({ status: res.statusCode!, body: parsed, ms: performance.now() - t });
        });
      },
    );
    req.on('error', reject);
    if (!options.chunks) return req.end(data);
    let i = 0;
    const next = () => {
      if (i >= options.chunks!.length) return req.end();
      req.write(options.chunks![i++]);
      setTimeout(next, options.delayMs ?? 0);
    };
    next();
  });
}

async function healthLatencyWhile<T>(base: string, work: Promise<T>): Promise<{ result: T; worstMs: number; polls: number }> {
  let done = false;
  let worst = 0;
  let polls = 0;
  const poller = (async () => {
    while (!done) {
      const t = performance.now();
      await fetch(`${base}/health`).then((r) => r.arrayBuffer());
      worst = Math.max(worst, performance.now() - t);
      polls += 1;
      await new Promise((r) => setTimeout(r, 10));
    }
  })();
  const result = await work;
  done = true;
  await poller;
  return { result, worstMs: worst, polls };
}

describe('admission: one request cannot take the router down', () => {
  // How fast (about 2 s, /health p99 under 100 ms) is measured by the reliability suite's
  // hardening/text-50mb on a quiet machine; here, what an operator would notice either way:
  // the refusal, and /health answering all along rather than once the body is done.
  it('a 50 MB text body is refused with context_length_exceeded, /health answering while it is read', async () => {
    const { r } = await router(await startWorker('tokenspeed'));
    const body = Buffer.from(JSON.stringify({ messages: [{ role: 'user', content: 'lorem ipsum dolor sit amet '.repeat(2_000_000).slice(0, 50_000_000) }] }));
    const { result, worstMs, polls } = await healthLatencyWhile(r.url, post(r.url, body));
    expect(result.status).toBe(400);
    expect(result.body.error).toMatchObject({ code: 'context_length_exceeded', param: 'messages', type: 'invalid_request_error' });
    expect(result.body.error.message).toMatch(/^This model's maximum context length is 32768 tokens/);
    // Bounds that only a router tokenizing or buffering the whole text would break, loaded machine or not.
    expect(result.ms).toBeLessThan(15_000);
    expect(polls).toBeGreaterThan(3);
    expect(worstMs).toBeLessThan(result.ms / 2);
  });

  it('a text that fits the bytes bound but not the context is counted in slices and refused, never sent', async () => {
    const { r } = await router(await startWorker('tokenspeed'));
    // ~300 KB of short words: more than 32768 tokens, too few bytes to prove it without counting.
    const res = await post(r.url, { messages: [{ role: 'user', content: 'a b c d e f g h '.repeat(40_000) }] });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('context_length_exceeded');
    expect(r.context.events.recent()).toEqual([]);
  });

  it('max_tokens beyond the context is a 400 naming it, not a worker failure', async () => {
    const { r } = await router(await startWorker('tokenspeed'));
    const res = await post(r.url, { max_tokens: 1e15, messages: [{ role: 'user', content: 'hi' }] });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ param: 'max_tokens', code: 'context_length_exceeded' });
    expect(res.body.error.message).toBe(
      "max_tokens is 1000000000000000, but this model's maximum context length is 32768 tokens, prompt and completion together",
    );
    const near = await post(r.url, {
      max_tokens: 32760,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'image_url', image_url: { url: png() } },
            { type: 'text', text: 'x' },
          ],
        },
      ],
    });
    expect(near.status).toBe(400);
    expect(near.body.error.message).toMatch(/However, you requested \d+ tokens \(\d+ in the messages, 32760 in the completion\)/);
  });

  it('more images than limit_mm_per_prompt, and more pixels than max_request_image_pixels, are refused before decoding', async () => {
    const { r } = await router(await startWorker('tokenspeed'), { limit_mm_per_prompt: { image: 2 } });
    const many = await post(r.url, withImages([png(), png(), png()]));
    expect(many.status).toBe(400);
    expect(many.body.error.message).toBe('this request has 3 images; at most 2 are accepted per request (limit_mm_per_prompt.image = 2)');
    // Two 10000x10000 PNGs of one colour: a few hundred KB, 200 million pixels.
    const bomb = await sharp({ create: { width: 10_000, height: 10_000, channels: 3, background: '#000' } })
      .png({ compressionLevel: 9 })
      .toBuffer();
    const rssBefore = process.memoryUsage().rss;
    const res = await post(r.url, withImages([`data:image/png;base64,${bomb.toString('base64')}`, `data:image/png;base64,${bomb.toString('base64')}`]));
    expect(res.status).toBe(413);
    expect(res.body.error.message).toBe(
      "the request's images have 200000000 pixels in all (image 0 10000x10000, image 1 10000x10000), above max_request_image_pixels = 64000000",
    );
    expect(process.memoryUsage().rss - rssBefore).toBeLessThan(200 * 1024 * 1024);
  });

  it('the preprocessing memory budget refuses an image that could never fit, by name', async () => {
    const { r } = await router(await startWorker('tokenspeed'), { preprocess_memory_bytes: 64 * 1024 * 1024 });
    const big = await sharp({ create: { width: 4000, height: 4000, channels: 3, background: '#123456' } })
      .png()
      .toBuffer();
    const res = await post(r.url, withImages([`data:image/png;base64,${big.toString('base64')}`]));
    expect(res.status).toBe(413);
    expect(res.body.error.message).toMatch(
      /^image 0: preprocessing this 4000x4000 image needs \d+(\.\d+)? MiB, above the preprocessing memory budget of 64\.0 MiB \(preprocess_memory_bytes\)$/,
    );
    expect(r.context.pool.memory().inUse).toBe(0);
    const ok = await post(r.url, withImages([png()]));
    expect(ok.status).toBe(200);
  });
});

describe('statuses and bodies', () => {
  it('a body over max_body_bytes gets a 413 JSON answer, not a reset connection', async () => {
    const { r } = await router(await startWorker('tokenspeed'), { max_body_bytes: 1024 * 1024 });
    const declared = await post(r.url, Buffer.alloc(3 * 1024 * 1024, 0x20));
    expect(declared.status).toBe(413);
    expect(declared.body.error.message).toBe('request body is 3.00 MiB, above the 1.00 MiB limit (max_body_bytes)');
    // Chunked, no length given: refused as it passes the limit.
    const streamed = await post(r.url, null, { chunks: Array.from({ length: 24 }, () => Buffer.alloc(128 * 1024, 0x20)) });
    expect(streamed.status).toBe(413);
    expect(streamed.body.error.message).toBe('request body is above the 1.00 MiB limit (max_body_bytes)');
  });

  it('a body much larger than the socket buffers still gets its 413 answer, on fresh connections, every time', async () => {
    // A router process of its own: in this process the client's and the server's events interleave too kindly to show a reset.
    const worker = await startWorker('tokenspeed');
    const p = await startMmtc(['router', '--port', '0', '--worker-urls', worker, '--max-body-bytes', String(1024 * 1024)], /^\s+transport /);
    stops.push(() => p.stop());
    const u = new URL(`${/listening on (http:\/\/\S+)/.exec(p.output())![1]}/v1/chat/completions`);
    const big = Buffer.alloc(32 * 1024 * 1024, 0x20);
    const once = () =>
      new Promise<string>((resolve) => {
        let answered = false;
        const req = http.request(
          {
            host: u.hostname,
            port: u.port,
            path: u.pathname,
            method: 'POST',
            agent: false,
            headers: { 'content-type': 'application/json', 'content-length': big.byteLength },
          },
          (res) => {
            answered = true;
            let text = '';
            res.on('data', (c: Buffer) => (text += c.toString()));
            res.on('end', () => resolve(`${res.statusCode} ${JSON.parse(text).error.message}`));
          },
        );
        // The client may still be writing when the server stops reading: only an error before any answer counts.
        req.on('error', (err: NodeJS.ErrnoException) => !answered && resolve(err.code ?? 'error'));
        req.end(big);
      });
    const outcomes = [];
    for (let i = 0; i < 6; i++) outcomes.push(await once());
    expect(outcomes).toEqual(Array(6).fill('413 request body is 32.0 MiB, above the 1.00 MiB limit (max_body_bytes)'));
  });

  it('a body trickled slower than body_timeout_secs is a 400 naming the timeout', async () => {
    const { r } = await router(await startWorker('tokenspeed'), { body_timeout_secs: 1 });
    const res = await post(r.url, null, { chunks: Array.from({ length: 30 }, () => Buffer.from('{')), delayMs: 100 });
    expect(res.status).toBe(400);
    expect(res.body.error.message).toBe('the request body did not arrive within 1 s (body_timeout_secs)');
  });

  it('an image URL naming this host is refused without a connection, and the error says nothing of what is there', async () => {
    let connections = 0;
    const inside = http.createServer((_q, s) => s.end('secret'));
    inside.on('connection', () => (connections += 1));
    await new Promise<void>((done) => inside.listen(0, '127.0.0.1', done));
    stops.push(() => new Promise((done) => inside.close(done)));
    const port = (inside.address() as AddressInfo).port;
    const { r } = await router(await startWorker('tokenspeed'));
    for (const host of ['127.0.0.1', 'localhost', '127.1', '2130706433', '[::ffff:127.0.0.1]']) {
      const res = await post(r.url, withImages([`http://${host}:${port}/x.png`]));
      expect(res.status, host).toBe(400);
      expect(res.body.error.message, host).toMatch(/is refused: .*(loopback|localhost)/);
      expect(JSON.stringify(res.body), host).not.toContain('secret');
    }
    expect(connections).toBe(0);
  });

  it("every request has a log line and the gateway's metrics", async () => {
    const { r, logs } = await router(await startWorker('tokenspeed'));
    await post(r.url, withImages([png()]));
    await post(r.url, { max_tokens: 1e15, messages: [{ role: 'user', content: 'hi' }] });
    const lines = logs.filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
    expect(lines.map((l) => [l.path, l.status])).toEqual([
      ['/v1/chat/completions', 200],
      ['/v1/chat/completions', 400],
    ]);
    expect(lines[1].error).toMatch(/^max_tokens is 1000000000000000/);
    const metrics = await (await fetch(`${r.url}/metrics`)).text();
    expect(metrics).toContain('smg_http_requests_total{method="POST",path="/v1/chat/completions"} 2');
    expect(metrics).toContain('smg_http_responses_total{status_code="200",error_code=""} 1');
    expect(metrics).toContain('smg_http_responses_total{status_code="400",error_code="context_length_exceeded"} 1');
    expect(metrics).toMatch(/smg_http_request_duration_seconds_count\{method="POST",path="\/v1\/chat\/completions"\} 2/);
    expect(metrics).toMatch(
      /smg_router_requests_total\{router_type="grpc",backend_type="regular",connection_mode="grpc",model="qwen2-vl-mini",endpoint="chat"\} 1/,
    );
    expect(metrics).toMatch(/smg_router_ttft_seconds_count\{[^}]*\} 1/);
  });
});

describe('a worker whose replies are too large', () => {
  it('a Generate reply of 300 MB is refused from its length prefix: 502 naming the worker, the size and the limit; the router goes on', async () => {
    const big = await startOversizedWorker(300 * 1024 * 1024);
    stops.push(() => big.close());
    // No health check while the 300 MB reply is written: the worker shares this test's event loop, and on a busy
    // machine a check behind that write times out and takes the worker down (which is not what this test is about).
    const { r, logs } = await router(big.url, { health_check_interval_secs: 60 });
    const reply = await post(r.url, withImages([png()]));
    expect(reply.status).toBe(502);
    expect(reply.body.error.message).toMatch(
      new RegExp(
        `^worker ${big.url} failed: RESOURCE_EXHAUSTED: its reply message of 3145728\\d\\d bytes is above the 16777216 bytes the router takes from a worker$`,
      ),
    );
    expect(big.answered()).toBe(1);
    expect(logs.some((l) => l.includes('"status":502'))).toBe(true);
    expect((await fetch(`${r.url}/health`)).status).toBe(200);
  }, 60_000);
});

describe('a worker that cannot read the files', () => {
  it.skipIf(!isRoot)('a worker running as nobody answers every request: the first is retried inline (counted), later ones go inline at once', async () => {
    const worker = await startWorker('tokenspeed', ['--user', 'nobody']);
    const { r, logs } = await router(worker, { multimodal_tensor_transport: 'shm' });
    const replies = [];
    for (let i = 0; i < 3; i++) replies.push(await post(r.url, withImages([png()])));
    expect(replies.map((x) => x.status)).toEqual([200, 200, 200]);
    for (const x of replies) expect(x.body.choices[0].message.content).toMatch(/encoder_input \[[\d,]+\] bfloat16 via inline/);
    const metrics = await (await fetch(`${r.url}/metrics`)).text();
    expect(metrics).toContain('smg_mm_shm_read_fallbacks_total{runtime="tokenspeed"} 1');
    const state = r.context.registry.get(worker)!;
    // A bfloat16 encoder input is attached read-write by TokenSpeed's scheduler, which says it as Python does.
    expect(state.shmLane?.error).toMatch(/\[Errno 13\] Permission denied/);
    const last = r.context.events
      .recent()
      .filter((e) => e.tensor === 'encoder_input')
      .at(-1)!;
    expect(last).toMatchObject({ path: 'inline', reason: 'shm_worker_read_failed' });
    expect(last.attempt, 'the third request goes inline at once, not as a retry').toBeUndefined();
    expect(last.detail).toMatch(/\[Errno 13\] Permission denied/);
    expect(logs.filter((l) => l.includes('"shm_read_failed"'))).toHaveLength(1);
  });
});

describe('two routers sharing /dev/shm from separate pid namespaces', () => {
  it.skipIf(!isRoot)("neither removes the other's files in flight; both serve SHM traffic with no failure", async () => {
    const worker = await startWorker('tokenspeed', ['--delay-ms', '1500']);
    // unshare ignores SIGTERM while it waits; killed, it passes SIGTERM on to the router.
    const ns = ['unshare', '--pid', '--fork', '--kill-child=SIGTERM', '--mount-proc'];
    const startIn = async () => {
      const p = await startMmtc(
        ['router', '--port', '0', '--worker-urls', worker, '--multimodal-tensor-transport', 'shm', '--multimodal-shm-min-bytes', '0'],
        /^\s+transport /,
        {},
        ns,
      );
      stops.push(() => p.stop('SIGKILL'));
      return /listening on (http:\/\/\S+)/.exec(p.output())![1]!;
    };
    const a = await startIn();
    const inFlight = post(a, withImages([png()]));
    for (let i = 0; i < 100 && ourFiles(1).length === 0; i++) await new Promise((res) => setTimeout(res, 20));
    const filesOfA = ourFiles(1); // pid 1 in its namespace
    expect(filesOfA.length).toBeGreaterThan(0);
    const b = await startIn(); // its start-up sweep runs now, and it is pid 1 too
    expect(readdirSync('/dev/shm').filter((f) => filesOfA.includes(f))).toEqual(filesOfA);
    const [ra, rb] = await Promise.all([inFlight, post(b, withImages([png()]))]);
    expect([ra.status, rb.status]).toEqual([200, 200]);
    expect(ra.body.choices[0].message.content).toContain('via shm');
    expect(rb.body.choices[0].message.content).toContain('via shm');
    expect(ourFiles(1)).toEqual([]);
  });
});
