// Threshold calibration on the operator's own box: where does /dev/shm start beating inline
// for this worker? The gateway ships a fixed 64 KiB; the crossover depends on the machine,
// the worker and its read path, so we measure it (docs/console.md, "Test traffic and
// calibration").
//
// Synthetic images whose encoder tensors span CALIBRATION_TARGETS (the actual sizes follow the
// model's patch geometry and the worker's wire dtype, and are stated by the plan) go through
// the real pipeline to that worker, once with the mode forced to inline and once to shm
// (threshold 1 KiB, so only the encoder tensor takes /dev/shm), interleaved and alternating
// which goes first, `samples` times each after one warm-up. What is compared is the time the
// transport can change: placing the tensors plus the worker's Generate call (preprocessing is
// the same work either way and only adds noise).
//
// A size has a winner only when the difference is larger than the noise: the two sets of
// samples are compared by rank (Mann–Whitney U, |z| >= CLEAR_Z) and the medians must differ by
// at least CLEAR_SHARE of the slower; otherwise it is a tie. The crossover is the smallest size
// SHM clearly wins from which no larger size is clearly won by inline; the recommended
// multimodal_shm_min_bytes is the geometric midpoint between it and the size below it (or the
// smallest size when SHM wins from there), rounded to KiB. When SHM clearly wins nowhere there
// is no clear crossover, and nothing is recommended.
import { processorOf, type ImageConfig } from '../multimodal/families/index.ts';
import { runChatInMemory } from '../router/chat.ts';
import { capabilitiesOf } from '../engines/table.ts';
import { findWorker, type ConsoleState } from './state.ts';
import { workerTransport } from './views.ts';
import { decisionOutcome } from '../transport/decision.ts';
import { DECISION_REASONS } from '../transport/vocabulary.ts';
import { transportOverrideWorker } from '../transport/resolve.ts';
import { ContractError, type CalibrationResult } from './contract.ts';
import { syntheticChat } from './test-image.ts';
import { formatBytes } from '../util/bytes.ts';

const KiB = 1024;
const MiB = 1024 * KiB;
/** Encoder tensor sizes to aim for; the actual sizes follow the model's patch geometry. */
export const CALIBRATION_TARGETS = [16 * KiB, 64 * KiB, 256 * KiB, 1 * MiB, 4 * MiB, 16 * MiB, 32 * MiB];
/** Samples per size and path when the operator does not choose (docs/console.md says how well repeated runs agree with it). */
export const DEFAULT_CALIBRATION_SAMPLES = 15;
/** |z| of the rank comparison from which a size has a winner (about p < 0.01, two-sided). */
export const CLEAR_Z = 2.58;
/** The medians must also differ by this share of the slower one. */
export const CLEAR_SHARE = 0.03;

export type Winner = 'shm' | 'inline' | 'tie';

/** The fewest samples per path with which a size can have a winner at all (every SHM sample faster than every inline one reaches |z| = CLEAR_Z). */
export function minSamplesForWinner(): number {
  for (let n = 1; n <= 100; n++) if ((n * n) / 2 / Math.sqrt((n * n * (2 * n + 1)) / 12) >= CLEAR_Z) return n;
  return 100;
}

function quantile(xs: readonly number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const at = (s.length - 1) * q;
  const lo = Math.floor(at);
  const hi = Math.ceil(at);
  return s[lo]! + (s[hi]! - s[lo]!) * (at - lo);
}

/** Which path is faster at one size, and whether the difference is larger than the noise. */
export function comparePaths(inline: readonly number[], shm: readonly number[]): { winner: Winner; shmFasterShare: number; z: number } {
  const n = inline.length;
  const m = shm.length;
  if (n === 0 || m === 0) return { winner: 'tie', shmFasterShare: 0.5, z: 0 };
  let u = 0;
  for (const s of shm) for (const i of inline) u += s < i ? 1 : s === i ? 0.5 : 0;
  const share = u / (n * m);
  const z = (u - (n * m) / 2) / Math.sqrt((n * m * (n + m + 1)) / 12);
  const a = quantile(inline, 0.5);
  const b = quantile(shm, 0.5);
  const big = Math.abs(a - b) >= CLEAR_SHARE * Math.max(a, b);
  const winner: Winner = Math.abs(z) >= CLEAR_Z && big ? (z > 0 ? 'shm' : 'inline') : 'tie';
  return { winner, shmFasterShare: share, z };
}

interface SizePlan {
  width: number;
  height: number;
  nbytes: number;
}

/** Square images whose encoder tensor is nearest each target, one per distinct size (the processor of `config` chooses them). */
export function calibrationSizes(config: ImageConfig, elementBytes: number, targets = CALIBRATION_TARGETS): SizePlan[] {
  return processorOf(config).sizesNear(targets, elementBytes);
}

