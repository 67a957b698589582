// Requests/s, error rate and latency per worker and leg (core/telemetry/rates.ts) as the
// console's Workers screen plots them (docs/console.md, "Rates and latency").
import { RequestRates } from '../../telemetry/rates.ts';
import type { ConsoleState, HandlerGroup } from '../state.ts';

export function ratesHandlers(state: ConsoleState): HandlerGroup<'metrics.rates'> {
  return {
    async 'metrics.rates'({ window }) {
      // A router built without a request log counts nothing: no series, as with no traffic.
      return (state.running.context.rates ?? new RequestRates()).read(window);
    },
  };
}
