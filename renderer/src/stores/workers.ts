// The workers as the router sees them (workers.list): spec, health, token match, the full
// resolution with provenance and the decision for the next request.
import { create } from 'zustand';
import type { CommandOutput, WorkerView } from '../../../core/console/contract.ts';
import { client, describeError } from './client.ts';

interface WorkersState {
  workers: WorkerView[];
  revision: number | null;
  loaded: boolean;
  error: string | null;
  load(): Promise<void>;
}

export const useWorkers = create<WorkersState>((set) => ({
  workers: [],
  revision: null,
  loaded: false,
  error: null,
  async load() {
    try {
      const r = await client().call('workers.list', {});
      set({ workers: r.workers, revision: r.revision, loaded: true, error: null });
    } catch (err) {
      set({ error: describeError(err), loaded: true });
    }
  },
}));

/** Whether a worker entry is the router's embedded reference worker (it stands in while none is configured). */
export function isEmbedded(w: Pick<WorkerView, 'embedded'>): boolean {
  return w.embedded === true;
}

/**
 * Tell the router a worker can read our /dev/shm files again (workers.resetShmLane), then
 * refresh the table. The router runs the auto checklist first and refuses while a check fails
 * (a ContractError `checks_failed` naming them, `details.failing`), unless `force`.
 */
export async function resetShmLane(url: string, force = false): Promise<CommandOutput<'workers.resetShmLane'>> {
  try {
    return await client().call('workers.resetShmLane', { url, ...(force ? { force } : {}) });
  } finally {
    await useWorkers.getState().load();
  }
}

/**
 * Take a worker out of rotation (workers.drain: no new request, its in-flight ones finish) or put
 * it back (workers.returnToRotation), then refresh the table. Operator state of the running
 * router, not configuration: a restart puts every worker back in rotation.
 */
export async function setRotation(url: string, drained: boolean): Promise<void> {
  try {
    if (drained) await client().call('workers.drain', { url });
    else await client().call('workers.returnToRotation', { url });
  } finally {
    await useWorkers.getState().load();
  }
}
