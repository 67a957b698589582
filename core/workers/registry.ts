// The router's view of its workers: which protocol each speaks, what it advertises (labels
// from model/server info, operator labels winning), whether it is healthy, and how many
// requests it has in flight. A periodic HealthCheck marks workers up and down; a worker that
// comes back is discovered again (a restarted worker may have a new /dev/shm token).
//
// reconcile() follows an applied configuration: an added worker is discovered and
// health-checked before it can be selected; a removed worker gets no new requests, its
// in-flight requests finish, then its channel closes; a changed entry with the same url
// (labels, priority, overrides) takes effect on the next request without reconnecting.
// Selection is among the workers of the request's own config snapshot, so a request never
// picks a worker its revision does not have: round_robin, or least_load (fewest in flight,
// then the higher priority).
//
// An operator can drain a worker (drain()): it takes no new request, under disaggregation no
// leg of one, and is not counted as serving capacity (/health), while its in-flight requests
// finish; returnToRotation() undoes it. Draining is state of this run, not configuration: it
// is not written anywhere, so a restart, or removing the url and adding it again, puts the
// worker back in rotation (docs/console.md, "Draining a worker").
//
// At most MAX_CONCURRENT_PROBES discoveries and health checks run at once: each opens
// channels (one per runtime of the engine table for a worker whose runtime is not declared),
// and a list applied in one go must not open them all.
import type { WorkerSpec } from '../config/schema.ts';
import type { EngineConnection } from '../engines/engine.ts';
import { describeGrpcError } from '../engines/grpc.ts';
import { declaredRuntime, engineFor } from '../engines/table.ts';
import { type WireRuntime } from '../config/schema.ts';
import { probeWorker } from './discovery.ts';

export interface WorkerState {
  /** The entry of the newest applied revision that has this url. */
  spec: WorkerSpec;
  runtime?: WireRuntime;
  connection?: EngineConnection;
  discoveredLabels: Record<string, string>;
  /** Discovered labels with the operator's labels over them. */
  labels: Record<string, string>;
  healthy: boolean;
  inFlight: number;
  lastError?: string;
  lastCheckedAt?: number;
  /** No longer configured: takes no new requests and closes when the last one finishes. */
  removed: boolean;
  /** The worker could not read our /dev/shm files: what it said, and when. Cleared on rediscovery or by the operator. */
  shmLane?: { error: string; since: number };
  /** Drained by the operator (when, Date.now()): no new request is routed to it; its in-flight ones finish. Until returnToRotation(), or the end of this run. */
  drainedAt?: number;
  /** When (performance.now()) the worker last answered a call of a request (a Generate message, an Encode reply): proof it is alive when a HealthCheck is not answered in time. */
  lastAnsweredAt?: number;
}

/**
 * The one rule of who may be given a new request (or a leg of one): known, configured, healthy,
 * connected and not drained by the operator. Selection, the roles of disaggregation, the
 * critical states and the console's verdicts all ask this.
 */
export function inRotation(w: WorkerState | undefined): w is WorkerState & { connection: EngineConnection } {
  return w !== undefined && !w.removed && w.healthy && w.connection !== undefined && w.drainedAt === undefined;
}

/** Why a worker is not given requests, in the words of a 503's reasons (undefined: it is in rotation). */
export function outOfRotationReason(w: WorkerState | undefined): string | undefined {
  if (w === undefined) return 'not yet discovered';
  if (inRotation(w)) return undefined;
  if (w.removed) return 'removed from the configuration';
  if (w.drainedAt !== undefined) return 'drained by the operator (out of rotation)';
  return w.lastError ?? (w.healthy ? 'no connection yet' : 'not yet discovered');
}

export interface RegistryOptions {
  healthIntervalMs: number;
  probeTimeoutMs?: number;
  onChange?: (worker: WorkerState) => void;
}

/**
 * `connection` with every answer a request gets from the worker noted (`onAnswer`): each
 * Generate message and its end, an Encode reply. A worker busy with large inline tensors can
 * leave a HealthCheck unanswered past its timeout (its messages queue behind them on the one
 * channel) while it answers requests all along; those answers say it is alive.
 */
