// The router's view of its workers: which protocol each speaks, what it advertises (labels
// from GetModelInfo/GetServerInfo, operator labels winning), whether it is healthy, and how
// many requests it has in flight. A periodic HealthCheck marks workers up and down; a worker
// that comes back is discovered again (a restarted worker may have a new /dev/shm token).
// Selection skips unhealthy workers: round_robin, or least_load (fewest in flight).
import type { WorkerSpec } from '../config/schema.ts';
import { connectWorker, healthOf, probeWorker, type WireRuntime, type WorkerClient } from './client.ts';

export interface WorkerState {
  spec: WorkerSpec;
  runtime?: WireRuntime;
  discoveredLabels: Record<string, string>;
  /** Discovered labels with the operator's labels over them. */
  labels: Record<string, string>;
  healthy: boolean;
  inFlight: number;
  lastError?: string;
  lastCheckedAt?: number;
  client?: WorkerClient;
}

export interface RegistryOptions {
  healthIntervalMs: number;
  probeTimeoutMs?: number;
  onChange?: (worker: WorkerState) => void;
}

function runtimeOf(spec: WorkerSpec): WireRuntime | undefined {
  return spec.runtime === 'tokenspeed' || spec.runtime === 'vllm' ? spec.runtime : undefined;
}

export class WorkerRegistry {
  private workers: WorkerState[];
  private timer: NodeJS.Timeout | undefined;
  private cursor = 0;
  private checking = false;

  constructor(
    specs: readonly WorkerSpec[],
    private readonly options: RegistryOptions,
  ) {
    this.workers = specs.map((spec) => this.fresh(spec));
  }

  private fresh(spec: WorkerSpec): WorkerState {
    return { spec, discoveredLabels: {}, labels: { ...spec.labels }, healthy: false, inFlight: 0 };
  }

  list(): readonly WorkerState[] {
    return this.workers;
  }

  /** Detect runtime and labels of one worker; marks it healthy when it answered. */
  async discover(w: WorkerState): Promise<void> {
    if (w.spec.runtime === 'sglang') {
      w.healthy = false;
      w.lastError = 'the sglang runtime is not supported by this router (tokenspeed and vllm are)';
      return;
    }
    const known = w.runtime ?? runtimeOf(w.spec);
    const probe = await probeWorker(w.spec.url, { ...(known ? { runtime: known } : {}), timeoutMs: this.options.probeTimeoutMs ?? 3000 });
    w.lastCheckedAt = Date.now();
    if (!probe.reachable || !probe.runtime || probe.error) {
      w.healthy = false;
      w.lastError = probe.error ?? 'unreachable';
      this.options.onChange?.(w);
      return;
    }
    if (w.runtime !== probe.runtime || !w.client) {
      w.client?.client.close();
      w.client = connectWorker(w.spec.url, probe.runtime);
    }
    w.runtime = probe.runtime;
    w.discoveredLabels = probe.labels;
    w.labels = { ...probe.labels, ...w.spec.labels };
    w.healthy = probe.healthy !== false;
    delete w.lastError;
    if (!w.healthy) w.lastError = `worker reports unhealthy: ${probe.healthMessage ?? ''}`.trim();
    this.options.onChange?.(w);
  }

  async discoverAll(): Promise<void> {
    await Promise.all(this.workers.map((w) => this.discover(w)));
  }

  private async healthCheck(w: WorkerState): Promise<boolean> {
    if (!w.client) return false;
    try {
      return (await healthOf(w.client, this.options.probeTimeoutMs ?? 3000)).healthy;
    } catch {
      return false;
    }
  }

  /** One round of health checks; a worker that was down and answers again is rediscovered. */
  async checkAll(): Promise<void> {
    if (this.checking) return;
    this.checking = true;
    try {
      await Promise.all(
        this.workers.map(async (w) => {
          if (!w.healthy || !w.runtime) return this.discover(w);
          const ok = await this.healthCheck(w);
          w.lastCheckedAt = Date.now();
          if (!ok) {
            w.healthy = false;
            w.lastError = 'HealthCheck failed';
            this.options.onChange?.(w);
          }
        }),
      );
    } finally {
      this.checking = false;
    }
  }

  start(): void {
    this.timer ??= setInterval(() => void this.checkAll(), this.options.healthIntervalMs);
    this.timer.unref();
  }

  /** A request to this worker failed at the transport level: take it out until it answers. */
  markDown(w: WorkerState, reason: string): void {
    w.healthy = false;
    w.lastError = reason;
    this.options.onChange?.(w);
  }

  select(policy: 'round_robin' | 'least_load'): WorkerState | undefined {
    const healthy = this.workers.filter((w) => w.healthy && w.client);
    if (healthy.length === 0) return undefined;
    if (policy === 'least_load') {
      return healthy.reduce((best, w) => (w.inFlight < best.inFlight || (w.inFlight === best.inFlight && w.spec.priority > best.spec.priority) ? w : best));
    }
    const w = healthy[this.cursor % healthy.length]!;
    this.cursor = (this.cursor + 1) % Math.max(1, healthy.length);
    return w;
  }

  /** Swap in a new worker list; entries with the same url keep their discovered state. */
  async replace(specs: readonly WorkerSpec[]): Promise<void> {
    const byUrl = new Map(this.workers.map((w) => [w.spec.url, w]));
    const next = specs.map((spec) => {
      const old = byUrl.get(spec.url);
      if (!old) return this.fresh(spec);
      byUrl.delete(spec.url);
      return { ...old, spec, labels: { ...old.discoveredLabels, ...spec.labels } };
    });
    for (const gone of byUrl.values()) gone.client?.client.close();
    this.workers = next;
    await Promise.all(next.filter((w) => !w.runtime).map((w) => this.discover(w)));
  }

  close(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    for (const w of this.workers) w.client?.client.close();
  }
}
