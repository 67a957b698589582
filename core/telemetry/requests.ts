// The recent requests, by id: what each was sent with and how it ended, the record its log line
// is made from, kept for the console (a request's details: the sampling its worker was sent,
// how its KV went under sequential PD). A bounded map in arrival order: the oldest goes when
// it is full.
import type { LegName, TensorEvent, TrafficSource } from '../transport/event-schema.ts';
import type { TensorPath } from '../transport/vocabulary.ts';

/** One worker call of a request: a regular request's one call, or under disaggregation an image's encode, the prefill, the decode. */
export interface RequestLeg {
  leg: LegName;
  worker: string;
  /** Milliseconds from the request's arrival to the leg's start. */
  startMs: number;
  /** Milliseconds the leg took: to its last message, or to its failure. */
  durationMs: number;
  /** Milliseconds from the leg's start to the worker's first token (legs that stream tokens). */
  firstTokenMs?: number;
  /** What went wrong, in words, when this leg failed. */
  error?: string;
  /** Milliseconds from the leg's start to its request built and sent (its tensors placed). */
  placeMs?: number;
  /** An encode leg's image (its index in the request). */
  image?: number;
  /** 2: the inline retry after the worker could not read attempt 1's /dev/shm files. */
  attempt?: number;
  /** Why the leg was ended before it finished, when that was not its own failure (another leg failed, the client went away). */
  stopped?: string;
}

/** One span of the request's own time (core/router/timing.ts names them: body, fetch, preprocess, prompt, place, worker). */
export interface RequestPhase {
  name: string;
  /** Milliseconds from the request's arrival. */
  startMs: number;
  durationMs: number;
}

export interface RequestSummary {
  id: string;
  /** Unix milliseconds, when it ended. */
  time: number;
  status: number;
  /** Milliseconds from arrival to the end of its response. */
  durationMs?: number;
  model?: string;
  worker?: string;
  /** Every worker call it made, in the order they started (empty when it failed before reaching a worker). */
  legs?: RequestLeg[];
  /** The sampling the worker that samples was sent (engines/sampling.ts samplingSummary). */
  sampling?: Record<string, unknown>;
  /** Sequential PD: the KV handoff, and why the decode recomputed when it did. */
  kvHandoff?: string;
  error?: string;
  /** The OpenAI error code or type it ended with. */
  errorCode?: string;
  /** A client of the router's API, or the console's own traffic. */
  source?: TrafficSource;
  /** The request's own phases before and between its legs, in order. */
  phases?: RequestPhase[];
  /** Its tensors by path (the last attempt's, as its log line counts them). */
  paths?: Record<TensorPath, number>;
  /** Every tensor it placed, as the traffic stream reported it. */
  tensors?: TensorEvent[];
  /** Tensors the pixel cache answered. */
  cacheHits?: number;
}

/** A request that did not succeed: an error status, or an error after its answer had begun (a stream cut short). */
export const requestFailed = (s: Pick<RequestSummary, 'status' | 'error'>): boolean => s.status >= 400 || s.error !== undefined;

/** What the Requests screen filters by; every field given must match. */
export interface RequestFilter {
  status?: 'ok' | 'failed';
  /** A worker any of its legs ran on. */
  worker?: string;
  /** A leg it had. */
  leg?: LegName;
  model?: string;
  /** Only requests with an error: failed ones, or a leg that failed while the request still answered. */
  errorsOnly?: boolean;
}

/** Whether a request passes the filter (the Requests screen's rule, here and in the renderer). */
export function requestPasses(s: Pick<RequestSummary, 'status' | 'error' | 'model' | 'worker' | 'legs'>, f: RequestFilter): boolean {
  if (f.status !== undefined && requestFailed(s) !== (f.status === 'failed')) return false;
  if (f.model !== undefined && s.model !== f.model) return false;
  if (f.worker !== undefined && s.worker !== f.worker && !s.legs?.some((l) => l.worker === f.worker)) return false;
  if (f.leg !== undefined && !s.legs?.some((l) => l.leg === f.leg)) return false;
  if (f.errorsOnly && !requestFailed(s) && !s.legs?.some((l) => l.error !== undefined)) return false;
  return true;
}

export class RequestLog {
  private readonly byId = new Map<string, RequestSummary>();
  /**
   * The kept summaries in arrival order, oldest at `head`: a fixed array written round. (A Map
   * whose oldest key is deleted on every add costs more with each add: its iteration skips the
   * deleted entries until it is rehashed, about 30 µs a request at 10,000 kept.) A slot whose
   * id was added again since holds a summary no longer in `byId`: it is skipped.
   */
  private readonly ring: Array<RequestSummary | undefined>;
  private head = 0;
  private count = 0;
  private readonly listeners = new Set<(summary: RequestSummary) => void>();

  constructor(readonly capacity = 10_000) {
    this.ring = new Array<RequestSummary | undefined>(capacity).fill(undefined);
  }

  /** How many requests are kept now. */
  get size(): number {
    return this.byId.size;
  }

  /** The kept summaries, newest first. */
  private *newestFirst(): Generator<RequestSummary> {
    for (let i = this.count - 1; i >= 0; i--) {
      const s = this.ring[(this.head + i) % this.capacity]!;
      if (this.byId.get(s.id) === s) yield s;
    }
  }

  /** Every worker (of any leg) and model the kept requests name, sorted. */
  facets(): { workers: string[]; models: string[] } {
    const workers = new Set<string>();
    const models = new Set<string>();
    for (const s of this.byId.values()) {
      if (s.model) models.add(s.model);
      if (s.worker) workers.add(s.worker);
      for (const l of s.legs ?? []) workers.add(l.worker);
    }
    return { workers: [...workers].sort(), models: [...models].sort() };
  }

  add(summary: RequestSummary): void {
    if (this.count === this.capacity) {
      const oldest = this.ring[this.head]!;
      if (this.byId.get(oldest.id) === oldest) this.byId.delete(oldest.id);
      this.ring[this.head] = summary;
      this.head = (this.head + 1) % this.capacity;
    } else {
      this.ring[(this.head + this.count) % this.capacity] = summary;
      this.count += 1;
    }
    this.byId.set(summary.id, summary);
    for (const listener of this.listeners) {
      try {
        listener(summary);
      } catch {
        /* a listener's failure is its own; the request is kept */
      }
    }
  }

  /**
   * The kept requests that pass `filter`, newest first, at most `limit` of them (from before
   * `before`, an id, when given: the next page), and how many in all pass it.
   */
  query(filter: RequestFilter, limit: number, before?: string): { requests: RequestSummary[]; matched: number } {
    const requests: RequestSummary[] = [];
    let matched = 0;
    let taking = before === undefined;
    for (const s of this.newestFirst()) {
      if (!requestPasses(s, filter)) continue;
      matched += 1;
      if (taking && requests.length < limit) requests.push(s);
      else if (s.id === before) taking = true;
    }
    return { requests, matched };
  }

  get(id: string): RequestSummary | undefined {
    return this.byId.get(id);
  }

  /** Hear of every request as it ends; returns the unsubscribe function. */
  subscribe(listener: (summary: RequestSummary) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}
