// The events of one request, split into the attempts that sent it. A worker that cannot read
// the request's /dev/shm files gets the whole request again inline: its tensors appear twice,
// the first attempt (written to /dev/shm, never read) and the retry, whose events the router
// marks `attempt: 2` with the worker's error as their `detail`. Events from before that mark
// existed are split by name: a tensor name seen again (on the same leg) starts the next
// attempt. Under disaggregated serving each leg (an image's encode call, the prefill, the
// decode) is sent again on its own, so a retry belongs to its request, leg and worker.
export interface Attempt<E> {
  events: E[];
  /** A later attempt replaced this one (the worker could not read what it was sent). */
  superseded: boolean;
}

/** The part of a disaggregated request an event belongs to (encode, prefill, decode), or undefined for a regular worker's whole request (named `regular`, or unnamed by routers of earlier versions). */
export function disaggregatedLeg(e: { leg?: string | undefined }): string | undefined {
  return e.leg === undefined || e.leg === 'regular' ? undefined : e.leg;
}

/** What a retry belongs to: its request, and under disaggregation its leg and worker. */
export function retryKey(e: { requestId: string; leg?: string | undefined; worker: string }): string {
  const leg = disaggregatedLeg(e);
  return `${e.requestId}|${leg ?? ''}|${leg ? e.worker : ''}`;
}

export function splitAttempts<E extends { tensor: string; attempt?: number | undefined; leg?: string | undefined }>(events: readonly E[]): Attempt<E>[] {
  const attempts: Attempt<E>[] = [];
  let number = 0;
  let seen = new Set<string>();
  for (const e of events) {
    const name = `${disaggregatedLeg(e) ?? ''}|${e.tensor}`;
    const next = attempts.length === 0 || (e.attempt !== undefined ? e.attempt !== number : seen.has(name));
    if (next) {
      if (attempts.length) attempts.at(-1)!.superseded = true;
      attempts.push({ events: [], superseded: false });
      number = e.attempt ?? number + 1;
      seen = new Set();
    }
    seen.add(name);
    attempts.at(-1)!.events.push(e);
  }
  return attempts;
}

/** The requests (legs, under disaggregation: retryKey) among `events` that were sent again (their retry's events carry attempt 2), with the cause. */
export function retriedRequests<
  E extends { requestId: string; leg?: string | undefined; worker: string; attempt?: number | undefined; detail?: string | undefined },
>(events: readonly E[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const e of events) if (e.attempt !== undefined && e.attempt > 1 && !out.has(retryKey(e))) out.set(retryKey(e), e.detail ?? '');
  return out;
}
