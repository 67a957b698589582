// The console's two computed streams. traffic: each subscriber's batches from the router's event
// bus, merged while it cannot take them, with a bounded backlog whose overflow is counted.
// overview: one computation per tick for every listener, and one soon after a worker's change.
import type { RequestSummary } from '../telemetry/requests.ts';
import type { TensorEvent } from '../transport/event-schema.ts';
import type { RequestFailure, RequestRow, RequestsBatch, StreamPayload, TrafficBatch } from './contract.ts';

/** How the traffic views name a failed request: its id, status and error. */
export function failureOf(s: RequestSummary): RequestFailure {
  return { requestId: s.id, status: s.status, error: s.error ?? null };
}

/** How the Requests list shows a request: its record without its tensors (their count), sampling or phases. */
export function rowOf(s: RequestSummary): RequestRow {
  const { tensors, sampling: _sampling, phases: _phases, ...rest } = s;
  return { ...rest, tensorCount: tensors?.length ?? 0 };
}

/** Requests one subscriber of the requests stream may have waiting; older ones are dropped and counted. */
export const REQUESTS_BACKLOG = 5_000;
const REQUESTS_BATCH_MS = 100;

/**
 * One subscriber's requests stream: each request as it ends, sent in batches about ten times
 * a second (never one message per request), held while the subscriber cannot take them,
 * capped at REQUESTS_BACKLOG (the oldest go, and are counted).
 */
export class RequestsFeed {
  private pending: RequestSummary[] = [];
  private dropped = 0;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly listener: (batch: RequestsBatch) => void,
    private readonly canSend: (() => boolean) | undefined,
  ) {}

  push(summary: RequestSummary): void {
    if (this.closed) return;
    this.pending.push(summary);
    if (this.pending.length > REQUESTS_BACKLOG) {
      this.dropped += this.pending.length - REQUESTS_BACKLOG;
      this.pending.splice(0, this.pending.length - REQUESTS_BACKLOG);
    }
    this.timer ??= setTimeout(() => this.flush(), REQUESTS_BATCH_MS);
  }

  private flush(): void {
    this.timer = undefined;
    if (this.closed || this.pending.length === 0) return;
    if (this.canSend && !this.canSend()) {
      this.timer = setTimeout(() => this.flush(), RETRY_MS);
      return;
    }
    const batch = this.pending;
    this.pending = [];
    try {
      this.listener({ requests: batch.map(rowOf), dropped: this.dropped });
    } catch {
      /* a subscriber's failure is its own */
    }
  }

  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
  }
}

/** Events one subscriber may have waiting while it cannot take them; older ones are dropped and counted. */
export const TRAFFIC_BACKLOG = 5_000;
const RETRY_MS = 100;

/**
 * One subscriber's traffic: batches from the bus, merged while the subscriber cannot take
 * them (canSend false), capped at TRAFFIC_BACKLOG events (the oldest go, and are counted).
 */
export class TrafficFeed {
  private pending: TensorEvent[] = [];
  private failed: RequestFailure[] = [];
  private dropped = 0;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly listener: (batch: TrafficBatch) => void,
    private readonly seconds: () => readonly TrafficBatch['seconds'][number][],
    private readonly canSend: (() => boolean) | undefined,
  ) {}

  push(events: readonly TensorEvent[]): void {
    if (this.closed) return;
    for (const e of events) this.pending.push(e);
    if (this.pending.length > TRAFFIC_BACKLOG) {
      this.dropped += this.pending.length - TRAFFIC_BACKLOG;
      this.pending.splice(0, this.pending.length - TRAFFIC_BACKLOG);
    }
    this.flush();
  }

  /** A request that ended in failure: its rows are marked (bounded like the events: the oldest go first). */
  pushFailed(failure: RequestFailure): void {
    if (this.closed) return;
    this.failed.push(failure);
    if (this.failed.length > TRAFFIC_BACKLOG) this.failed.splice(0, this.failed.length - TRAFFIC_BACKLOG);
    this.flush();
  }

  private flush(): void {
    if (this.closed || (this.pending.length === 0 && this.failed.length === 0)) return;
    if (this.canSend && !this.canSend()) {
      this.timer ??= setTimeout(() => {
        this.timer = undefined;
        this.flush();
      }, RETRY_MS);
      return;
    }
    const events = this.pending;
    const failed = this.failed;
    this.pending = [];
    this.failed = [];
    try {
      this.listener({
        events,
        failed,
        seconds: this.seconds()
          .slice(-2)
          .map((s) => ({ ...s, tensors: { ...s.tensors }, bytes: { ...s.bytes } })),
        dropped: this.dropped,
      });
    } catch {
      /* a subscriber's failure is its own */
    }
  }

  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
  }
}

/** How often the overview stream sends while anyone listens, and how soon after a worker's change. */
export const OVERVIEW_PUSH_MS = 1000;
const OVERVIEW_SOON_MS = 100;

/**
 * The overview stream: one computation per tick for every listener, about once a second, and
 * again OVERVIEW_SOON_MS after a worker's change (a lane broken, a worker down), so a
 * warning reaches the screen within a second of its cause. Nothing runs while nobody listens.
 */
export class OverviewFeed {
  private readonly listeners = new Set<(overview: StreamPayload<'overview'>) => void>();
  private timer: NodeJS.Timeout | undefined;
  private soonTimer: NodeJS.Timeout | undefined;
  private computing = false;
  private again = false;
  private closed = false;

  constructor(
    private readonly compute: () => Promise<StreamPayload<'overview'>>,
    private readonly log: (line: string) => void,
  ) {}

  add(listener: (overview: StreamPayload<'overview'>) => void): () => void {
    this.listeners.add(listener);
    if (!this.timer && !this.closed) {
      this.timer = setInterval(() => void this.push(), OVERVIEW_PUSH_MS);
      this.timer.unref();
    }
    this.soon();
    return () => {
      this.listeners.delete(listener);
      if (this.listeners.size === 0) this.stop();
    };
  }

  soon(): void {
    if (this.listeners.size === 0 || this.soonTimer || this.closed) return;
    this.soonTimer = setTimeout(() => {
      this.soonTimer = undefined;
      void this.push();
    }, OVERVIEW_SOON_MS);
    this.soonTimer.unref();
  }

  private async push(): Promise<void> {
    if (this.computing) {
      this.again = true;
      return;
    }
    this.computing = true;
    try {
      const overview = await this.compute();
      for (const l of this.listeners) {
        try {
          l(overview);
        } catch {
          /* a subscriber's failure is its own */
        }
      }
    } catch (err) {
      this.log(`warning: the overview stream could not compute the overview: ${(err as Error).message}`);
    } finally {
      this.computing = false;
      if (this.again) {
        this.again = false;
        this.soon();
      }
    }
  }

  private stop(): void {
    if (this.timer) clearInterval(this.timer);
    if (this.soonTimer) clearTimeout(this.soonTimer);
    this.timer = undefined;
    this.soonTimer = undefined;
  }

  close(): void {
    this.closed = true;
    this.stop();
    this.listeners.clear();
  }
}
