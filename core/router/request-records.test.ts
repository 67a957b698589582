// The record each chat request leaves for the console's Requests screen (core/telemetry/requests.ts),
// through the real router and reference workers (`mmtc worker`, separate processes): its
// status and error in the words the client saw, every worker call (leg) with its worker,
// timing and error, the request's phases, its tensors (the same events Traffic shows) and
// its pixel-cache hits.
import { readdirSync } from 'node:fs';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { readTransportEnvironment } from '../config/env.ts';
import { requestFailed, type RequestSummary } from '../telemetry/requests.ts';
import { startMmtc } from '../test/cli.ts';
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
afterAll(() => images.remove());

interface Worker {
  url: string;
  bootstrapPort: number | undefined;
}

async function worker(role: 'encode' | 'prefill' | 'decode' | 'regular', extra: string[] = []): Promise<Worker> {
  const served = role === 'encode' || role === 'prefill';
  const w = await startMmtc(
    [
      'worker',
      '--runtime',
      'tokenspeed',
      '--port',
      '0',
      ...(role === 'regular' ? [] : ['--role', role]),
      ...(served ? ['--bootstrap-port', '0'] : []),
      ...extra,
    ],
    served ? /bootstrap server on http:\/\// : /listening on grpc:\/\//,
  );
  stops.push(() => w.stop());
  const out = w.output();
  return {
    url: /listening on (grpc:\/\/\S+)/.exec(out)![1]!,
    bootstrapPort: served ? Number(/bootstrap server on http:\/\/\S+:(\d+)/.exec(out)![1]) : undefined,
  };
}

const spec = (w: Worker, worker_type: 'encode' | 'prefill' | 'decode') => ({
  url: w.url,
  worker_type,
  ...(w.bootstrapPort ? { bootstrap_port: w.bootstrapPort } : {}),
});

async function start(config: Record<string, unknown>): Promise<RunningRouter> {
  const router = createRouter({ port: 0, health_check_interval_secs: 0.2, multimodal_tensor_transport: 'auto', ...config }, { environment });
  const running = await router.start({ log: () => {} });
  stops.push(() => running.close());
  return running;
}

const imageUrl = (name: string) => ({ type: 'image_url', image_url: { url: `data:image/png;base64,${images.bytes(name).toString('base64')}` } });

