// The recent requests, by id: what each was sent with and how it ended, the record its log line
// is made from, kept for the console (a request's details: the sampling its worker was sent,
// how its KV went under sequential PD). A bounded map in arrival order: the oldest goes when
// it is full.
export interface RequestSummary {
  id: string;
  /** Unix milliseconds, when it ended. */
  time: number;
  status: number;
  worker?: string;
  /** The sampling the worker that samples was sent (engines/sampling.ts samplingSummary). */
  sampling?: Record<string, unknown>;
  /** Sequential PD: the KV handoff, and why the decode recomputed when it did. */
  kvHandoff?: string;
  error?: string;
}

export class RequestLog {
  private readonly byId = new Map<string, RequestSummary>();

  constructor(private readonly capacity = 10_000) {}

  add(summary: RequestSummary): void {
    this.byId.delete(summary.id);
    this.byId.set(summary.id, summary);
    if (this.byId.size > this.capacity) this.byId.delete(this.byId.keys().next().value!);
  }

  get(id: string): RequestSummary | undefined {
    return this.byId.get(id);
  }
}
