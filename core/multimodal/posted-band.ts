// A band of an image posted to a helper thread (docs/performance.md, "Image preprocessing
// (`npm run bench:preprocess`)"): Qwen's patch scatter (qwen-vl.ts), MoonViT's (moonvit.ts),
// Inkling's patch rows (inkling.ts) or a crop family's resize rows (crop-writer.ts), told apart
// by the job's kind, or a JPEG's bottom rows (decode-shared.ts); what the helper thread runs.
import { runPostedCropBand, type CropBandJob } from './crop-writer.ts';
import { runPostedDecodeBand, type DecodeBandJob } from './decode-shared.ts';
import { runPostedInklingBand, type InklingBandJob } from './inkling.ts';
import { runPostedMoonVitBand, type MoonVitBandJob } from './moonvit.ts';
import { runPostedPreprocessBand, type BandWrite, type PreprocessBandJob } from './qwen-vl.ts';

export function runPostedBand(job: PreprocessBandJob | MoonVitBandJob | InklingBandJob | CropBandJob | DecodeBandJob): BandWrite | string | undefined {
  if ('kind' in job && job.kind === 'decode') return runPostedDecodeBand(job);
  if ('kind' in job && job.kind === 'crops') return runPostedCropBand(job);
  if ('kind' in job && job.kind === 'inkling') return runPostedInklingBand(job);
  return 'kind' in job && job.kind === 'moonvit' ? runPostedMoonVitBand(job) : runPostedPreprocessBand(job);
}