/** The crossover of measured points (sizes ascending), by the rule in the header. */
export function findCrossover(points: ReadonlyArray<{ nbytes: number; winner: Winner }>): {
  crossoverBytes: number | null;
  recommendedMinBytes: number | null;
} {
  let first = -1;
  for (let i = points.length - 1; i >= 0; i--) {
    if (points[i]!.winner === 'inline') break;
    if (points[i]!.winner === 'shm') first = i;
  }
  if (first < 0) return { crossoverBytes: null, recommendedMinBytes: null };
  const at = points[first]!.nbytes;
  const below = first > 0 ? points[first - 1]!.nbytes : undefined;
  const raw = below === undefined ? at : Math.sqrt(below * at);
  return { crossoverBytes: at, recommendedMinBytes: Math.max(KiB, Math.round(raw / KiB) * KiB) };
}

/** The sizes a calibration of this worker measures, in its wire dtype. */
export function calibrationPlan(state: ConsoleState, url: string): { dtype: string; sizes: SizePlan[] } {
  const ctx = state.running.context;
  const worker = ctx.registry.get(url);
  if (!worker?.healthy || !worker.runtime)
    throw new ContractError(
      'invalid_config',
      `worker ${url} is not healthy (${worker?.lastError ?? 'not discovered'}); calibration needs a worker that answers`,
      'url',
    );
  const s = state.store.current();
  const spec = findWorker(s, url);
  // Under disaggregation a decode worker (and a prefill next to encode workers) reads no pixel
  // tensor: there is no transport of its own to time, whatever its protocol carries.
  const reader = s.config.disaggregation === 'none' ? undefined : transportOverrideWorker(spec, s.config.workers);
  if (reader && reader.worker !== spec) {
    // The workers that do read them and can be calibrated: healthy, with a /dev/shm lane.
    const role = reader.worker.worker_type;
    const readers = s.config.workers
      .filter((w) => {
        const seen = w.worker_type === role ? ctx.registry.get(w.url) : undefined;
        return seen?.healthy && seen.runtime && capabilitiesOf(seen.runtime).shmLane;
      })
      .map((w) => w.url);
    const instead =
      readers.length === 0
        ? `no ${role} worker can be calibrated now (each is unhealthy or its protocol carries tensors inline only)`
        : `calibrate ${readers.length === 1 ? readers[0] : `one of the ${role} workers (${readers.join(', ')})`}`;
    throw new ContractError(
      'invalid_config',
      `worker ${url} is a ${spec.worker_type} worker under disaggregation ${s.config.disaggregation}: it reads no pixel tensors (${reader.why}), so there is no transport of its own to measure; ${instead}`,
      'url',
    );
  }
  const capabilities = capabilitiesOf(worker.runtime);
  if (!capabilities.shmLane)
    throw new ContractError(
      'invalid_config',
      `worker ${url} speaks ${capabilities.label}, whose protocol carries tensors inline only: there is no SHM path to measure`,
      'url',
    );
  // What a request with SHM forced would do now: measuring "SHM" needs its tensors to go
  // through /dev/shm, not to be attempted and sent again inline (another /dev/shm, a broken lane).
  const forced = workerTransport(
    state,
    { ...spec, multimodal_tensor_transport: 'shm', multimodal_shm_min_bytes: KiB },
    s.config,
    s,
    s.origins,
    worker,
  ).decision;
  const outcome = decisionOutcome(forced);
  if (outcome !== 'shm')
    throw new ContractError(
      'invalid_config',
      `with SHM forced, worker ${url}'s requests would not go through /dev/shm (${forced.reason}: ${DECISION_REASONS[forced.reason]}), so there is no SHM path to measure`,
      'url',
    );
  const dtype = capabilities.encoderDtype('image', ctx.processEnv, worker.labels).dtype;
  // The image sizes are the model family's processor's (its encoder input per image size).
  return { dtype, sizes: calibrationSizes(ctx.model.imageConfig, dtype === 'float32' ? 4 : 2) };
}

