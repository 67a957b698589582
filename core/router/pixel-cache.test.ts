// The pixel cache through the real router and real `mmtc worker` processes (docs/performance.md,
// "The pixel cache"): a repeated image is not computed again and reaches the worker bit for bit
// as a fresh preprocessing would give it, over SHM by a hard link to the cached file (no write)
// and inline from the cached bytes; a live change of what the tensor depends on never serves
// the old tensor; concurrent requests compute a new image once; a file changed under the cache
// is caught and the image computed again; the budget evicts; nothing is left in /dev/shm.
import { asQwenConfig } from '../multimodal/families/index.ts';
import { chmodSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { ConfigError } from '../config/errors.ts';
import { pixelCacheBudget } from '../config/pixel-cache-setting.ts';
import { decodeToRgb } from '../multimodal/decode.ts';
import { loadModelDirectory } from '../multimodal/model-dir.ts';
import { preprocessRgb } from '../multimodal/qwen-vl.ts';
import { makeTestImages } from '../test/images.ts';
import { startMmtc } from '../test/cli.ts';
import { ourCacheFiles, useRouterRig } from '../test/router-rig.ts';
import { encodeFloat32As } from '../transport/dtype.ts';
import { fnv1a64Hex } from '../util/fnv.ts';
import type { RunningRouter } from './server.ts';

const images = makeTestImages();
const model = await loadModelDirectory();
const { startWorker, router, stops } = useRouterRig();
afterAll(() => images.remove());

const cacheFiles = ourCacheFiles;
const dataUrl = (name: string) => `data:${name.endsWith('.png') ? 'image/png' : 'image/jpeg'};base64,${images.bytes(name).toString('base64')}`;
const body = (names: string[]) => ({
  model: 'qwen2-vl-mini',
  messages: [{ role: 'user', content: [...names.map((n) => ({ type: 'image_url', image_url: { url: dataUrl(n) } })), { type: 'text', text: 'What is it?' }] }],
});
async function ask(r: RunningRouter, names: string[]): Promise<{ id: string; content: string }> {
  const res = await fetch(`${r.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body(names)),
  });
  const text = await res.text();
  expect(res.status, text).toBe(200);
  const json = JSON.parse(text) as { id: string; choices: Array<{ message: { content: string } }> };
  return { id: json.id, content: json.choices[0]!.message.content };
}

async function fingerprint(name: string, dtype: 'float32' | 'bfloat16' | 'float16'): Promise<string> {
  const img = await decodeToRgb(images.bytes(name));
  return fnv1a64Hex(encodeFloat32As(dtype, preprocessRgb(img.rgb, img.width, img.height, asQwenConfig(model.imageConfig)).pixelValues!));
}
const encoderEvents = (r: RunningRouter, id: string) =>
  r.context.events.recent().filter((e) => e.requestId === id && /^(encoder_input|pixel_values)/.test(e.tensor));

describe('a repeated image', () => {
  it('over SHM (vLLM, auto): the second request is a hit: no preprocessing, no write, a hard link the worker reads bit for bit; counted once; gone at close', async () => {
    const r = await router(await startWorker('vllm'), 'auto');
    const expected = `pixel_values [616,1176] float32 via shm, ${616 * 1176 * 4} bytes, fnv1a ${await fingerprint('photo.jpg', 'float32')}`;
    const first = await ask(r, ['photo.jpg']);
    expect(first.content).toContain(expected);
    expect(encoderEvents(r, first.id).map((e) => e.cache)).toEqual(['miss']);
    // The request's file became the entry (a second name for its inode): one file, counted once.
    expect(cacheFiles()).toHaveLength(1);
    expect(r.context.pixelCache!.stats()).toMatchObject({ entries: 1, heldBytes: 616 * 1176 * 4, hits: 0, misses: 1 });
    expect(r.context.writer.outstanding).toBe(0);

    const start = vi.spyOn(r.context.pool, 'start');
    const write = vi.spyOn(r.context.writer, 'write');
    const reserve = vi.spyOn(r.context.writer, 'reserve');
    for (let turn = 0; turn < 3; turn++) {
      const again = await ask(r, ['photo.jpg']);
      expect(again.content).toContain(expected);
      const [event] = encoderEvents(r, again.id);
      expect(event).toMatchObject({ cache: 'hit', path: 'shm' });
    }
    expect(start).not.toHaveBeenCalled();
    expect(reserve).not.toHaveBeenCalled();
    expect(write).not.toHaveBeenCalled();
    expect(r.context.pixelCache!.stats()).toMatchObject({ entries: 1, hits: 3, misses: 1, tampered: 0 });
    const metrics = await r.context.metrics.text();
    expect(metrics).toMatch(/^smg_mm_pixel_cache_hits_total 3$/m);
    expect(metrics).toMatch(new RegExp(`^smg_mm_pixel_cache_bytes ${616 * 1176 * 4}$`, 'm'));
    await r.close();
    expect(cacheFiles()).toEqual([]);
  });

  it('inline (TokenSpeed): the hit is read from the cache, bfloat16 bit for bit; so is float16, converted from the cached float32', async () => {
    const worker = await startWorker('tokenspeed');
    const r = await router(worker, 'inline');
    const bf16 = `encoder_input [616,1176] bfloat16 via inline, ${616 * 1176 * 2} bytes, fnv1a ${await fingerprint('photo.jpg', 'bfloat16')}`;
    expect((await ask(r, ['photo.jpg'])).content).toContain(bf16);
    const start = vi.spyOn(r.context.pool, 'start');
    const hit = await ask(r, ['photo.jpg']);
    expect(hit.content).toContain(bf16);
    expect(encoderEvents(r, hit.id)).toMatchObject([{ cache: 'hit', path: 'inline' }]);
    expect(start).not.toHaveBeenCalled();

    const half = await router(worker, 'auto', { workers: [{ url: worker, labels: { multimodal_encoder_dtype: 'float16' } }] });
    const f16 = `encoder_input [616,1176] float16 via shm, ${616 * 1176 * 2} bytes, fnv1a ${await fingerprint('photo.jpg', 'float16')}`;
    expect((await ask(half, ['photo.jpg'])).content).toContain(f16);
    const halfHit = await ask(half, ['photo.jpg']);
    expect(halfHit.content).toContain(f16);
    expect(encoderEvents(half, halfHit.id)[0]).toMatchObject({ path: 'shm' });
    expect(half.context.pixelCache!.stats()).toMatchObject({ hits: 1, misses: 1 });
  });
  it('multimodal_pixel_cache_shm copy: the hit still skips preprocessing, and the worker gets a file of its own, bit for bit', async () => {
    const r = await router(await startWorker('vllm'), 'auto', { multimodal_pixel_cache_shm: 'copy' });
    const expected = `pixel_values [616,1176] float32 via shm, ${616 * 1176 * 4} bytes, fnv1a ${await fingerprint('photo.jpg', 'float32')}`;
    await ask(r, ['photo.jpg']);
    const start = vi.spyOn(r.context.pool, 'start');
    const hit = await ask(r, ['photo.jpg']);
    expect(hit.content).toContain(expected);
    expect(encoderEvents(r, hit.id)[0]).toMatchObject({ cache: 'hit', path: 'shm' });
    expect(encoderEvents(r, hit.id)[0]!.writeMicros).toBeGreaterThan(0);
    expect(start).not.toHaveBeenCalled();
  });
});

describe('what the tensor depends on', () => {
  it('a live change of the encoder dtype: a miss computing the new tensor, never the old one; changing back hits the first entry again', async () => {
    const worker = await startWorker('tokenspeed');
    const r = await router(worker, 'auto', { workers: [{ url: worker, labels: { multimodal_encoder_dtype: 'float32' } }] });
    const f32 = await fingerprint('photo.jpg', 'float32');
    expect((await ask(r, ['photo.jpg'])).content).toContain(`float32 via shm, ${616 * 1176 * 4} bytes, fnv1a ${f32}`);
    expect((await ask(r, ['photo.jpg'])).content).toContain(`fnv1a ${f32}`);

    const apply = (patch: Record<string, unknown>) => {
      const s = r.store.current();
      r.store.apply({ ...s.config, ...patch }, s.revision, { origin: 'test', client: 'api' });
    };
    apply({ workers: [{ url: worker, labels: { multimodal_encoder_dtype: 'bfloat16' } }] });
    await r.reconciled();
    await vi.waitFor(() => expect(r.context.registry.get(worker)!.labels.multimodal_encoder_dtype).toBe('bfloat16'), { timeout: 3000 });
    const bf = await ask(r, ['photo.jpg']);
    expect(bf.content).toContain(`bfloat16 via shm, ${616 * 1176 * 2} bytes, fnv1a ${await fingerprint('photo.jpg', 'bfloat16')}`);
    expect(encoderEvents(r, bf.id)[0]!.cache).toBe('miss');

    apply({ workers: [{ url: worker, labels: { multimodal_encoder_dtype: 'float32' } }] });
    await vi.waitFor(() => expect(r.context.registry.get(worker)!.labels.multimodal_encoder_dtype).toBe('float32'), { timeout: 3000 });
    const back = await ask(r, ['photo.jpg']);
    expect(back.content).toContain(`fnv1a ${f32}`);
    expect(encoderEvents(r, back.id)[0]!.cache).toBe('hit');
    expect(r.context.pixelCache!.stats()).toMatchObject({ entries: 2, misses: 2, hits: 2 });
  });

  it('concurrent requests for a new image compute it once; the others wait and hit', async () => {
    const r = await router(await startWorker('vllm'), 'auto');
    const start = vi.spyOn(r.context.pool, 'start');
    const expected = `fnv1a ${await fingerprint('photo.jpg', 'float32')}`;
    const replies = await Promise.all([0, 1, 2, 3].map(() => ask(r, ['photo.jpg'])));
    for (const reply of replies) expect(reply.content).toContain(expected);
    expect(start).toHaveBeenCalledTimes(1);
    expect(r.context.pixelCache!.stats()).toMatchObject({ misses: 1, hits: 3, entries: 1 });
  });
});

describe('the guard', () => {
  it('a cached file written into (as a worker given its link could): caught at the next use, dropped, computed again; the worker reads the right bytes', async () => {
    const r = await router(await startWorker('vllm'), 'auto');
    const expected = `fnv1a ${await fingerprint('photo.jpg', 'float32')}`;
    await ask(r, ['photo.jpg']);
    const [name] = cacheFiles();
    // What a worker running as root (modes do not stop it), or one that chmods first, can do to its link: the same inode.
    const file = path.join('/dev/shm', name!);
    await new Promise((r) => setTimeout(r, 20)); // a later clock tick than the store's, so the mtime moves
    chmodSync(file, 0o600);
    writeFileSync(file, Buffer.alloc(616 * 1176 * 4, 7), { flag: 'r+' });
    chmodSync(file, 0o400);
    const again = await ask(r, ['photo.jpg']);
    expect(again.content).toContain(expected);
    expect(encoderEvents(r, again.id)[0]!.cache).toBe('miss');
    expect(r.context.pixelCache!.stats()).toMatchObject({ tampered: 1, entries: 1, hits: 0, misses: 2 });
    expect(cacheFiles()).not.toContain(name);
    expect((await ask(r, ['photo.jpg'])).content).toContain(expected);
  });

  it.skipIf(process.getuid?.() !== 0)('a worker of another uid cannot read the 0400 link: attempt 2 goes inline with the cached bytes, correct', async () => {
    const r = await router(await startWorker('tokenspeed', ['--user', 'nobody']), 'shm');
    const expected = `fnv1a ${await fingerprint('photo.jpg', 'bfloat16')}`;
    expect((await ask(r, ['photo.jpg'])).content).toContain(expected);
    const hit = await ask(r, ['photo.jpg']);
    expect(hit.content).toContain(`bfloat16 via inline, ${616 * 1176 * 2} bytes, ${expected}`);
    expect(encoderEvents(r, hit.id).at(-1)).toMatchObject({ cache: 'hit', path: 'inline' });
  });
});

describe('a worker that attaches its encoder input read-write (TokenSpeed, in its model dtype)', () => {
  it("gets a file of the request's own, miss and hit: a write through its shared map (mtime kept) never reaches the cached entry or the next hit", async () => {
    const r = await router(await startWorker('tokenspeed', ['--tamper-shm', 'map']), 'shm');
    const img = await decodeToRgb(images.bytes('photo.jpg'));
    const original = encodeFloat32As('bfloat16', preprocessRgb(img.rgb, img.width, img.height, asQwenConfig(model.imageConfig)).pixelValues!);
    const changed = Uint8Array.from(original);
    changed[0] = changed[0]! ^ 0xff;
    const said = `encoder_input [616,1176] bfloat16 via shm, ${original.byteLength} bytes, fnv1a ${fnv1a64Hex(changed)}`;
    const first = await ask(r, ['photo.jpg']);
    expect(first.content).toContain(said);
    expect(encoderEvents(r, first.id)).toMatchObject([{ cache: 'miss', path: 'shm' }]);
    for (let turn = 0; turn < 2; turn++) {
      // Each hit's file starts from the cached bytes: the worker changes its own copy, and says so.
      const hit = await ask(r, ['photo.jpg']);
      expect(hit.content).toContain(said);
      expect(encoderEvents(r, hit.id)).toMatchObject([{ cache: 'hit', path: 'shm' }]);
    }
    const [entry] = cacheFiles();
    expect(fnv1a64Hex(readFileSync(path.join('/dev/shm', entry!)))).toBe(fnv1a64Hex(original));
    expect(r.context.pixelCache!.stats()).toMatchObject({ entries: 1, hits: 2, misses: 1, tampered: 0 });
  });

  it.skipIf(process.getuid?.() !== 0)(
    "a non-root TokenSpeed worker of the router's own uid: a repeated image still goes by SHM, cache at its default",
    async () => {
      // Router and worker both with nobody's effective uid and gid, the only capability kept
      // CAP_DAC_READ_SEARCH: they load the code from a checkout nobody could enter (root's home is
      // 0700), and every file they create, open or write is checked as nobody's (the real uid stays
      // root so that access(2), which checks as the real uid without capabilities, can see it).
      const asNobody = ['setpriv', '--euid=65534', '--egid=65534', '--clear-groups', '--inh-caps=+dac_read_search', '--ambient-caps=+dac_read_search', '--'];
      const worker = await startMmtc(['worker', '--runtime', 'tokenspeed', '--port', '0'], /listening on grpc:\/\//, {}, asNobody);
      stops.push(() => worker.stop());
      const url = worker.line.match(/grpc:\/\/\S+/)![0];
      const routerProc = await startMmtc(
        ['router', '--port', '0', '--worker-urls', url, '--multimodal-tensor-transport', 'shm'],
        /^\s+transport /m,
        {},
        asNobody,
      );
      stops.push(() => routerProc.stop());
      const base = /listening on (http:\/\/\S+)/.exec(routerProc.output())![1]!;
      const expected = `bfloat16 via shm, ${616 * 1176 * 2} bytes, fnv1a ${await fingerprint('photo.jpg', 'bfloat16')}`;
      for (let turn = 0; turn < 3; turn++) {
        const res = await fetch(`${base}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(body(['photo.jpg'])),
        });
        const text = await res.text();
        expect(res.status, text).toBe(200);
        expect((JSON.parse(text) as { choices: Array<{ message: { content: string } }> }).choices[0]!.message.content, routerProc.output()).toContain(expected);
      }
      // Each request's log line follows its answer.
      const logged = () =>
        routerProc
          .output()
          .split('\n')
          .filter((l) => l.includes('"event":"request"'));
      for (let i = 0; i < 100 && logged().length < 3; i++) await new Promise((res) => setTimeout(res, 20));
      const lines = logged();
      expect(lines).toHaveLength(3);
      expect(lines.filter((l) => l.includes('shm_read_failed'))).toEqual([]);
      const metrics = await (await fetch(`${base}/metrics`)).text();
      expect(metrics).toMatch(/^smg_mm_pixel_cache_hits_total 2$/m);
      await routerProc.stop();
      expect(readdirSync('/dev/shm').filter((f) => new RegExp(`^smg-tokenspeed-(cache-\\d+-)?${routerProc.pid}-`).test(f))).toEqual([]);
    },
  );
});

