// The recent requests, by id: what each was sent with and how it ended, the record its log line
// is made from, kept for the console (a request's details: the sampling its worker was sent,
// how its KV went under sequential PD). A bounded map in arrival order: the oldest goes when
// it is full.
import type { LegName } from '../transport/event-schema.ts';

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
}

/** A request that did not succeed: an error status, or an error after its answer had begun (a stream cut short). */
export const requestFailed = (s: RequestSummary): boolean => s.status >= 400 || s.error !== undefined;

export class RequestLog {
  private readonly byId = new Map<string, RequestSummary>();
  private readonly listeners = new Set<(summary: RequestSummary) => void>();

  constructor(private readonly capacity = 10_000) {}

  add(summary: RequestSummary): void {
    this.byId.delete(summary.id);
    this.byId.set(summary.id, summary);
    if (this.byId.size > this.capacity) this.byId.delete(this.byId.keys().next().value!);
    for (const listener of this.listeners) {
      try {
        listener(summary);
      } catch {
        /* a listener's failure is its own; the request is kept */
      }
    }
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
