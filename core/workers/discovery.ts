// Talking to a worker before any request: which protocol it speaks and what it advertises.
//
// Runtime detection: HealthCheck on every engine at once; a worker that answers exactly one
// is that runtime (the others answer UNIMPLEMENTED). Its model and server info then become
// labels (the one transport cares about is shm_namespace_id). Never throws: an unreachable or
// confused worker comes back with `reachable: false` or an error saying why.
import type { EngineConnection } from '../engines/engine.ts';
import { ENGINE_RUNTIMES, ENGINES } from '../engines/table.ts';
import { describeGrpcError } from '../engines/grpc.ts';
import type { WireRuntime } from '../config/schema.ts';

export interface WorkerProbe {
  url: string;
  reachable: boolean;
  runtime?: WireRuntime;
  healthy?: boolean;
  healthMessage?: string;
  /** Labels as discovery derives them (operator labels are merged over these by the registry). */
  labels: Record<string, string>;
  error?: string;
}

/** Detect the runtime (unless given) and read the worker's labels over short-lived channels. */
export async function probeWorker(url: string, options: { runtime?: WireRuntime; timeoutMs?: number } = {}): Promise<WorkerProbe> {
  const timeoutMs = options.timeoutMs ?? 3000;
  const candidates: readonly WireRuntime[] = options.runtime ? [options.runtime] : ENGINE_RUNTIMES;
  let connections: EngineConnection[];
  try {
    connections = candidates.map((r) => ENGINES[r].connect(url));
  } catch (err) {
    return { url, reachable: false, labels: {}, error: (err as Error).message };
  }
  try {
    const answers = await Promise.allSettled(connections.map((c) => c.health(timeoutMs)));
    const answered = answers.flatMap((a, i) => (a.status === 'fulfilled' ? [{ connection: connections[i]!, health: a.value }] : []));
    if (answered.length === 0) {
      const reasons = answers.map((a, i) => `${candidates[i]}: ${describeGrpcError((a as PromiseRejectedResult).reason)}`);
      return { url, reachable: false, labels: {}, error: `no worker protocol answered HealthCheck (${reasons.join('; ')})` };
    }
    if (answered.length > 1) {
      return {
        url,
        reachable: true,
        labels: {},
        error: `the worker answers the HealthCheck of ${answered.map((a) => a.connection.runtime).join(' and ')}; set runtime in its worker entry`,
      };
    }
    const { connection, health } = answered[0]!;
    try {
      const { labels } = await connection.info(timeoutMs);
      return { url, reachable: true, runtime: connection.runtime, healthy: health.healthy, healthMessage: health.message, labels };
    } catch (err) {
      return {
        url,
        reachable: true,
        runtime: connection.runtime,
        healthy: health.healthy,
        healthMessage: health.message,
        labels: {},
        error: `reading model/server info failed: ${describeGrpcError(err)}`,
      };
    }
  } finally {
    for (const c of connections) c.close();
  }
}
