// The Overview's data (the overview command), refreshed every few seconds while a screen
// that shows it is open and whenever a revision lands.
import { create } from 'zustand';
import type { CommandOutput, Overview } from '../../../core/console/contract.ts';
import { client, describeError } from './client.ts';

interface OverviewState {
  data: Overview | null;
  error: string | null;
  loadedAt: number | null;
  load(): Promise<void>;
}

export const useOverview = create<OverviewState>((set) => ({
  data: null,
  error: null,
  loadedAt: null,
  async load() {
    try {
      const data = await client().call('overview', {});
      set({ data, error: null, loadedAt: Date.now() });
    } catch (err) {
      set({ error: describeError(err) });
    }
  },
}));

/** Flush the pixel cache (pixelCache.flush); the overview on screen takes the cache as the flush left it, then is fetched again. */
export async function flushPixelCache(): Promise<CommandOutput<'pixelCache.flush'>> {
  const result = await client().call('pixelCache.flush', {});
  useOverview.setState((s) => (s.data ? { data: { ...s.data, pixelCache: result.pixelCache } } : {}));
  void useOverview.getState().load();
  return result;
}
