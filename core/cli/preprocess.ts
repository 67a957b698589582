// `mmtc preprocess`: the router's image pipeline on local files, for checking what a model
// will receive (sizes, grid, tokens, bytes, per-stage time) and comparing fingerprints with
// a Python reference.
import { formatValue } from '../config/errors.ts';
import { loadImageBytes, ImageInputError } from '../multimodal/fetch.ts';
import { createMediaPolicy } from '../multimodal/media-policy.ts';
import { loadModelDirectory } from '../multimodal/model-dir.ts';
import { PreprocessPool } from '../multimodal/pool.ts';
import { familyById, type FamilyId, type ImageConfig } from '../multimodal/families/index.ts';
import { encoderFingerprint } from '../multimodal/qwen-vl.ts';
import { formatPreprocessReport, type PreprocessReport } from './reports.ts';

export interface PreprocessCommandOptions {
  model?: FamilyId;
  modelPath?: string;
  normalize: boolean;
  dtype: 'float32' | 'bfloat16';
  json?: boolean;
}

/** The operator's own command on their own machine: local files and hosts of their network are theirs to read. */
const OPERATOR_MEDIA_POLICY = createMediaPolicy({ allowPrivateHosts: true });

export async function runPreprocessCommand(images: string[], opts: PreprocessCommandOptions): Promise<number> {
  let config: ImageConfig;
  let family: FamilyId = opts.model ?? 'qwen2_vl';
  if (opts.modelPath) {
    const model = await loadModelDirectory(opts.modelPath);
    if (opts.model && opts.model !== model.family) {
      process.stderr.write(
        `warning: --model ${opts.model} differs from ${model.path}'s model_type ${formatValue(model.modelType)} (the ${model.family} family); using ${model.family} with the directory's preprocessor_config.json\n`,
      );
    }
    config = model.imageConfig;
    family = model.family;
  } else {
    config = familyById(family).defaults;
  }
  if (!opts.normalize) {
    // MoonViT's and Phi-3-vision's processors have no switch for it (the checkpoints' processors always normalize).
    if (!('do_normalize' in config)) {
      process.stderr.write(`error: --no-normalize is not available for the ${family} family (its processor always normalizes)\n`);
      return 2;
    }
    config = { ...config, do_normalize: false };
  }
  const pool = new PreprocessPool();
  const reports: PreprocessReport[] = [];
  let failed = 0;
  try {
    const results = await Promise.allSettled(
      images.map(async (image, index) => {
        const t0 = performance.now();
        const bytes = await loadImageBytes(image, index, { allowFiles: true, policy: OPERATOR_MEDIA_POLICY });
        const read = performance.now() - t0;
        const r = await pool.run({ bytes, config, bf16: false });
        const elem = opts.dtype === 'bfloat16' ? 2 : 4;
        const report: PreprocessReport = {
          image,
          width: r.width,
          height: r.height,
          family,
          resized: [r.resizedHeight, r.resizedWidth],
          shape: familyById(family).encoderShape(r, config),
          ...(r.gridT !== undefined && r.gridH !== undefined && r.gridW !== undefined
            ? { grid_thw: [r.gridT, r.gridH, r.gridW] as [number, number, number] }
            : {}),
          ...(r.imageSize ? { image_sizes: r.imageSize } : {}),
          ...(r.tiles ? { aspect_ratios: r.tiles } : {}),
          tokens: r.tokens,
          dtype: opts.dtype,
          nbytes: r.patches * r.features * elem,
          fingerprint: encoderFingerprint(r.pixelValues!),
          ms: { read: round(read), decode: round(r.timings.decode), preprocess: round(r.timings.preprocess) },
          threads: r.threads,
          decoder: r.decoder,
          decodeThreads: r.decodeThreads,
        };
        return report;
      }),
    );
    results.forEach((r, i) => {
      if (r.status === 'fulfilled') reports.push(r.value);
      else {
        failed += 1;
        const err = r.reason as Error;
        process.stderr.write(`error: ${err instanceof ImageInputError ? err.message : `image ${i} (${images[i]}): ${err.message}`}\n`);
      }
    });
  } finally {
    await pool.close();
  }
  if (opts.json) process.stdout.write(`${JSON.stringify(reports, null, 2)}\n`);
  else for (const r of reports) process.stdout.write(formatPreprocessReport(r));
  return failed > 0 ? 1 : 0;
}

function round(ms: number): number {
  return Math.round(ms * 100) / 100;
}
