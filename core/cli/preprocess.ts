// `mmtc preprocess`: the router's image pipeline on local files, for checking what a model
// will receive (sizes, grid, tokens, bytes, per-stage time) and comparing fingerprints with
// a Python reference.
import { formatValue } from '../config/errors.ts';
import { loadImageBytes, ImageInputError } from './fetch.ts';
import { loadModelDirectory } from './model-dir.ts';
import { PreprocessPool } from './pool.ts';
import { encoderFingerprint, QWEN_VL_DEFAULTS, type QwenVlFamily, type QwenVlImageConfig } from './qwen-vl.ts';

export interface PreprocessCommandOptions {
  model?: QwenVlFamily;
  modelPath?: string;
  normalize: boolean;
  dtype: 'float32' | 'bfloat16';
  json?: boolean;
}

export interface PreprocessReport {
  image: string;
  width: number;
  height: number;
  /** [height, width] after smart_resize. */
  resized: [number, number];
  shape: [number, number];
  grid_thw: [number, number, number];
  tokens: number;
  dtype: string;
  nbytes: number;
  fingerprint: string;
  ms: { read: number; decode: number; preprocess: number };
  /** Threads that resized and scattered the image (2 when a free pool thread helped). */
  threads: number;
}

export async function runPreprocessCommand(images: string[], opts: PreprocessCommandOptions): Promise<number> {
  let config: QwenVlImageConfig;
  if (opts.modelPath) {
    const model = await loadModelDirectory(opts.modelPath);
    if (opts.model && opts.model !== model.family) {
      process.stderr.write(`warning: --model ${opts.model} differs from ${model.path}'s model_type ${formatValue(model.modelType)}; using ${opts.model} with its preprocessor_config.json\n`);
    }
    config = model.imageConfig;
  } else {
    config = QWEN_VL_DEFAULTS[opts.model ?? 'qwen2_vl'];
  }
  if (!opts.normalize) config = { ...config, do_normalize: false };
  const pool = new PreprocessPool();
  const reports: PreprocessReport[] = [];
  let failed = 0;
  try {
    const results = await Promise.allSettled(
      images.map(async (image, index) => {
        const t0 = performance.now();
        const bytes = await loadImageBytes(image, index, { allowFiles: true });
        const read = performance.now() - t0;
        const r = await pool.run({ bytes, config, bf16: false });
        const elem = opts.dtype === 'bfloat16' ? 2 : 4;
        const report: PreprocessReport = {
          image,
          width: r.width,
          height: r.height,
          resized: [r.resizedHeight, r.resizedWidth],
          shape: [r.patches, r.features],
          grid_thw: r.gridThw,
          tokens: r.tokens,
          dtype: opts.dtype,
          nbytes: r.patches * r.features * elem,
          fingerprint: encoderFingerprint(r.pixelValues!),
          ms: { read: round(read), decode: round(r.timings.decode), preprocess: round(r.timings.preprocess) },
          threads: r.threads,
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
  else for (const r of reports) process.stdout.write(formatReport(r));
  return failed > 0 ? 1 : 0;
}

function round(ms: number): number {
  return Math.round(ms * 100) / 100;
}

function formatReport(r: PreprocessReport): string {
  return [
    `${r.image}`,
    `  input       ${r.width}x${r.height}`,
    `  resized     ${r.resized[1]}x${r.resized[0]}`,
    `  shape       [${r.shape.join(', ')}]  grid_thw [${r.grid_thw.join(', ')}]  ${r.tokens} tokens`,
    `  encoder     ${r.dtype}, ${r.nbytes} bytes (${(r.nbytes / 1e6).toFixed(1)} MB)`,
    `  time        read ${r.ms.read} ms, decode ${r.ms.decode} ms, resize+normalize+patchify ${r.ms.preprocess} ms (${r.threads} thread${r.threads === 1 ? '' : 's'})`,
    `  fingerprint ${r.fingerprint}`,
    '',
  ].join('\n');
}
