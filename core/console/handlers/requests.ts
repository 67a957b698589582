// The Requests screen's command: the kept request records (core/telemetry/requests.ts), filtered,
// newest first, a bounded page at a time. One request by id is traffic.request; the live
// updates are the requests stream (feeds.ts RequestsFeed).
import { MAX_REQUEST_PAGE, type RequestFilterInput } from '../contract.ts';
import { rowOf } from '../feeds.ts';
import type { ConsoleState, HandlerGroup } from '../state.ts';

export function requestsHandlers(state: ConsoleState): HandlerGroup<'requests.list'> {
  const ctx = state.running.context;
  return {
    async 'requests.list'(input: RequestFilterInput & { limit?: number; before?: string }) {
      const log = ctx.requests;
      if (!log) return { requests: [], matched: 0, kept: 0, capacity: 0, workers: [], models: [] };
      const { limit, before, ...filter } = input;
      const page = log.query(filter, limit ?? MAX_REQUEST_PAGE, before);
      return { requests: page.requests.map(rowOf), matched: page.matched, kept: log.size, capacity: log.capacity, ...log.facets() };
    },
  };
}
