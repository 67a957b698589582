// One handler per command of the console contract (contract.ts), grouped by what they serve:
// handlers/config.ts, handlers/workers.ts, handlers/traffic.ts, handlers/overview.ts,
// handlers/pixel-cache.ts, handlers/requests.ts. Handlers
// get inputs already checked against the contract and return plain data the backend checks
// against the output schema; they throw ContractError (or the config errors the backend
// translates) for what the operator must fix.
import type { CommandName } from './contract.ts';
import { configHandlers } from './handlers/config.ts';
import { overviewHandlers } from './handlers/overview.ts';
import { pixelCacheHandlers } from './handlers/pixel-cache.ts';
import { ratesHandlers } from './handlers/rates.ts';
import { requestsHandlers } from './handlers/requests.ts';
import { trafficHandlers } from './handlers/traffic.ts';
import { workersHandlers } from './handlers/workers.ts';
import type { ConsoleState, HandlerGroup } from './state.ts';

export function createHandlers(state: ConsoleState): HandlerGroup<CommandName> {
  return {
    ...overviewHandlers(state),
    ...configHandlers(state),
    ...workersHandlers(state),
    ...trafficHandlers(state),
    ...pixelCacheHandlers(state),
    ...ratesHandlers(state),
    ...requestsHandlers(state),
  };
}
