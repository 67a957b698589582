// Can requests succeed now? The one owner of the router's critical states (docs/router.md,
// "Health and critical states"), computed from the state that decides: for the serving mode of
// the running revision, each role a request needs whose workers are all out of selection
// (the registry's rule, inRotation: the router would answer 503 "no healthy <role> worker"),
// and the recent requests all failing (the last FAILING_REQUESTS, all within
// FAILING_WINDOW_MS, failed on the router's side: 5xx, or a stream cut short). /health reports
// them (O(workers), no I/O), the console's overview carries them to the banner every screen
// shows, and the console's verdicts and Doctor's advice follow from the same registry state.
import { ROLES_ROUTED, type RouterConfig, type WorkerSpec, type WorkerType } from '../config/schema.ts';
import type { RequestLog, RequestSummary } from '../telemetry/requests.ts';
import { inRotation, outOfRotationReason, type WorkerRegistry } from '../workers/registry.ts';
import { FAILING_REQUESTS, FAILING_WINDOW_MS, type CriticalState, type HealthStatus } from './critical-schema.ts';

/** A failure on the router's side (not the client's): a 5xx, or an answer cut short after it began. 499 (the client went away) and 4xx are the client's. */
export function failedOnOurSide(s: Pick<RequestSummary, 'status' | 'error'>): boolean {
  return s.status >= 500 || (s.status < 400 && s.error !== undefined);
}

interface Outcome {
  time: number;
  status: number;
  failed: boolean;
  worker?: string;
  error?: string;
}

/**
 * The last FAILING_REQUESTS requests' outcomes (a ring fed by the request log), and a call to
 * `onChange` listeners when "they all failed" turns on or off with a request's end (its turning
 * off as the window passes is seen by whoever asks next: /health, the overview's tick).
 */
export class RecentOutcomes {
  private readonly ring: Outcome[] = [];
  private failing = false;
  private readonly listeners = new Set<() => void>();

  constructor(
    log: RequestLog | undefined,
    private readonly now: () => number = Date.now,
  ) {
    // The console's own requests (a test tensor to a drained worker, calibration) say nothing of the API's.
    log?.subscribe((s) => {
      if (s.source !== 'console') this.add(s);
    });
  }

  add(s: RequestSummary): void {
    this.ring.push({
      time: s.time,
      status: s.status,
      failed: failedOnOurSide(s),
      ...(s.worker ? { worker: s.worker } : {}),
      ...(s.error ? { error: s.error } : {}),
    });
    if (this.ring.length > FAILING_REQUESTS) this.ring.shift();
    const failing = this.allFailing() !== undefined;
    if (failing !== this.failing) {
      this.failing = failing;
      for (const listener of this.listeners) {
        try {
          listener();
        } catch {
          /* a listener's failure is its own; the outcome is kept */
        }
      }
    }
  }

  /** The failed requests, oldest first, when the last FAILING_REQUESTS all failed within FAILING_WINDOW_MS; else undefined. */
  allFailing(): readonly Outcome[] | undefined {
    if (this.ring.length < FAILING_REQUESTS || !this.ring.every((o) => o.failed)) return undefined;
    return this.ring[0]!.time >= this.now() - FAILING_WINDOW_MS ? this.ring : undefined;
  }

  /** Hear when "every recent request failed" turns on or off with a request's end; returns the unsubscribe function. */
  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}

const ROLE_WORDS: Record<WorkerType, string> = { regular: 'worker', encode: 'encode worker', prefill: 'prefill worker', decode: 'decode worker' };

/** A role of `config`'s serving mode with no worker a request can be sent to. */
function roleDown(registry: WorkerRegistry, config: RouterConfig, role: WorkerType): CriticalState | undefined {
  const specs: WorkerSpec[] = config.workers.filter((w) => w.worker_type === role);
  if (specs.some((spec) => inRotation(registry.get(spec.url)))) return undefined;
  const images = role === 'encode';
  const fails = images ? 'every request with an image fails with 503' : 'every request fails with 503';
  const workers = specs.map((spec) => ({ url: spec.url, error: outOfRotationReason(registry.get(spec.url)) ?? 'in rotation' }));
  const none = specs.length === 0;
  // Drained by the operator while healthy: returning one is the quickest remedy.
  const drainedHealthy = specs.filter((spec) => {
    const w = registry.get(spec.url);
    return w !== undefined && !w.removed && w.healthy && w.drainedAt !== undefined;
  }).length;
  const drained = !none && drainedHealthy === specs.length;
  return {
    kind: 'no_healthy_worker',
    role,
    fails: images ? 'image_requests' : 'every_request',
    workers,
    message: none
      ? `no ${role === 'regular' ? 'regular worker' : ROLE_WORDS[role]} is configured: ${fails}`
      : `no ${drained ? `${ROLE_WORDS[role]} in rotation (every one is drained)` : `healthy ${ROLE_WORDS[role]}`}: ${fails} (${workers.map((w) => `${w.url}: ${w.error}`).join('; ')})`,
    remedy: drained
      ? `return a drained ${ROLE_WORDS[role]} to rotation (Workers)`
      : drainedHealthy > 0
        ? `return the drained ${ROLE_WORDS[role]} to rotation (Workers), or restart or bring back the others (Doctor shows each one's checks)`
        : none
          ? `add a${role === 'encode' ? 'n' : ''} ${ROLE_WORDS[role]} (Workers), or change the serving mode (disaggregation)`
          : `restart or bring back the ${ROLE_WORDS[role]}${specs.length === 1 ? '' : 's'} (Doctor shows each one's checks); requests succeed again as soon as one answers its health check`,
  };
}

export interface CriticalSources {
  store: { current(): { config: RouterConfig } };
  registry: WorkerRegistry;
  outcomes?: RecentOutcomes | undefined;
}

/** Every critical state now: the roles of the running revision's serving mode with no healthy worker, then every recent request failing. */
export function criticalStates(ctx: CriticalSources): CriticalState[] {
  const config = ctx.store.current().config;
  const states: CriticalState[] = [];
  for (const role of ROLES_ROUTED[config.disaggregation]) {
    const down = roleDown(ctx.registry, config, role);
    if (down) states.push(down);
  }
  const failed = ctx.outcomes?.allFailing();
  if (failed) {
    const latest = failed.at(-1)!;
    const workers = [...new Set(failed.flatMap((o) => (o.worker ? [o.worker] : [])))];
    states.push({
      kind: 'requests_failing',
      role: null,
      fails: 'every_request',
      workers: workers.map((url) => ({ url, error: [...failed].reverse().find((o) => o.worker === url)?.error ?? 'failed' })),
      message: `every recent request failed: the last ${FAILING_REQUESTS}, within ${FAILING_WINDOW_MS / 1000} s; the latest with ${latest.status}${latest.error ? `: ${latest.error}` : ''}`,
      remedy: "see the latest request's error (Traffic shows each failed request); Doctor checks a worker step by step",
    });
  }
  return states;
}

/** /health's status for these states, and its HTTP status: 503 only when no request can succeed (a role every request needs has no healthy worker), as load balancers take 503 for "send nothing here". */
export function healthStatus(states: readonly CriticalState[]): { status: HealthStatus; httpStatus: 200 | 503 } {
  if (states.some((s) => s.kind === 'no_healthy_worker' && s.fails === 'every_request')) return { status: 'unavailable', httpStatus: 503 };
  return states.length > 0 ? { status: 'degraded', httpStatus: 200 } : { status: 'ok', httpStatus: 200 };
}
