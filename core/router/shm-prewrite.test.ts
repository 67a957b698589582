// Tensors written to /dev/shm while the image is preprocessed (docs/transport.md, "Writing a
// tensor"), through the real router and real `mmtc worker` processes: the worker reads the
// router's exact bytes from a file the pool threads wrote, placement writes nothing more, the
// file counts against the budget while it exists, and nothing of ours stays in /dev/shm
// whatever the outcome.
import { asQwenConfig } from '../multimodal/families/index.ts';
import { readFileSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { decodeToRgb } from '../multimodal/decode.ts';
import { loadModelDirectory } from '../multimodal/model-dir.ts';
import { preprocessRgb } from '../multimodal/qwen-vl.ts';
import { ourTensorFiles, useRouterRig } from '../test/router-rig.ts';
import { makeTestImages } from '../test/images.ts';
import { encodeFloat32As } from '../transport/dtype.ts';
import { fnv1a64Hex } from '../util/fnv.ts';
import type { RunningRouter } from './server.ts';

const images = makeTestImages();
const model = await loadModelDirectory();
const { startWorker, router } = useRouterRig();
const ourFiles = ourTensorFiles;
afterAll(() => images.remove());

const dataUrl = (name: string, mime: string) => `data:${mime};base64,${images.bytes(name).toString('base64')}`;
const chat = (names: string[]) => ({
  model: 'qwen2-vl-mini',
  messages: [
    {
      role: 'user',
      content: [
        ...names.map((n) => ({ type: 'image_url', image_url: { url: dataUrl(n, n.endsWith('.png') ? 'image/png' : 'image/jpeg') } })),
        { type: 'text', text: 'What is it?' },
      ],
    },
  ],
});
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a JSON reply, read field by field as each test asserts it
const json = async (res: Response): Promise<any> => res.json();
const post = (r: RunningRouter, body: unknown, signal?: AbortSignal) =>
  fetch(`${r.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    ...(signal ? { signal } : {}),
  });

async function fingerprint(name: string, dtype: 'float32' | 'bfloat16'): Promise<string> {
  const img = await decodeToRgb(images.bytes(name));
  return fnv1a64Hex(encodeFloat32As(dtype, preprocessRgb(img.rgb, img.width, img.height, asQwenConfig(model.imageConfig)).pixelValues!));
}

describe('encoder input written while it is computed', () => {
  it.each([
    ['vllm', 'auto', ['photo.jpg'], 'float32'],
    ['tokenspeed', 'auto', ['photo.jpg', 'rgb.png'], 'bfloat16'],
    ['tokenspeed', 'shm', ['photo.jpg'], 'bfloat16'],
  ] as const)('%s, %s, %j: the worker reads the exact bytes from the file the pool wrote; placement writes nothing', async (runtime, mode, names, dtype) => {
    const worker = await startWorker(runtime, mode === 'shm' ? ['--shm-namespace-id', ''] : []);
    const r = await router(worker, mode);
    const reserve = vi.spyOn(r.context.writer, 'reserve');
    const write = vi.spyOn(r.context.writer, 'write');
    const res = await post(r, chat([...names]));
    expect(res.status).toBe(200);
    const content = (await json(res)).choices[0].message.content as string;
    expect(reserve).toHaveBeenCalledTimes(names.length);
    expect(write).not.toHaveBeenCalled(); // the side tensors are below the threshold and go inline
    const tensor = runtime === 'vllm' ? 'pixel_values' : 'encoder_input';
    for (const [i, name] of names.entries()) {
      const suffix = runtime === 'tokenspeed' && names.length > 1 ? `[${i}]` : '';
      expect(content).toContain(
        `${tensor}${suffix} [616,1176] ${dtype} via shm, ${616 * 1176 * (dtype === 'float32' ? 4 : 2)} bytes, fnv1a ${await fingerprint(name, dtype)}`,
      );
    }
    const events = r.context.events.recent().filter((e) => e.tensor.startsWith(tensor));
    expect(events.map((e) => e.path)).toEqual(names.map(() => 'shm'));
    expect(events.every((e) => e.writeMicros > 0)).toBe(true);
    expect(r.context.writer.outstanding).toBe(0);
    expect(ourFiles()).toEqual([]);
  });

  it('a reserved name that someone else created meanwhile is neither written nor removed; the tensor is placed under a new name', async () => {
    const r = await router(await startWorker('vllm'), 'auto');
    const writer = r.context.writer;
    const first = writer.nextName();
    const planted = `/dev/shm/${first}`;
    writeFileSync(planted, 'not ours', { flag: 'wx' });
    try {
      const nextName = vi.spyOn(writer, 'nextName').mockReturnValueOnce(first);
      const res = await post(r, chat(['photo.jpg']));
      expect(res.status).toBe(200);
      expect((await json(res)).choices[0].message.content).toContain(
        `pixel_values [616,1176] float32 via shm, ${616 * 1176 * 4} bytes, fnv1a ${await fingerprint('photo.jpg', 'float32')}`,
      );
      expect(nextName).toHaveBeenCalledTimes(2); // the reserved name, then placement's own
      expect(readFileSync(planted, 'utf8')).toBe('not ours');
      expect(writer.outstanding).toBe(0);
    } finally {
      unlinkSync(planted);
    }
  });

  it('vLLM with two images concatenates them into one tensor, written at placement as before', async () => {
    const r = await router(await startWorker('vllm'), 'auto');
    const reserve = vi.spyOn(r.context.writer, 'reserve');
    const res = await post(r, chat(['photo.jpg', 'rgb.png']));
    expect(res.status).toBe(200);
    expect((await json(res)).choices[0].message.content).toContain('pixel_values [1232,1176] float32 via shm, 5795328 bytes');
    expect(reserve).not.toHaveBeenCalled();
  });

  it('the file exists, whole, while the worker holds the request, and counts against the budget; a worker that keeps it does not leave it behind', async () => {
    const worker = await startWorker('tokenspeed', ['--delay-ms', '600'], { TOKENSPEED_UNLINK_MM_SHM_AFTER_READ: '0' });
    const r = await router(worker, 'auto');
    const pending = post(r, chat(['photo.jpg']));
    for (let i = 0; i < 200 && ourFiles().length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(ourFiles()).toHaveLength(1); // created (empty) when the request reserved it
    const file = `/dev/shm/${ourFiles()[0]}`;
    // Written once preprocessing is done (the pool thread may be starting), while the worker holds the request (600 ms).
    for (let i = 0; i < 1000 && statSync(file).size < 616 * 1176 * 2; i++) await new Promise((resolve) => setTimeout(resolve, 5));
    expect(statSync(file).size).toBe(616 * 1176 * 2);
    // Counted by the request. A TokenSpeed worker attaches its bfloat16 encoder input read-write,
    // so the file stays the request's alone: the pixel cache keeps a file of its own (written
    // from memory, counted by the cache), never a second name for this one.
    expect(r.context.writer.outstanding).toBe(616 * 1176 * 2);
    expect(statSync(file).nlink).toBe(1);
    expect((await pending).status).toBe(200);
    expect(ourFiles()).toEqual([]);
    expect(r.context.writer.outstanding).toBe(0);
  });

  it('a client that goes away while the worker holds the request leaves no file', async () => {
    const r = await router(await startWorker('tokenspeed', ['--delay-ms', '1500']), 'auto');
    const abort = new AbortController();
    const pending = post(r, chat(['photo.jpg']), abort.signal).catch((err: Error) => err);
    for (let i = 0; i < 200 && ourFiles().length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(ourFiles()).toHaveLength(1);
    await new Promise((resolve) => setTimeout(resolve, 200));
    abort.abort();
    expect(await pending).toBeInstanceOf(Error);
    for (let i = 0; i < 100 && ourFiles().length > 0; i++) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(ourFiles()).toEqual([]);
    expect(r.context.writer.outstanding).toBe(0);
  });

  it('no file is reserved when the tensor would not fit the budget: it goes inline, shm_budget_exceeded', async () => {
    const r = await router(await startWorker('tokenspeed'), 'auto', { multimodal_shm_max_outstanding_bytes: 1_000_000 });
    const reserve = vi.spyOn(r.context.writer, 'reserve');
    const res = await post(r, chat(['photo.jpg']));
    expect(res.status).toBe(200);
    expect((await json(res)).choices[0].message.content).toContain('encoder_input [616,1176] bfloat16 via inline');
    expect(reserve).toHaveReturnedWith(undefined);
    expect(r.context.events.recent().find((e) => e.tensor === 'encoder_input')?.reason).toBe('shm_budget_exceeded');
  });
});