/** A chat request; what the client got (status, id, the error's message) and the record the router kept of it. */
async function chat(
  r: RunningRouter,
  names: string[],
  stream = false,
): Promise<{ status: number; id: string; error: string | undefined; record: RequestSummary }> {
  const body = { stream, max_tokens: 64, messages: [{ role: 'user', content: [...names.map(imageUrl), { type: 'text', text: 'describe' }] }] };
  const res = await fetch(`${r.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const text = await res.text();
  let id = '';
  let error: string | undefined;
  if (stream && res.status === 200) {
    for (const line of text.split('\n')) {
      if (!line.startsWith('data: {')) continue;
      const chunk = JSON.parse(line.slice(6)) as { id?: string; error?: { message: string } };
      id = chunk.id ?? id;
      error = chunk.error?.message ?? error;
    }
  } else {
    const json = JSON.parse(text) as { id?: string; error?: { message: string } };
    id = json.id ?? '';
    error = json.error?.message;
  }
  // A failed request's body carries no id: it is the newest record.
  const record = id ? r.context.requests!.get(id)! : newest(r);
  return { status: res.status, id: record.id, error, record };
}

function newest(r: RunningRouter): RequestSummary {
  return r.context.requests!.query({}, 1).requests[0]!;
}

describe('a regular request', () => {
  it('is kept with its model, duration, phases in order, one regular leg on its worker (sent, first token, end) and its tensors as Traffic saw them; the same image again is a cache hit', async () => {
    const w = await worker('regular');
    const r = await start({ workers: [{ url: w.url }] });
    const first = await chat(r, ['photo.jpg']);
    expect(first.status).toBe(200);
    const rec = first.record;
    expect(rec.status).toBe(200);
    expect(requestFailed(rec)).toBe(false);
    expect(rec.model).toBe(r.context.modelName);
    expect(rec.source).toBe('api');
    expect(rec.phases!.map((p) => p.name)).toEqual(['body', 'fetch', 'preprocess', 'prompt', 'place', 'worker']);
    for (const [a, b] of rec.phases!.slice(0, -1).map((p, i) => [p, rec.phases![i + 1]!] as const)) expect(b.startMs).toBeCloseTo(a.startMs + a.durationMs, 6);
    expect(rec.legs).toHaveLength(1);
    const leg = rec.legs![0]!;
    expect(leg).toMatchObject({ leg: 'regular', worker: w.url });
    expect(leg.error).toBeUndefined();
    expect(leg.placeMs!).toBeGreaterThanOrEqual(0);
    expect(leg.firstTokenMs!).toBeGreaterThanOrEqual(leg.placeMs!);
    expect(leg.durationMs).toBeGreaterThanOrEqual(leg.firstTokenMs!);
    expect(leg.startMs + leg.durationMs).toBeLessThanOrEqual(rec.durationMs!);
    // The tensors are the very events Traffic lists for this request.
    const traffic = r.context.events.recent().filter((e) => e.requestId === first.id);
    expect(rec.tensors!.map((t) => t.tensor)).toEqual(traffic.map((e) => e.tensor));
    expect(rec.tensors!.length).toBeGreaterThan(0);
    expect(rec.paths!.inline + rec.paths!.shm).toBe(rec.tensors!.length);
    expect(rec.cacheHits).toBe(0);

    const again = await chat(r, ['photo.jpg'], true);
    expect(again.status).toBe(200);
    expect(again.record.cacheHits).toBe(1);
    expect(again.record.legs![0]!.firstTokenMs).toBeDefined();
  }, 30_000);

  it("a worker slower than request_timeout_secs: the record is failed (504) with the client's error, on its leg too, the leg's duration up to the deadline", async () => {
    const w = await worker('regular', ['--delay-ms', '4000']);
    const r = await start({ workers: [{ url: w.url }], request_timeout_secs: 1 });
    const reply = await chat(r, ['photo.jpg']);
    expect(reply.status).toBe(504);
    expect(reply.error).toMatch(/./);
    const rec = reply.record;
    expect(rec.status).toBe(504);
    expect(requestFailed(rec)).toBe(true);
    expect(rec.error).toBe(reply.error);
    expect(rec.errorCode).toBeDefined();
    expect(rec.legs).toHaveLength(1);
    expect(rec.legs![0]).toMatchObject({ leg: 'regular', worker: w.url, error: reply.error });
    expect(rec.legs![0]!.durationMs).toBeGreaterThanOrEqual(900);
    expect(rec.legs![0]!.firstTokenMs).toBeUndefined();
  }, 30_000);

  it('a request refused before any worker (bad image) is kept as failed with its error and no leg', async () => {
    const w = await worker('regular');
    const r = await start({ workers: [{ url: w.url }] });
    const body = { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } }] }] };
    const res = await fetch(`${r.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const json = (await res.json()) as { error: { message: string } };
    expect(res.status).toBe(400);
    const rec = newest(r);
    expect(rec).toMatchObject({ status: 400, error: json.error.message, legs: [] });
  }, 30_000);

  it('records off (the bench baseline): nothing is kept', async () => {
    const w = await worker('regular');
    const r = await start({ workers: [{ url: w.url }] });
    r.context.recordRequests = false;
    const body = { messages: [{ role: 'user', content: 'hello' }] };
    const res = await fetch(`${r.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const { id } = (await res.json()) as { id: string };
    expect(res.status).toBe(200);
    expect(r.context.requests!.get(id)).toBeUndefined();
  }, 30_000);
});

describe('an EPD request', () => {
  it('has every leg: an encode per image on its encode worker, the prefill, the decode (with its first token), in the order they began', async () => {
    const a = await worker('encode');
    const b = await worker('encode');
    const prefill = await worker('prefill');
    const decode = await worker('decode');
    const r = await start({
      disaggregation: 'epd',
      encode_policy: 'round_robin',
      workers: [spec(a, 'encode'), spec(b, 'encode'), spec(prefill, 'prefill'), spec(decode, 'decode')],
    });
    const reply = await chat(r, ['rgb.png', 'photo.jpg']);
    expect(reply.status).toBe(200);
    const legs = reply.record.legs!;
    expect(legs.map((l) => [l.leg, l.image])).toEqual([
      ['encode', 0],
      ['encode', 1],
      ['prefill', undefined],
      ['decode', undefined],
    ]);
    expect(new Set(legs.slice(0, 2).map((l) => l.worker))).toEqual(new Set([a.url, b.url]));
    expect(legs[2]!.worker).toBe(prefill.url);
    expect(legs[3]!.worker).toBe(decode.url);
    for (const l of legs) {
      expect(l.error).toBeUndefined();
      expect(l.stopped).toBeUndefined();
      expect(l.durationMs).toBeGreaterThan(0);
    }
    expect(legs[3]!.firstTokenMs).toBeGreaterThan(0);
    // Each encode leg's tensor is in the record, by leg and worker.
    const encodes = reply.record.tensors!.filter((t) => t.leg === 'encode');
    expect(new Set(encodes.map((t) => t.worker))).toEqual(new Set(legs.slice(0, 2).map((l) => l.worker)));
  }, 45_000);

  it('an encode worker that does not accept: the request is failed, the encode leg carries the error the client saw, the legs it ended say they were stopped', async () => {
    const refusing = await worker('encode', ['--encode-accept', 'false']);
    const prefill = await worker('prefill', ['--embedding-timeout-ms', '1000']);
    const decode = await worker('decode');
    const r = await start({ disaggregation: 'epd', workers: [spec(refusing, 'encode'), spec(prefill, 'prefill'), spec(decode, 'decode')] });
    const reply = await chat(r, ['photo.jpg']);
    expect(reply.status).toBe(502);
    const rec = reply.record;
    expect(requestFailed(rec)).toBe(true);
    expect(rec.error).toBe(`encode worker ${refusing.url} (image 0) did not accept the image (EncodeResponse.accepted is false)`);
    const encode = rec.legs!.find((l) => l.leg === 'encode')!;
    expect(encode).toMatchObject({ worker: refusing.url, image: 0, error: rec.error });
    for (const l of rec.legs!.filter((l) => l.leg !== 'encode')) {
      expect(l.error).toBeUndefined();
      expect(l.stopped).toBe('another leg of the request failed');
    }
  }, 45_000);
});
