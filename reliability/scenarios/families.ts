// The largest families under load: 32 clients sending one or two 1080p and 4K images through a
// real `mmtc router` loaded from a Phi-3-vision and then a Llama 4 model directory (the short
// mode: Llama 4 alone) (17 crops of
// 336 pixels an image: 23 MB of float32, 16 crops for Llama 4's 1080p and 4K), to a TokenSpeed
// and a vLLM reference worker in `auto`. Every request must come back 200 with the worker
// having judged its images as the family's model would (their tokens, tensors and layouts:
// core/refworker), no file of ours left in /dev/shm, and the router's RSS within the bound the
// load scenarios hold: warm idle + clients × what a request holds in flight +
// preprocess_memory_bytes (1 GiB) + what malloc may keep (1 GiB).
import { mkdtempSync } from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import { makeFamilyModel, type TestFamilyModel } from '../../core/test/family-models.ts';
import { chatBody } from '../lib/chat.ts';
import { request } from '../lib/http.ts';
import { parseWorkerReport } from '../lib/images.ts';
import { sleep, startRouter, startWorker } from '../lib/procs.ts';
import type { Rng } from '../lib/rng.ts';
import { ourFiles } from '../lib/shm.ts';
import { bytesText, fmt, MiB, type Suite, type T } from '../lib/suite.ts';
import { tempDir } from '../lib/tmp.ts';

const PREPROCESS_BUDGET = 1024 * MiB;
const MALLOC_KEEP = 1024 * MiB;
const FAMILIES: ReadonlyArray<{ kind: TestFamilyModel; label: string }> = [
  { kind: 'phi3_v', label: 'Phi-3-vision' },
  { kind: 'llama4', label: 'Llama 4' },
];

/** A 1080p and a 4K JPEG of smooth gradients and noise (sharp: no Python). */
async function largeImages(): Promise<Array<{ name: string; dataUrl: string; bytes: number }>> {
  const out: Array<{ name: string; dataUrl: string; bytes: number }> = [];
  for (const [name, width, height] of [
    ['1080p', 1920, 1080],
    ['4K', 3840, 2160],
  ] as const) {
    const raw = Buffer.alloc(width * height * 3);
    for (let y = 0; y < height; y++)
      for (let x = 0; x < width; x++) {
        const i = (y * width + x) * 3;
        const n = (Math.imul((x * 73856093) ^ (y * 19349663), 7919) >>> 24) & 31;
        raw[i] = ((x * 255) / width + n) & 255;
        raw[i + 1] = ((y * 255) / height + n) & 255;
        raw[i + 2] = ((x + y) * 97 + n) & 255;
      }
    const bytes = await sharp(raw, { raw: { width, height, channels: 3 } })
      .jpeg({ quality: 85 })
      .toBuffer();
    out.push({ name, dataUrl: `data:image/jpeg;base64,${bytes.toString('base64')}`, bytes: bytes.byteLength });
  }
  return out;
}

interface FamilyLoad {
  requests: number;
  failed: number;
  images: number;
  problems: string[];
  /** What the requests in flight held at most, summed over the clients: their bodies three times and their inline tensors. */
  heldPerRequest: number;
}

/** `clients` loops of one or two images until `seconds` are over; each reply must be 200 with the worker's report of every image. */
async function drive(base: string, images: Awaited<ReturnType<typeof largeImages>>, rng: Rng, clients: number, seconds: number): Promise<FamilyLoad> {
  const load: FamilyLoad = { requests: 0, failed: 0, images: 0, problems: [], heldPerRequest: 0 };
  const end = performance.now() + seconds * 1000;
  await Promise.all(
    Array.from({ length: clients }, async (_, c) => {
      const r = rng.fork(c);
      await sleep(r.int(0, 500));
      while (performance.now() < end) {
        const sent = Array.from({ length: r.pick([1, 2]) }, () => r.pick(images));
        const body = chatBody(sent, { stream: r.chance(0.5) });
        const reply = await request(base, body, { timeoutMs: 300_000 });
        load.requests += 1;
        load.images += sent.length;
        const report = reply.status === 200 && reply.content !== undefined ? parseWorkerReport(reply.content) : undefined;
        const problem =
          reply.status !== 200
            ? `HTTP ${reply.status || reply.neterr}: ${reply.body.slice(0, 300)}`
            : !report
              ? `no worker report: ${String(reply.content).slice(0, 200)}`
              : report.images !== sent.length
                ? `the worker saw ${report.images} images, ${sent.length} were sent`
                : undefined;
        if (problem) {
          load.failed += 1;
          if (load.problems.length < 10) load.problems.push(problem);
          continue;
        }
        const inline = report!.tensors.filter((t) => t.path === 'inline').reduce((a, t) => a + t.nbytes, 0);
        load.heldPerRequest = Math.max(load.heldPerRequest, 3 * body.byteLength + inline);
      }
    }),
  );
  return load;
}

