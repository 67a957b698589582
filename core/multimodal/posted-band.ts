// A band of an image posted to a helper thread (docs/performance.md, "Image preprocessing
// (`npm run bench:preprocess`)"): Qwen's patch scatter (qwen-vl.ts) or MoonViT's (moonvit.ts),
// told apart by the job's kind; what the helper thread runs.
import { runPostedMoonVitBand, type MoonVitBandJob } from './moonvit.ts';
import { runPostedPreprocessBand, type BandWrite, type PreprocessBandJob } from './qwen-vl.ts';

export function runPostedBand(job: PreprocessBandJob | MoonVitBandJob): BandWrite | undefined {
  return 'kind' in job && job.kind === 'moonvit' ? runPostedMoonVitBand(job) : runPostedPreprocessBand(job as PreprocessBandJob);
}
