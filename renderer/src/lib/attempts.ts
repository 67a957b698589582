// The events of one request, split into the attempts that sent it. A worker that cannot read
// the request's /dev/shm files gets the whole request again inline (reason
// auto_worker_read_failed), so its tensors appear twice: the first attempt (written to
// /dev/shm, never read) and the retry. A tensor name seen again starts the next attempt.
export interface Attempt<E> {
  events: E[];
  /** A later attempt replaced this one (the worker could not read what it was sent). */
  superseded: boolean;
}

export function splitAttempts<E extends { tensor: string }>(events: readonly E[]): Attempt<E>[] {
  const attempts: Attempt<E>[] = [];
  let seen = new Set<string>();
  for (const e of events) {
    if (attempts.length === 0 || seen.has(e.tensor)) {
      if (attempts.length) attempts.at(-1)!.superseded = true;
      attempts.push({ events: [], superseded: false });
      seen = new Set();
    }
    seen.add(e.tensor);
    attempts.at(-1)!.events.push(e);
  }
  return attempts;
}
