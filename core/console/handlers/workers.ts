// The workers commands: the list with each worker's health, token, traffic share, resolved
// transport and verdict; add, update and remove (each an apply of the whole configuration);
// the `auto` checklist (diagnose.ts); and the reset of a broken SHM lane, refused while the
// checklist shows the next request would break it again; drain and return to rotation (operator
// state of this run, not an apply: docs/console.md, "Draining a worker").
import { WorkerSpecSchema, type RouterConfig, type WorkerSpec } from '../../config/schema.ts';
import type { CallMeta } from '../backend.ts';
import { ContractError } from '../contract.ts';
import { diagnoseWorker } from '../diagnose.ts';
import { findWorker, type ConsoleState, type HandlerGroup } from '../state.ts';
import { trafficShares, workerTransport, workerView } from '../views.ts';

type WorkersCommand =
  | 'workers.list'
  | 'workers.add'
  | 'workers.update'
  | 'workers.remove'
  | 'workers.resetShmLane'
  | 'workers.diagnose'
  | 'workers.drain'
  | 'workers.returnToRotation';

export function workersHandlers(state: ConsoleState): HandlerGroup<WorkersCommand> {
  const { store } = state;
  const ctx = state.running.context;
  const withWorkers = (workers: WorkerSpec[]): RouterConfig => ({ ...store.current().config, workers });
  /** The registry's entry of a worker of the running configuration (a removed one still finishing requests is not one). */
  const configuredWorker = (url: string) => {
    findWorker(store.current(), url);
    const w = ctx.registry.get(url);
    if (!w) throw new ContractError('not_found', `no worker ${url} in the registry`, 'url');
    return w;
  };

  const handlers = {
    async 'workers.list'() {
      const s = store.current();
      const shares = trafficShares(ctx.events.recent());
      const views = [...ctx.registry.list(), ...ctx.registry.drainingWorkers()].map((w) => workerView(state, s, w, shares));
      return { revision: s.revision, workers: views };
    },

    async 'workers.add'(input: { worker: Record<string, unknown>; expectedRevision: number }, meta: CallMeta) {
      const s = store.current();
      const spec = WorkerSpecSchema.parse(input.worker);
      if (s.config.workers.some((w) => w.url === spec.url))
        throw new ContractError('invalid_config', `worker ${spec.url} is already configured; edit it instead`, 'worker.url');
      // The embedded reference worker stands in only while no worker is configured.
      const embedded = state.embeddedUrls();
      return state.apply(withWorkers([...s.config.workers.filter((w) => !embedded.has(w.url)), spec]), input.expectedRevision, meta.client);
    },

    async 'workers.update'(input: { url: string; worker: Record<string, unknown>; expectedRevision: number }, meta: CallMeta) {
      const s = store.current();
      findWorker(s, input.url);
      const spec = WorkerSpecSchema.parse(input.worker);
      if (spec.url !== input.url && s.config.workers.some((w) => w.url === spec.url))
        throw new ContractError('invalid_config', `worker ${spec.url} is already configured`, 'worker.url');
      return state.apply(withWorkers(s.config.workers.map((w) => (w.url === input.url ? spec : w))), input.expectedRevision, meta.client);
    },

    async 'workers.remove'(input: { url: string; expectedRevision: number }, meta: CallMeta) {
      const s = store.current();
      findWorker(s, input.url);
      return state.apply(withWorkers(s.config.workers.filter((w) => w.url !== input.url)), input.expectedRevision, meta.client);
    },

    async 'workers.resetShmLane'(input: { url: string; force?: boolean }) {
      const w = ctx.registry.get(input.url);
      if (!w) throw new ContractError('not_found', `no worker ${input.url} in the registry`, 'url');
      const s = store.current();
      const spec = findWorker(s, input.url);
      if (w.shmLane === undefined) return { url: input.url, wasBroken: false, steps: [] };
      const { steps } = await diagnoseWorker(state, input.url);
      // Refused only when the next request would break the lane again: it would attempt
      // /dev/shm (its mode and tokens say so once the lane is reset) and the worker failed to
      // read the probe file just now. The lane's own step aside (it is what is reset), every
      // failing check is named.
      const next = workerTransport(state, spec, s.config, s, s.origins, w, true).decision;
      const probe = steps.find((st) => st.id === 'probe_file_read');
      if (next.shmEnabled && probe?.ok === false && !input.force) {
        const failing = steps.filter((st) => st.ok === false && st.id !== 'shm_lane');
        throw new ContractError(
          'checks_failed',
          `not reset: ${failing.map((st) => `${st.label} (${st.detail})`).join('; ')}. The next request would break the lane again; fix these first, or reset anyway`,
          'url',
          [],
          { failing },
        );
      }
      ctx.registry.resetShmLane(w);
      return { url: input.url, wasBroken: true, steps };
    },

    async 'workers.drain'(input: { url: string }) {
      const w = configuredWorker(input.url);
      ctx.registry.drain(w);
      return { url: input.url, drainedAt: w.drainedAt!, inFlight: w.inFlight };
    },

    async 'workers.returnToRotation'(input: { url: string }) {
      const w = configuredWorker(input.url);
      const wasDrained = w.drainedAt !== undefined;
      ctx.registry.returnToRotation(w);
      return { url: input.url, wasDrained, inFlight: w.inFlight };
    },

    async 'workers.diagnose'(input: { url: string }) {
      findWorker(store.current(), input.url);
      return diagnoseWorker(state, input.url);
    },
  };
  return handlers;
}