export async function calibrateWorker(state: ConsoleState, url: string, samples: number): Promise<CalibrationResult> {
  const ctx = state.running.context;
  const { dtype, sizes } = calibrationPlan(state, url);
  const worker = ctx.registry.get(url)!;
  if (!ctx.host.shmWritable) throw new ContractError('invalid_config', `${ctx.writer.dir} is not writable by the router, so there is no SHM path to measure`);
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
      // Each size sends the same image again: a hit would time a hard link, not the write.
      bypassPixelCache: true,
      pixelBounds: { min_pixels: s.width * s.height, max_pixels: s.width * s.height },
    });
    done += 1;
    if (chat.status !== 200) {
      const message = (JSON.parse(chat.body || '{}') as { error?: { message?: string } }).error?.message ?? `HTTP ${chat.status}`;
      throw new ContractError('internal', `calibration request (${s.width}x${s.height}, ${mode}) failed: ${message}`);
    }
    // A sample counts for its path only when its encoder tensor took that path (a lane that
    // broke meanwhile would time inline retries as SHM).
    const encoder = ctx.events.recent().filter((e) => e.requestId === chat.requestId && e.nbytes >= KiB);
    const wrong = encoder.find((e) => e.path !== mode || e.attempt !== undefined);
    if (encoder.length === 0 || wrong) {
      throw new ContractError(
        'internal',
        `calibration stopped: a ${mode} sample at ${formatBytes(s.nbytes)} went ${wrong ? `${wrong.path} (${wrong.reason}${wrong.detail ? `: ${wrong.detail}` : ''})` : 'without its encoder tensor'}, so it would not measure the ${mode} path`,
      );
    }
    return chat.timing.span('place') + chat.timing.span('worker');
  };

  const inline: number[][] = sizes.map(() => []);
  const shm: number[][] = sizes.map(() => []);
  for (let round = 0; round <= samples; round++) {
    for (let i = 0; i < sizes.length; i++) {
      progress(`round ${round === 0 ? 'warm-up' : `${round} of ${samples}`}: ${formatBytes(sizes[i]!.nbytes)}`);
      const order: Array<'inline' | 'shm'> = (round + i) % 2 === 0 ? ['inline', 'shm'] : ['shm', 'inline'];
      for (const mode of order) {
        const ms = await measure(i, mode);
        if (round > 0) (mode === 'inline' ? inline : shm)[i]!.push(ms);
      }
    }
  }
  progress('done');
  const points = sizes.map((s, i) => {
    const a = inline[i]!;
    const b = shm[i]!;
    const { winner, shmFasterShare } = comparePaths(a, b);
    return {
      ...s,
      inlineMs: quantile(a, 0.5),
      shmMs: quantile(b, 0.5),
      inlineSpread: [quantile(a, 0.25), quantile(a, 0.75)] as [number, number],
      shmSpread: [quantile(b, 0.25), quantile(b, 0.75)] as [number, number],
      winner,
      shmFasterShare,
      inlineSamples: a,
      shmSamples: b,
    };
  });
  const { crossoverBytes, recommendedMinBytes } = findCrossover(points);
  return {
    worker: url,
    runtime: worker.runtime!,
    dtype,
    samplesPerPoint: samples,
    points,
    crossoverBytes,
    recommendedMinBytes,
    note: calibrationNote(points, crossoverBytes, samples),
  };
}

/** What the measurement says, in words: the crossover, or why there is none, and where the two paths are within the noise. */
export function calibrationNote(points: ReadonlyArray<{ nbytes: number; winner: Winner }>, crossoverBytes: number | null, samples: number): string {
  const range = `${formatBytes(points[0]!.nbytes)} to ${formatBytes(points.at(-1)!.nbytes)}`;
  const ties = points.filter((p) => p.winner === 'tie').map((p) => formatBytes(p.nbytes));
  const tieText = ties.length ? ` At ${ties.join(', ')} the difference is within the noise (either path is as fast).` : '';
  if (crossoverBytes === null) {
    if (points.every((p) => p.winner === 'inline'))
      return `Inline was clearly faster at every measured size (${range}): keep the threshold above ${formatBytes(points.at(-1)!.nbytes)}, or use mode inline for this worker.`;
    if (points.some((p) => p.winner === 'shm'))
      return `No clear crossover: SHM wins at some sizes but inline wins at a larger one (${range}, ${samples} samples per size).${tieText} Measure again with more samples.`;
    return `No clear crossover: at ${points.every((p) => p.winner === 'tie') ? 'every' : 'each'} measured size (${range}) where inline does not win, the difference is within the noise of ${samples} samples per size.${tieText} Nothing is recommended; more samples may separate them.`;
  }
  // Above the crossover inline wins nowhere, but sizes may tie: then SHM is not "clearly faster" there.
  const tiesAbove = points.filter((p) => p.nbytes > crossoverBytes && p.winner === 'tie').map((p) => formatBytes(p.nbytes));
  if (tiesAbove.length > 0) {
    const wins = points.filter((p) => p.winner === 'shm').map((p) => formatBytes(p.nbytes));
    const below = points.filter((p) => p.nbytes < crossoverBytes && p.winner === 'tie').map((p) => formatBytes(p.nbytes));
    const belowText = below.length ? ` At ${below.join(', ')} the difference is within the noise too.` : '';
    return `SHM was clearly faster at ${wins.join(', ')} and inline at no size above ${formatBytes(crossoverBytes)}; at ${tiesAbove.join(', ')} the two are within the noise (measured ${range}). The threshold sits between ${formatBytes(crossoverBytes)} and the next smaller size measured.${belowText}`;
  }
  if (crossoverBytes === points[0]!.nbytes)
    return `SHM was clearly faster from the smallest measured size, ${formatBytes(crossoverBytes)}, up to ${formatBytes(points.at(-1)!.nbytes)}; smaller tensors were not measured.${tieText}`;
  return `SHM is clearly faster from ${formatBytes(crossoverBytes)} on (measured ${range}); the threshold sits between that and the next smaller size measured.${tieText}`;
}