export function withAnswerClock(connection: EngineConnection, onAnswer: () => void): EngineConnection {
  const encode = connection.encode?.bind(connection);
  return {
    runtime: connection.runtime,
    url: connection.url,
    generate: (request, options, sink) =>
      connection.generate(request, options, {
        event: (ev) => (onAnswer(), sink.event(ev)),
        failure: (f) => sink.failure(f),
        end: () => (onAnswer(), sink.end()),
      }),
    abort: (requestId, reason) => connection.abort(requestId, reason),
    health: (timeoutMs) => connection.health(timeoutMs),
    info: (timeoutMs) => connection.info(timeoutMs),
    close: () => connection.close(),
    ...(encode
      ? {
          encode: (request, options) => {
            const call = encode(request, options);
            return { done: call.done.then((r) => ('accepted' in r && onAnswer(), r)), cancel: call.cancel };
          },
        }
      : {}),
  };
}

/** Discoveries and health checks in flight at once. */
export const MAX_CONCURRENT_PROBES = 16;

/**
 * `fn` over `items`, at most `limit` at a time; settles when all have. Each call starts in a
 * task of its own (setImmediate): opening a worker's channels holds the event loop, and many
 * of them started in one tick held /health noticeably (measured:
 * docs/performance.md, "Opening workers' channels in one tick").
 */
async function eachBounded<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) {
        const item = items[next++]!;
        await new Promise<void>((resolve) => setImmediate(resolve));
        await fn(item);
      }
    }),
  );
}

export class WorkerRegistry {
  private workers: WorkerState[];
  private byUrl: Map<string, WorkerState>;
  private readonly draining = new Set<WorkerState>();
  private readonly discovering = new Map<WorkerState, Promise<void>>();
  private timer: NodeJS.Timeout | undefined;
  private intervalMs: number;
  private readonly cursors = new Map<string, number>();
  private checking = false;
  private closed = false;
  private readonly watchers = new Set<(worker: WorkerState) => void>();

  constructor(
    specs: readonly WorkerSpec[],
    private readonly options: RegistryOptions,
  ) {
    this.workers = specs.map((spec) => this.fresh(spec));
    this.byUrl = new Map(this.workers.map((w) => [w.spec.url, w]));
    this.intervalMs = options.healthIntervalMs;
  }

  /** Hear of every change to a worker's state (health, labels, lane); returns the unsubscribe function. */
  watch(listener: (worker: WorkerState) => void): () => void {
    this.watchers.add(listener);
    return () => this.watchers.delete(listener);
  }

  private changed(w: WorkerState): void {
    this.options.onChange?.(w);
    for (const listener of this.watchers) {
      try {
        listener(w);
      } catch {
        /* a watcher's failure is its own */
      }
    }
  }

  private fresh(spec: WorkerSpec): WorkerState {
    return { spec, discoveredLabels: {}, labels: { ...spec.labels }, healthy: false, inFlight: 0, removed: false };
  }

  /** The configured workers (removed ones that are still finishing requests are not listed). */
  list(): readonly WorkerState[] {
    return this.workers;
  }

  /** Removed workers whose in-flight requests have not finished yet. */
  drainingWorkers(): readonly WorkerState[] {
    return [...this.draining];
  }

  /** The runtime discovery found on each configured worker it reached, by url. */
  detectedRuntimes(): Map<string, WireRuntime> {
    const out = new Map<string, WireRuntime>();
    for (const w of this.workers) if (w.runtime !== undefined) out.set(w.spec.url, w.runtime);
    return out;
  }

  get(url: string): WorkerState | undefined {
    return this.byUrl.get(url);
  }

  /** Detect runtime and labels of one worker; marks it healthy when it answered. One at a time per worker. */
  discover(w: WorkerState): Promise<void> {
    const running = this.discovering.get(w);
    if (running) return running;
    const done = this.discoverNow(w).finally(() => this.discovering.delete(w));
    this.discovering.set(w, done);
    return done;
  }

  private async discoverNow(w: WorkerState): Promise<void> {
    const known = declaredRuntime(w.spec.runtime) ?? w.runtime;
    const probe = await probeWorker(w.spec.url, { ...(known ? { runtime: known } : {}), timeoutMs: this.options.probeTimeoutMs ?? 3000 });
    w.lastCheckedAt = Date.now();
    if (w.removed || this.closed) return;
    if (!probe.reachable || !probe.runtime || probe.error) {
      w.healthy = false;
      w.lastError = probe.error ?? 'unreachable';
      this.changed(w);
      return;
    }
    if (w.runtime !== probe.runtime || !w.connection) {
      w.connection?.close();
      w.connection = withAnswerClock(engineFor(probe.runtime).connect(w.spec.url), () => (w.lastAnsweredAt = performance.now()));
    }
    // A rediscovered worker (restarted, moved, fixed) gets its /dev/shm lane back.
    if (!w.healthy) delete w.shmLane;
    w.runtime = probe.runtime;
    w.discoveredLabels = probe.labels;
    w.labels = { ...probe.labels, ...w.spec.labels };
    w.healthy = probe.healthy !== false;
    delete w.lastError;
    if (!w.healthy) w.lastError = `worker reports unhealthy: ${probe.healthMessage ?? ''}`.trim();
    this.changed(w);
  }

