// Requests/s, error rate and latency per worker and leg (metrics.rates) over the window the
// operator chose, fetched again while the Workers screen's panel is open (docs/console.md,
// "Rates and latency").
import { create } from 'zustand';
import { RATE_WINDOWS, type Rates, type RateWindow } from '../../../core/console/contract.ts';
import { client, describeError } from './client.ts';

interface RatesState {
  window: RateWindow;
  /** The rates of `window` (never another window's, even while its answer is on the way). */
  data: Rates | null;
  error: string | null;
  load(): Promise<void>;
  setWindow(window: RateWindow): void;
}

export const useRates = create<RatesState>((set, get) => ({
  window: '1m',
  data: null,
  error: null,
  async load() {
    const window = get().window;
    try {
      const data = await client().call('metrics.rates', { window });
      // An answer for a window the operator has since left is not shown.
      if (get().window === window) set({ data, error: null });
    } catch (err) {
      if (get().window === window) set({ error: describeError(err) });
    }
  },
  setWindow(window) {
    if (window === get().window) return;
    set({ window, data: null, error: null });
    void get().load();
  },
}));

/** How often the panel fetches the rates again: each second's bucket for the minute, every 5 s for the longer windows. */
export const refreshMs = (window: RateWindow): number => Math.min(RATE_WINDOWS[window].bucketMs, 5000);
