// An SGLang worker end to end over real processes: the router sends one batched pixel_values
// (every image's rows in prompt order, float32), image_grid_thw, patches_per_image and each
// image's encoded bytes, always inline (SGLang's TensorData has no /dev/shm handle). Under shm
// and auto that is said, per tensor, as runtime_inline_only: in the traffic events, the
// decision, the metrics; no file is ever written to /dev/shm for it.
import { asQwenConfig } from '../multimodal/families/index.ts';
import { afterAll, describe, expect, it } from 'vitest';
import type { TransportMode } from '../config/schema.ts';
import { decodeToRgb } from '../multimodal/decode.ts';
import { loadModelDirectory } from '../multimodal/model-dir.ts';
import { preprocessRgb } from '../multimodal/qwen-vl.ts';
import { encodeFloat32As } from '../transport/dtype.ts';
import { fnv1a64Hex } from '../util/fnv.ts';
import { makeTestImages } from '../test/images.ts';
import { ourTensorFiles, useRouterRig } from '../test/router-rig.ts';

const images = makeTestImages();
const model = await loadModelDirectory();
const { startWorker, router } = useRouterRig();
afterAll(() => images.remove());

const IMAGES = [
  ['rgb.png', 'image/png'],
  ['photo.jpg', 'image/jpeg'],
  ['lossless.webp', 'image/webp'],
] as const;

function chat(n: number, stream: boolean) {
  const content: unknown[] = [];
  for (const [name, mime] of IMAGES.slice(0, n))
    content.push({ type: 'image_url', image_url: { url: `data:${mime};base64,${images.bytes(name).toString('base64')}` } }, { type: 'text', text: 'and' });
  content.push({ type: 'text', text: 'what differs?' });
  return { model: 'qwen2-vl-mini', stream, messages: [{ role: 'user', content }] };
}

/** What the router must send: every image's float32 rows, concatenated in prompt order. */
async function expected(n: number) {
  const parts: Float32Array[] = [];
  for (const [name] of IMAGES.slice(0, n)) {
    const img = await decodeToRgb(images.bytes(name));
    parts.push(preprocessRgb(img.rgb, img.width, img.height, asQwenConfig(model.imageConfig)).pixelValues!);
  }
  const rows = parts.reduce((s, p) => s + p.length / 1176, 0);
  const joined = new Float32Array(rows * 1176);
  let at = 0;
  for (const p of parts) {
    joined.set(p, at);
    at += p.length;
  }
  return { rows, bytes: joined.byteLength, fnv: fnv1a64Hex(encodeFloat32As('float32', joined)) };
}

async function send(url: string, body: unknown): Promise<{ status: number; content: string; usage?: { prompt_tokens: number } }> {
  const res = await fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  if (!(body as { stream: boolean }).stream) {
    const j = (await res.json()) as { choices?: Array<{ message: { content: string } }>; error?: { message: string }; usage?: { prompt_tokens: number } };
    return { status: res.status, content: j.choices?.[0]?.message.content ?? j.error?.message ?? '', ...(j.usage ? { usage: j.usage } : {}) };
  }
  let content = '';
  for (const e of (await res.text()).split('\n\n')) {
    if (!e.startsWith('data: {')) continue;
    for (const c of JSON.parse(e.slice(6)).choices) content += c.delta.content ?? '';
  }
  return { status: res.status, content };
}

describe('sglang worker', () => {
  it.each<[TransportMode, number, boolean]>([
    ['inline', 1, false],
    ['shm', 2, true],
    ['auto', 3, false],
    ['auto', 1, true],
  ])("mode %s, %i image(s), stream %s: the worker reads the router's exact bytes, inline, and says why", async (mode, n, stream) => {
    const r = await router(await startWorker('sglang'), mode);
    const reply = await send(r.url, chat(n, stream));
    expect(reply.status).toBe(200);
    const want = await expected(n);
    expect(reply.content).toMatch(new RegExp(`^${n} image${n === 1 ? '' : 's'}: `));
    expect(reply.content).toContain(`pixel_values [${want.rows},1176] float32 via inline, ${want.bytes} bytes, fnv1a ${want.fnv}`);
    expect(reply.content).toContain(`image_grid_thw [${n},3] int64 via inline, ${n * 24} bytes`);
    expect(reply.content).toContain(`patches_per_image [${n}] int64 via inline, ${n * 8} bytes`);
    const events = r.context.events.recent();
    expect(events.map((e) => e.tensor)).toEqual(['pixel_values', 'image_grid_thw', 'patches_per_image']);
    const reason = mode === 'inline' ? 'mode_inline' : 'runtime_inline_only';
    for (const e of events) expect(e).toMatchObject({ runtime: 'sglang', path: 'inline', reason });
    const metrics = await (await fetch(`${r.url}/metrics`)).text();
    expect(metrics).toContain('smg_mm_tensors_total{runtime="sglang",path="inline"} 3');
    expect(metrics).not.toContain('path="shm"} ');
    expect(ourTensorFiles()).toEqual([]);
  });

  it('the same request streamed and not gives the same text; a text-only request carries no multimodal inputs', async () => {
    const r = await router(await startWorker('sglang'), 'auto');
    const plain = await send(r.url, chat(2, false));
    const streamed = await send(r.url, chat(2, true));
    expect(streamed.content).toBe(plain.content);
    expect(plain.usage!.prompt_tokens).toBeGreaterThan(2 * 154);
    const text = await send(r.url, { model: 'qwen2-vl-mini', stream: false, messages: [{ role: 'user', content: 'hello' }] });
    expect(text.status).toBe(200);
    expect(text.content).toMatch(/^no images/);
  });

  it('discovery: the runtime is detected, its labels come from model and server info and its loads; no /dev/shm token', async () => {
    const url = await startWorker('sglang');
    const r = await router(url, 'auto');
    const w = r.context.registry.get(url)!;
    expect(w.runtime).toBe('sglang');
    expect(w.labels).toMatchObject({ server_type: 'grpc', sglang_version: 'mmtc-reference', dp_rank_count: '1' });
    expect(w.labels.shm_namespace_id).toBeUndefined();
  });
});
