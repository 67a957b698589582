// The pixel cache (docs/performance.md, "The pixel cache") as the console shows it: its live
// counts, the budget in force and the input that decided it, why it is off and what turns it
// on (pixelCacheView, which the overview carries at every tick), and its flush.
import { DEFAULT_PIXEL_CACHE_MB, PIXEL_CACHE_ENV, pixelCacheBudget, type PixelCacheBudget } from '../../config/pixel-cache-setting.ts';
import type { PixelCacheStats } from '../../transport/pixel-cache.ts';
import { ContractError, type PixelCacheView } from '../contract.ts';
import type { ConsoleState, HandlerGroup } from '../state.ts';

// The contract's view carries exactly the cache's own counts: a count added to one side and not the other fails here.
type Counts = Omit<PixelCacheView, 'configured' | 'off'>;
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const countsMatchTheCache: Same<Counts, PixelCacheStats> = true;
void countsMatchTheCache;

/** The input that decided the budget, as a sentence's end: "multimodal_pixel_cache_mb is 0, set in router.yaml:3:1". */
function budgetWords(b: PixelCacheBudget, origin: string | null): string {
  if (b.source === 'multimodal_pixel_cache_mb') return `multimodal_pixel_cache_mb is ${b.mb}${origin ? `, set in ${origin}` : ''}`;
  if (b.source === PIXEL_CACHE_ENV) return `${PIXEL_CACHE_ENV}=${b.mb} in the router's environment`;
  return `the default budget is ${b.mb} MiB`;
}

/** Why a cache whose budget in force is 0 is off, and what turns it on (each remedy true of the input that decided it). */
function offReason(state: ConsoleState, configured: PixelCacheBudget, origin: string | null): NonNullable<PixelCacheView['off']> {
  const ctx = state.running.context;
  if (!ctx.host.shmWritable) {
    const why = state.running.shmProbe.error;
    return {
      reason: 'shm_not_writable',
      message: `off: the cache keeps its entries in ${ctx.writer.dir}, which the router could not write at start${why ? ` (${why})` : ''}`,
      remedy:
        configured.mb > 0
          ? `make ${ctx.writer.dir} writable by the router's user and restart the router: the cache then gets its budget (${budgetWords(configured, origin)})`
          : `make ${ctx.writer.dir} writable by the router's user and restart the router with multimodal_pixel_cache_mb above 0 (now ${budgetWords(configured, origin)})`,
    };
  }
  let remedy: string;
  if (configured.source === 'multimodal_pixel_cache_mb' && origin?.startsWith('--')) {
    remedy = `set multimodal_pixel_cache_mb to the MiB to keep on the Router screen (it applies at once, until the next restart: the router started with ${origin} 0), or restart the router without that flag`;
  } else if (configured.source === 'multimodal_pixel_cache_mb') {
    const unset = pixelCacheBudget({}, ctx.processEnv);
    const whenUnset =
      unset.mb > 0
        ? `leave it unset for ${unset.source === PIXEL_CACHE_ENV ? `${PIXEL_CACHE_ENV}'s` : 'the default'} ${unset.mb} MiB`
        : `leave it unset, unset ${PIXEL_CACHE_ENV} (0 now) and restart the router for the default ${DEFAULT_PIXEL_CACHE_MB} MiB`;
    remedy = `set multimodal_pixel_cache_mb to the MiB to keep on the Router screen (it applies at once), or ${whenUnset}`;
  } else {
    remedy = `set multimodal_pixel_cache_mb to the MiB to keep on the Router screen (it wins over ${PIXEL_CACHE_ENV} and applies at once), or unset ${PIXEL_CACHE_ENV} and restart the router (the default is ${DEFAULT_PIXEL_CACHE_MB} MiB)`;
  }
  return { reason: 'budget_zero', message: `off: ${budgetWords(configured, origin)}`, remedy };
}

/** The pixel cache now, or null when the router runs without one. */
export function pixelCacheView(state: ConsoleState): PixelCacheView | null {
  const ctx = state.running.context;
  const cache = ctx.pixelCache;
  if (!cache) return null;
  const stats = cache.stats();
  const s = state.store.current();
  // The router's own reading of the same inputs (its start refused a malformed SMG_MM_PIXEL_CACHE_MB).
  const configured = pixelCacheBudget(s.config, ctx.processEnv);
  const origin = configured.source === 'multimodal_pixel_cache_mb' ? (s.origins.multimodal_pixel_cache_mb ?? null) : null;
  return {
    budgetBytes: stats.budgetBytes,
    heldBytes: stats.heldBytes,
    entries: stats.entries,
    hits: stats.hits,
    misses: stats.misses,
    evictions: stats.evictions,
    tampered: stats.tampered,
    notStored: stats.notStored,
    flushes: stats.flushes,
    configured: { mb: configured.mb, source: configured.source, origin },
    off: stats.budgetBytes > 0 ? null : offReason(state, configured, origin),
  };
}

export function pixelCacheHandlers(state: ConsoleState): HandlerGroup<'pixelCache.flush'> {
  return {
    async 'pixelCache.flush'() {
      const cache = state.running.context.pixelCache;
      if (!cache) throw new ContractError('not_found', 'this router runs without a pixel cache: there is nothing to flush');
      const dropped = cache.flush();
      return { dropped, pixelCache: pixelCacheView(state)! };
    },
  };
}
