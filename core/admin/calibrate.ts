// Threshold calibration on the operator's own box: where does /dev/shm start beating inline
// for this worker? The gateway ships a fixed 64 KiB; the crossover depends on the machine,
// the worker and its read path, so we measure it.
//
// Synthetic images whose encoder tensors span about 16 KiB to 32 MiB in the worker's wire
// dtype go through the real pipeline to that worker, once with the mode forced to inline and
// once to shm (threshold 1 KiB, so only the encoder tensor takes /dev/shm), interleaved and
// alternating which goes first, `samples` times each after one warm-up. What is compared is
// the time the transport can change: placing the tensors plus the worker's Generate call
// (preprocessing is the same work either way and only adds noise). The crossover is the
// smallest measured size from which SHM's median stays below inline's at every larger size;
// the recommended multimodal_shm_min_bytes is the geometric midpoint between that size and
// the one below it (or the smallest size when SHM wins everywhere), rounded to KiB.
import { patchGeometry } from '../multimodal/qwen-vl.ts';
import { runChatInMemory } from '../router/pipeline.ts';
import { resolveEncoderDtype } from '../transport/dtype.ts';
import type { ConsoleState } from './console.ts';
import { ContractError, type CalibrationResult } from './contract.ts';
import { syntheticChat } from './test-image.ts';

const KiB = 1024;
const MiB = 1024 * KiB;
/** Encoder tensor sizes to aim for; the actual sizes follow the model's patch geometry. */
export const CALIBRATION_TARGETS = [16 * KiB, 64 * KiB, 256 * KiB, 1 * MiB, 4 * MiB, 16 * MiB, 32 * MiB];

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

interface SizePlan {
  width: number;
  height: number;
  nbytes: number;
}

/** Square images whose encoder tensor is nearest each target, one per distinct size. */
export function calibrationSizes(config: Parameters<typeof patchGeometry>[2], elementBytes: number, targets = CALIBRATION_TARGETS): SizePlan[] {
  const factor = config.patch_size * config.merge_size;
  const features = 3 * config.temporal_patch_size * config.patch_size * config.patch_size;
  const plans: SizePlan[] = [];
  for (const target of targets) {
    const patches = target / (features * elementBytes);
    // A square grid of merge blocks: side in blocks, at least one block.
    const blocks = Math.max(1, Math.round(Math.sqrt(patches) / config.merge_size));
    const side = blocks * factor;
    const g = patchGeometry(side, side, { ...config, min_pixels: factor * factor, max_pixels: side * side });
    const nbytes = g.patches * g.features * elementBytes;
    if (!plans.some((p) => p.nbytes === nbytes)) plans.push({ width: side, height: side, nbytes });
  }
  return plans;
}

export function findCrossover(points: Array<{ nbytes: number; inlineMs: number; shmMs: number }>): { crossoverBytes: number | null; recommendedMinBytes: number | null } {
  let first = -1;
  for (let i = points.length - 1; i >= 0; i--) {
    if (points[i]!.shmMs < points[i]!.inlineMs) first = i;
    else break;
  }
  if (first < 0) return { crossoverBytes: null, recommendedMinBytes: null };
  const at = points[first]!.nbytes;
  const below = first > 0 ? points[first - 1]!.nbytes : undefined;
  const raw = below === undefined ? at : Math.sqrt(below * at);
  return { crossoverBytes: at, recommendedMinBytes: Math.max(KiB, Math.round(raw / KiB) * KiB) };
}

export async function calibrateWorker(state: ConsoleState, url: string, samples: number): Promise<CalibrationResult> {
  const ctx = state.running.context;
  const worker = ctx.registry.get(url);
  if (!worker?.healthy || !worker.runtime) throw new ContractError('invalid_config', `worker ${url} is not healthy (${worker?.lastError ?? 'not discovered'}); calibration needs a worker that answers`, 'url');
  if (!ctx.host.shmWritable) throw new ContractError('invalid_config', `${ctx.writer.dir} is not writable by the router, so there is no SHM path to measure`);
  const dtype = resolveEncoderDtype(worker.runtime, 'image', ctx.processEnv, worker.labels).dtype;
  const elementBytes = dtype === 'float32' ? 4 : 2;
  const config = ctx.model.imageConfig;
  const sizes = calibrationSizes(config, elementBytes);
  const total = sizes.length * (samples + 1) * 2;
  let done = 0;
  const progress = (phase: string) => state.emit('calibration', { url, done, total, phase });
  progress('preparing images');
  const bodies = await Promise.all(sizes.map((s) => syntheticChat(s.width, s.height, 'png')));

  const measure = async (i: number, mode: 'inline' | 'shm'): Promise<number> => {
    const s = sizes[i]!;
    const chat = await runChatInMemory(ctx, bodies[i], {
      source: 'console',
      worker: url,
      transport: { mode, minBytes: KiB },
      pixelBounds: { min_pixels: s.width * s.height, max_pixels: s.width * s.height },
    });
    done += 1;
    if (chat.status !== 200) {
      const message = (JSON.parse(chat.body || '{}') as { error?: { message?: string } }).error?.message ?? `HTTP ${chat.status}`;
      throw new ContractError('internal', `calibration request (${s.width}x${s.height}, ${mode}) failed: ${message}`);
    }
    return chat.timing.span('place') + chat.timing.span('worker');
  };

  const inline: number[][] = sizes.map(() => []);
  const shm: number[][] = sizes.map(() => []);
  for (let round = 0; round <= samples; round++) {
    for (let i = 0; i < sizes.length; i++) {
      progress(`round ${round === 0 ? 'warm-up' : `${round} of ${samples}`}: ${sizes[i]!.nbytes} bytes`);
      const order: Array<'inline' | 'shm'> = (round + i) % 2 === 0 ? ['inline', 'shm'] : ['shm', 'inline'];
      for (const mode of order) {
        const ms = await measure(i, mode);
        if (round > 0) (mode === 'inline' ? inline : shm)[i]!.push(ms);
      }
    }
  }
  progress('done');
  const points = sizes.map((s, i) => ({ ...s, inlineMs: median(inline[i]!), shmMs: median(shm[i]!), inlineSamples: inline[i]!, shmSamples: shm[i]! }));
  const { crossoverBytes, recommendedMinBytes } = findCrossover(points);
  const smallest = points[0]!.nbytes;
  const largest = points.at(-1)!.nbytes;
  const note =
    crossoverBytes === null
      ? `inline was faster or as fast at every measured size up to ${largest} bytes: keep the threshold above that, or use mode inline for this worker`
      : crossoverBytes === smallest
        ? `SHM was faster at every measured size, from ${smallest} bytes; smaller tensors were not measured`
        : `SHM is faster from ${crossoverBytes} bytes on; the threshold sits between that and the next smaller size measured`;
  return { worker: url, runtime: worker.runtime, dtype, samplesPerPoint: samples, points, crossoverBytes, recommendedMinBytes, note };
}