describe('the budget', () => {
  it('holds: an entry past it evicts the least recently used; shrinking live evicts at once; 0 turns the cache off and removes its files', async () => {
    const r = await router(await startWorker('vllm'), 'auto', { multimodal_pixel_cache_mb: 6 });
    // photo.jpg and rgb.png (the same pixels, other bytes: other keys) are 2.76 MiB each as float32: both fit 6 MiB.
    await ask(r, ['photo.jpg']);
    await ask(r, ['rgb.png']);
    const stats = r.context.pixelCache!.stats();
    expect(stats.entries).toBe(2);
    expect(stats.heldBytes).toBe(2 * 616 * 1176 * 4);
    // photo.jpg used last: a third image evicts rgb.png, the least recently used.
    await ask(r, ['photo.jpg']);
    await ask(r, ['photo444.jpg']);
    expect(r.context.pixelCache!.stats()).toMatchObject({ entries: 2, evictions: 1, hits: 1 });
    const rgb = await ask(r, ['rgb.png']);
    expect(encoderEvents(r, rgb.id)[0]!.cache).toBe('miss');
    expect(r.context.pixelCache!.stats()).toMatchObject({ entries: 2, evictions: 2, hits: 1 });
    const apply = (mb: number) => {
      const s = r.store.current();
      r.store.apply({ ...s.config, multimodal_pixel_cache_mb: mb }, s.revision, { origin: 'test', client: 'api' });
    };
    apply(3);
    expect(r.context.pixelCache!.stats()).toMatchObject({ entries: 1, evictions: 3 });
    expect(cacheFiles()).toHaveLength(1);
    apply(0);
    expect(r.context.pixelCache!.stats()).toMatchObject({ entries: 0, heldBytes: 0, budgetBytes: 0 });
    expect(cacheFiles()).toEqual([]);
    const off = await ask(r, ['photo.jpg']);
    expect(encoderEvents(r, off.id)[0]!.cache).toBeUndefined();
  });

  it('shares the /dev/shm budget, counted once, and yields to requests: a tensor that needs the room evicts entries instead of going inline', async () => {
    const oneImage = 616 * 1176 * 4;
    const r = await router(await startWorker('vllm'), 'auto', { multimodal_shm_max_outstanding_bytes: oneImage + 1024 * 1024 });
    await ask(r, ['photo.jpg']);
    expect(r.context.pixelCache!.stats().heldBytes).toBe(oneImage);
    const other = await ask(r, ['rgb.png']);
    expect(encoderEvents(r, other.id)[0]).toMatchObject({ path: 'shm', cache: 'miss' });
    expect(r.context.pixelCache!.stats().evictions).toBe(1);
  });
});

describe('the setting', () => {
  it('YAML or flag over SMG_MM_PIXEL_CACHE_MB over the default; a malformed variable is an error naming it and its value', () => {
    expect(pixelCacheBudget({}, {})).toEqual({ mb: 512, bytes: 512 * 1024 * 1024, source: 'default' });
    expect(pixelCacheBudget({}, { SMG_MM_PIXEL_CACHE_MB: '64' })).toMatchObject({ mb: 64, source: 'SMG_MM_PIXEL_CACHE_MB' });
    expect(pixelCacheBudget({ multimodal_pixel_cache_mb: 0 }, { SMG_MM_PIXEL_CACHE_MB: '64' })).toMatchObject({ mb: 0, source: 'multimodal_pixel_cache_mb' });
    expect(() => pixelCacheBudget({}, { SMG_MM_PIXEL_CACHE_MB: 'lots' })).toThrow(ConfigError);
    expect(() => pixelCacheBudget({}, { SMG_MM_PIXEL_CACHE_MB: '-1' })).toThrow(
      "invalid value '-1' for SMG_MM_PIXEL_CACHE_MB: expected a whole number of MiB from 0 (off) to 1048576",
    );
  });
});
