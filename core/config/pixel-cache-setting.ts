// The pixel cache's budget (docs/performance.md, "The pixel cache"): multimodal_pixel_cache_mb
// from the file or --multimodal-pixel-cache-mb, else the gateway's environment variable
// SMG_MM_PIXEL_CACHE_MB, else the default. 0 turns the cache off.
import { z } from 'zod';
import { wholeNumberFromEnv } from './errors.ts';
import type { RouterConfig } from './schema.ts';

export const PIXEL_CACHE_ENV = 'SMG_MM_PIXEL_CACHE_MB';
/** 512 MiB: 22 Qwen2-VL 1080p float32 encoder inputs (23 MiB each), 45 in bfloat16 (docs/performance.md says why). */
export const DEFAULT_PIXEL_CACHE_MB = 512;
/** 1 TiB: beyond any /dev/shm. */
export const MAX_PIXEL_CACHE_MB = 1024 * 1024;
export const PIXEL_CACHE_MB_EXPECTED = `expected a whole number of MiB from 0 (off) to ${MAX_PIXEL_CACHE_MB}`;

export const PixelCacheMbSchema = z
  .int({ error: PIXEL_CACHE_MB_EXPECTED })
  .min(0, { error: PIXEL_CACHE_MB_EXPECTED })
  .max(MAX_PIXEL_CACHE_MB, { error: PIXEL_CACHE_MB_EXPECTED });

export interface PixelCacheBudget {
  mb: number;
  bytes: number;
  /** Which input decided it. */
  source: 'multimodal_pixel_cache_mb' | typeof PIXEL_CACHE_ENV | 'default';
}

/** The budget in force; a malformed SMG_MM_PIXEL_CACHE_MB is a ConfigError naming it and its value (the gateway warns and turns the cache off; a typo here should not pass silently). */
export function pixelCacheBudget(config: Pick<RouterConfig, 'multimodal_pixel_cache_mb'>, env: Readonly<Record<string, string | undefined>>): PixelCacheBudget {
  const of = (mb: number, source: PixelCacheBudget['source']): PixelCacheBudget => ({ mb, bytes: mb * 1024 * 1024, source });
  if (config.multimodal_pixel_cache_mb !== undefined) return of(config.multimodal_pixel_cache_mb, 'multimodal_pixel_cache_mb');
  const mb = wholeNumberFromEnv(env, PIXEL_CACHE_ENV, PixelCacheMbSchema, PIXEL_CACHE_MB_EXPECTED);
  return mb === undefined ? of(DEFAULT_PIXEL_CACHE_MB, 'default') : of(mb, PIXEL_CACHE_ENV);
}