  async discoverAll(): Promise<void> {
    await eachBounded(this.workers, MAX_CONCURRENT_PROBES, (w) => this.discover(w));
  }

  /** The worker's HealthCheck: its answer, or 'no answer' (an error, or no reply within the probe timeout), with what to tell the operator. */
  private async healthCheck(w: WorkerState): Promise<{ answer: 'healthy' | 'unhealthy' | 'no answer'; error?: string }> {
    if (!w.connection) return { answer: 'no answer', error: 'HealthCheck failed: no connection' };
    try {
      const reply = await w.connection.health(this.options.probeTimeoutMs ?? 3000);
      return reply.healthy ? { answer: 'healthy' } : { answer: 'unhealthy', error: `worker reports unhealthy: ${reply.message}`.trim() };
    } catch (err) {
      return { answer: 'no answer', error: `HealthCheck failed: ${describeGrpcError(err)}` };
    }
  }

  /**
   * What a healthy worker advertises, read again: a worker can restart on its address between
   * two health checks (its channel reconnects unseen), and the new process may advertise
   * another /dev/shm token, which must be honoured from the next request on. A changed token
   * is another instance, so a broken SHM lane is judged afresh. An answer that fails changes nothing.
   */
  private async refreshLabels(w: WorkerState): Promise<void> {
    let labels: Record<string, string>;
    try {
      labels = (await w.connection!.info(this.options.probeTimeoutMs ?? 3000)).labels;
    } catch {
      // No answer (a timeout, a worker restarting): the labels read last stand until a later
      // check reads them; whether the worker is healthy is the HealthCheck's to say.
      return;
    }
    if (w.removed || this.closed || !w.healthy || JSON.stringify(labels) === JSON.stringify(w.discoveredLabels)) return;
    if (labels.shm_namespace_id !== w.discoveredLabels.shm_namespace_id) delete w.shmLane;
    w.discoveredLabels = labels;
    w.labels = { ...labels, ...w.spec.labels };
    this.changed(w);
  }

  /**
   * One round of health checks; a worker that was down and answers again is rediscovered, one
   * that answers has its labels read again. A check with no answer takes a worker out only when
   * the worker answered no request's call while it ran: under load (128 clients sending 1080p
   * images inline on two cores) HealthCheck timed out on all three workers of the reliability
   * suite while each kept answering, and the router refused requests with 503 "no healthy
   * worker". A worker that is hung or gone answers nothing, and is taken out by the first
   * check during which it answered nothing; one that answers it is unhealthy is taken at its word.
   */
  async checkAll(): Promise<void> {
    if (this.checking) return;
    this.checking = true;
    try {
      await eachBounded(this.workers, MAX_CONCURRENT_PROBES, async (w) => {
        if (!w.healthy || !w.runtime) return this.discover(w);
        const startedAt = performance.now();
        const { answer, error } = await this.healthCheck(w);
        w.lastCheckedAt = Date.now();
        if (answer === 'no answer' && (w.lastAnsweredAt ?? 0) >= startedAt) return;
        const ok = answer === 'healthy';
        if (!ok && !w.removed) {
          w.healthy = false;
          w.lastError = error ?? 'HealthCheck failed';
          this.changed(w);
        } else if (ok) await this.refreshLabels(w);
      });
    } finally {
      this.checking = false;
    }
  }

  start(): void {
    if (this.closed || this.timer) return;
    this.timer = setInterval(() => void this.checkAll(), this.intervalMs);
    this.timer.unref();
  }

  /** A new health-check interval, from the next tick on. */
  setHealthInterval(ms: number): void {
    if (ms === this.intervalMs) return;
    this.intervalMs = ms;
    if (this.timer) {
      clearInterval(this.timer);
      this.timer = undefined;
      this.start();
    }
  }

  /** The worker failed to read a request's /dev/shm files: its requests go inline until the lane is reset. */
  breakShmLane(w: WorkerState, error: string): void {
    w.shmLane = { error, since: Date.now() };
    this.changed(w);
  }

