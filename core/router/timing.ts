// Where a request's time went, sent as a Server-Timing header on JSON responses: body
// (reading and parsing the HTTP body), fetch (image bytes), preprocess (decode + resize +
// patchify, in the pool), prompt (template + tokenize, when not already built from the image
// headers meanwhile), place (engine request + inline copies / SHM writes), worker (gRPC call
// to its last message), total. Router overhead = total - body - preprocess - place - worker.
export class RequestTiming {
  private readonly start = performance.now();
  private last = this.start;
  private readonly spans: Array<[string, number]> = [];

  mark(name: string): void {
    const now = performance.now();
    this.spans.push([name, now - this.last]);
    this.last = now;
  }

  elapsedMs(): number {
    return performance.now() - this.start;
  }

  /** Milliseconds of a marked span (0 when it was never marked). */
  span(name: string): number {
    return this.spans.find(([n]) => n === name)?.[1] ?? 0;
  }

  /** The marked spans, each from where the one before it ended (for the request's record). */
  phases(): Array<{ name: string; startMs: number; durationMs: number }> {
    let at = 0;
    return this.spans.map(([name, durationMs]) => {
      const phase = { name, startMs: at, durationMs };
      at += durationMs;
      return phase;
    });
  }

  header(): string {
    const total = performance.now() - this.start;
    return [...this.spans, ['total', total] as [string, number]].map(([n, d]) => `${n};dur=${d.toFixed(2)}`).join(', ');
  }
}
