// A request's lane to its worker: the worker's resolved mode and threshold over the request's
// config snapshot and the decision its next tensors get, by what the router knows of the
// worker now (its labels, whether it answers, a broken SHM lane) and what its engine says of
// its protocol (no /dev/shm lane: runtime_inline_only). Calibration may force the mode and
// threshold; the doctor's probe looks past a broken lane. Evaluated when preprocessing starts
// (to write tensors while they are computed) and again at placement (a lane may break
// meanwhile: the files written for it are then discarded).
import type { WorkerSpec } from '../config/schema.ts';
import type { ConfigSnapshot } from '../config/store.ts';
import { laneFacts } from '../engines/table.ts';
import { transportForWorker, type WorkerTransport } from '../transport/resolve.ts';
import type { WorkerState } from '../workers/registry.ts';
import type { ChatOptions, RouterContext } from './context.ts';

export function laneFor(ctx: RouterContext, snapshot: ConfigSnapshot, spec: WorkerSpec, worker: WorkerState, options: ChatOptions): WorkerTransport {
  const forced = options.transport;
  // A forced mode (calibration) replaces the worker's resolved mode and threshold; the
  // decision still checks /dev/shm and the worker's token as for any request.
  const effectiveSpec = forced ? { ...spec, multimodal_tensor_transport: forced.mode, multimodal_shm_min_bytes: forced.minBytes } : spec;
  return transportForWorker({
    spec: effectiveSpec,
    config: snapshot.config,
    env: snapshot.env,
    labels: worker.labels,
    reachable: worker.healthy,
    host: ctx.host,
    runtime: laneFacts(worker.runtime),
    shmLaneBroken: options.probe ? undefined : worker.shmLane?.error,
  });
}