async function familyUnderLoad(
  t: T,
  kind: TestFamilyModel,
  label: string,
  images: Awaited<ReturnType<typeof largeImages>>,
  clients: number,
  seconds: number,
  stream: number,
) {
  const dir = makeFamilyModel(path.join(mkdtempSync(path.join(tempDir('families'), 'model-')), kind), kind);
  const [ts, vllm] = await Promise.all([
    startWorker('tokenspeed', ['--model-path', dir], { name: `${label}` }),
    startWorker('vllm', ['--model-path', dir], { name: `${label}` }),
  ]);
  const router = await startRouter(
    ['--model-path', dir, '--worker-urls', ts.url, vllm.url, '--multimodal-tensor-transport', 'auto', '--request-timeout-secs', '300'],
    {
      name: `router (${label})`,
    },
  );
  let peak = 0;
  const sampler = setInterval(() => (peak = Math.max(peak, router.proc.rss() ?? 0)), 200);
  try {
    // Warm-up (threads, pooled memories), then the warm idle the bound starts from.
    for (const im of images) await request(router.url, chatBody([im]), { timeoutMs: 120_000 });
    await sleep(3000);
    const warmIdle = router.proc.rss()!;
    peak = 0;
    const load = await drive(router.url, images, t.rng.fork(stream), clients, seconds);
    clearInterval(sampler);
    await sleep(2000);
    const files = ourFiles('/dev/shm');
    const bound = warmIdle + clients * load.heldPerRequest + PREPROCESS_BUDGET + MALLOC_KEEP;
    t.check(load.requests > 0, `${label}: no request completed`);
    t.check(load.failed === 0, `${label}: ${load.failed} of ${load.requests} requests failed: ${load.problems.slice(0, 3).join(' | ')}`);
    t.check(files.length === 0, `${label}: ${files.length} files of ours left in /dev/shm: ${files.slice(0, 3).map((f) => f.name)}`);
    t.check(
      peak <= bound,
      `${label}: router peak RSS ${bytesText(peak)} above its bound ${bytesText(bound)} (warm idle ${bytesText(warmIdle)} + ${clients} × ${fmt(load.heldPerRequest / MiB)} MiB a request in flight + preprocess_memory_bytes 1024 MiB + what malloc may keep, 1024 MiB)`,
    );
    t.note(kind, {
      requests: load.requests,
      images: load.images,
      failed: load.failed,
      rss_mib: { warm_idle: Math.round(warmIdle / MiB), peak: Math.round(peak / MiB), bound: Math.round(bound / MiB) },
      held_per_request_mib: Math.round((load.heldPerRequest / MiB) * 10) / 10,
    });
    return `${label} ${load.requests} requests (${load.images} images), RSS ${bytesText(warmIdle)} → peak ${bytesText(peak)} (bound ${bytesText(bound)})`;
  } finally {
    clearInterval(sampler);
    await Promise.all([router.proc.stop(), ts.proc.stop(), vllm.proc.stop()]);
  }
}

export async function familiesGroup(suite: Suite): Promise<void> {
  await suite.group('families', ['largest-32'], async () => {
    // The short mode (CI's) runs Llama 4 alone, for 3 s: its prompt and layouts are the newest.
    const seconds = suite.short ? 3 : 60;
    const families = suite.short ? FAMILIES.filter((f) => f.kind === 'llama4') : FAMILIES;
    await suite.run(
      'families/largest-32',
      async (t) => {
        const images = await largeImages();
        const lines: string[] = [];
        for (const [i, { kind, label }] of families.entries()) lines.push(await familyUnderLoad(t, kind, label, images, 32, seconds, i));
        t.summary(`32 clients, 1080p and 4K JPEGs, ${seconds} s each: ${lines.join('; ')}; files left ${ourFiles('/dev/shm').length}`);
      },
      { seeded: true, maxSeconds: 2 * seconds + 240 },
    );
  });
}
