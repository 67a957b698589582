// A band of an image posted to a helper thread (docs/performance.md, "Image preprocessing
// (`npm run bench:preprocess`)"): Qwen's patch scatter (qwen-vl.ts), MoonViT's (moonvit.ts) or
// Inkling's patch rows (inkling.ts), told apart by the job's kind; what the helper thread runs.
import { runPostedInklingBand, type InklingBandJob } from './inkling.ts';
import { runPostedMoonVitBand, type MoonVitBandJob } from './moonvit.ts';
import { runPostedPreprocessBand, type BandWrite, type PreprocessBandJob } from './qwen-vl.ts';

export function runPostedBand(job: PreprocessBandJob | MoonVitBandJob | InklingBandJob): BandWrite | undefined {
  if ('kind' in job && job.kind === 'inkling') return runPostedInklingBand(job);
  return 'kind' in job && job.kind === 'moonvit' ? runPostedMoonVitBand(job) : runPostedPreprocessBand(job);
}