  /** The operator says the worker can read our files again. */
  resetShmLane(w: WorkerState): void {
    delete w.shmLane;
    this.changed(w);
  }

  /** A request to this worker failed at the transport level: take it out until it answers. */
  markDown(w: WorkerState, reason: string): void {
    w.healthy = false;
    w.lastError = reason;
    this.changed(w);
  }

  /**
   * A worker for a request whose config snapshot lists `eligible` (its regular workers),
   * with the snapshot's entry for it; undefined when none of them is healthy.
   */
  select(
    policy: 'round_robin' | 'least_load',
    eligible: readonly WorkerSpec[],
    role: WorkerSpec['worker_type'] = 'regular',
  ): { state: WorkerState; spec: WorkerSpec } | undefined {
    const candidates: Array<{ state: WorkerState; spec: WorkerSpec }> = [];
    for (const spec of eligible) {
      const state = this.get(spec.url);
      if (inRotation(state)) candidates.push({ state, spec });
    }
    if (candidates.length === 0) return undefined;
    if (policy === 'least_load') {
      return candidates.reduce((best, c) =>
        c.state.inFlight < best.state.inFlight || (c.state.inFlight === best.state.inFlight && c.spec.priority > best.spec.priority) ? c : best,
      );
    }
    // Each role takes its turns on its own: a PD request picks a prefill and a decode worker.
    const cursor = this.cursors.get(role) ?? 0;
    const pick = candidates[cursor % candidates.length]!;
    this.cursors.set(role, (cursor + 1) % candidates.length);
    return pick;
  }

  /** The operator takes `w` out of rotation: no new request from now on, its in-flight ones finish. Draining a drained worker keeps its first time. */
  drain(w: WorkerState): void {
    if (w.drainedAt !== undefined) return;
    w.drainedAt = Date.now();
    this.changed(w);
  }

  /** The operator puts `w` back in rotation: from the next request on it is selected again (when healthy). */
  returnToRotation(w: WorkerState): void {
    if (w.drainedAt === undefined) return;
    delete w.drainedAt;
    this.changed(w);
  }

  /** A request starts on `w`. */
  acquire(w: WorkerState): void {
    w.inFlight += 1;
  }

  /** A request on `w` is over; a removed worker closes with its last request. */
  release(w: WorkerState): void {
    w.inFlight -= 1;
    if (w.removed && w.inFlight === 0) this.retire(w);
  }

  private retire(w: WorkerState): void {
    this.draining.delete(w);
    w.connection?.close();
    delete w.connection;
    w.healthy = false;
  }

  /**
   * Follow a new worker list. Resolves when every added worker has been discovered (healthy
   * or with the reason it is not); the swap itself happens before the first await.
   */
  reconcile(specs: readonly WorkerSpec[]): Promise<void> {
    const byUrl = new Map(this.workers.map((w) => [w.spec.url, w] as const));
    for (const w of this.draining) if (!byUrl.has(w.spec.url)) byUrl.set(w.spec.url, w);
    const added: WorkerState[] = [];
    const next = specs.map((spec) => {
      const existing = byUrl.get(spec.url);
      if (!existing) {
        const w = this.fresh(spec);
        added.push(w);
        return w;
      }
      byUrl.delete(spec.url);
      if (existing.removed) {
        existing.removed = false;
        // Removed and added again: back in rotation, as a worker added anew is (its drain was of the removed entry).
        delete existing.drainedAt;
        this.draining.delete(existing);
      }
      const runtimeChanged =
        declaredRuntime(spec.runtime) !== undefined && existing.runtime !== undefined && declaredRuntime(spec.runtime) !== existing.runtime;
      existing.spec = spec;
      existing.labels = { ...existing.discoveredLabels, ...spec.labels };
      if (runtimeChanged) {
        // Another protocol on the same url: not selectable until discovered as that runtime.
        existing.healthy = false;
        added.push(existing);
      }
      return existing;
    });
    for (const gone of byUrl.values()) {
      if (gone.removed) continue;
      gone.removed = true;
      if (gone.inFlight === 0) this.retire(gone);
      else this.draining.add(gone);
    }
    this.workers = next;
    this.byUrl = new Map(next.map((w) => [w.spec.url, w]));
    return eachBounded(added, MAX_CONCURRENT_PROBES, (w) => this.discover(w));
  }

  close(): void {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    for (const w of [...this.workers, ...this.draining]) w.connection?.close();
    this.draining.clear();
  }
}
