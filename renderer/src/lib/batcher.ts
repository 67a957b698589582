// Streamed data reaches React in batches: items pushed between two animation frames are
// handed over together at the next frame, one store update per frame however many messages
// arrived (docs/console.md, "Live data"). The scheduler is injectable so tests run without a DOM.
export type Scheduler = (cb: () => void) => unknown;

export interface FrameBatcher<T> {
  push(items: readonly T[]): void;
  /** Hand over what is pending now (used before a snapshot replaces everything). */
  flush(): void;
  /** Drop what is pending; returns how many were dropped. */
  clear(): number;
  pending(): number;
}

export function createFrameBatcher<T>(deliver: (items: T[]) => void, schedule: Scheduler = (cb) => requestAnimationFrame(() => cb())): FrameBatcher<T> {
  let queue: T[] = [];
  let scheduled = false;
  const run = () => {
    scheduled = false;
    if (queue.length === 0) return;
    const items = queue;
    queue = [];
    deliver(items);
  };
  return {
    push(items) {
      if (items.length === 0) return;
      for (const item of items) queue.push(item);
      if (!scheduled) {
        scheduled = true;
        schedule(run);
      }
    },
    flush: run,
    clear() {
      const n = queue.length;
      queue = [];
      return n;
    },
    pending: () => queue.length,
  };
}

/** Newest first, at most `cap`: `incoming` is in arrival order (oldest first). */
export function prependCapped<T>(rows: readonly T[], incoming: readonly T[], cap: number): T[] {
  const fresh = incoming.length > cap ? incoming.slice(incoming.length - cap) : incoming;
  const out = new Array<T>(Math.min(cap, fresh.length + rows.length));
  let i = 0;
  for (let j = fresh.length - 1; j >= 0 && i < out.length; j--) out[i++] = fresh[j]!;
  for (let j = 0; j < rows.length && i < out.length; j++) out[i++] = rows[j]!;
  return out;
}
