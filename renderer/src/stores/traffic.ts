// Live tensor traffic. The traffic stream arrives in batches (about ten a second from the
// server); batches are queued outside React and appended once per animation frame, newest
// first, capped at MAX_ROWS, so a burst of thousands of events a second costs one store
// update per frame (docs/console.md, "Live data"). While the operator pauses the table, or the
// document is hidden (no frames to draw), nothing is queued; on resume or return the table
// catches up from traffic.snapshot instead of replaying a backlog. The server's dropped
// count (events this client missed because it fell behind) is kept and shown.
import { create } from 'zustand';
import type { RequestFailure, SecondAggregate, StreamPayload, TensorEvent } from '../../../core/console/contract.ts';
import { createFrameBatcher, prependCapped, type FrameBatcher } from '../lib/batcher.ts';
import { client, describeError } from './client.ts';

export const MAX_ROWS = 10_000;
const KEEP_SECONDS = 180;

export type PathFilter = 'all' | 'inline' | 'shm' | 'remote';
/** The pixel cache's answer for an image tensor (TensorEvent.cache), or every row. */
export type CacheFilter = 'all' | NonNullable<TensorEvent['cache']>;

export interface TrafficFilters {
  path: PathFilter;
  worker: string;
  reason: string;
  /** A leg of disaggregated serving (encode, prefill, decode), or regular; '' for all. */
  leg: string;
  /** Only image tensors the pixel cache answered (hit) or computed (miss); 'all' for every row. */
  cache: CacheFilter;
  text: string;
  showConsole: boolean;
}

interface TrafficState {
  rows: TensorEvent[];
  /** Requests that ended in failure, by id (at most MAX_ROWS, the newest kept): their rows are marked failed. */
  failed: ReadonlyMap<string, RequestFailure>;
  seconds: SecondAggregate[];
  /** Events the server could not deliver to this page (it fell behind), over this session. */
  dropped: number;
  /** Events not shown while paused or hidden (the table caught up from a snapshot after). */
  skipped: number;
  paused: boolean;
  catchingUp: boolean;
  error: string | null;
  filters: TrafficFilters;
  setFilters(patch: Partial<TrafficFilters>): void;
  setPaused(paused: boolean): void;
}

export const useTraffic = create<TrafficState>((set) => ({
  rows: [],
  failed: new Map(),
  seconds: [],
  dropped: 0,
  skipped: 0,
  paused: false,
  catchingUp: false,
  error: null,
  filters: { path: 'all', worker: '', reason: '', leg: '', cache: 'all', text: '', showConsole: false },
  setFilters: (patch) => set((s) => ({ filters: { ...s.filters, ...patch } })),
  setPaused(paused) {
    set({ paused });
    if (!paused) void catchUp();
  },
}));

/** Add failed requests to those kept, the oldest going first past `cap`. */
export function mergeFailures(
  kept: ReadonlyMap<string, RequestFailure>,
  added: readonly RequestFailure[],
  cap = MAX_ROWS,
): ReadonlyMap<string, RequestFailure> {
  if (added.length === 0) return kept;
  const next = new Map(kept);
  for (const f of added) {
    next.delete(f.requestId);
    next.set(f.requestId, f);
  }
  for (const id of next.keys()) {
    if (next.size <= cap) break;
    next.delete(id);
  }
  return next;
}

/** Merge changed per-second aggregates into the kept window (sorted by second). */
export function mergeSeconds(kept: readonly SecondAggregate[], changed: readonly SecondAggregate[], keep = KEEP_SECONDS): SecondAggregate[] {
  if (changed.length === 0) return kept as SecondAggregate[];
  const map = new Map(kept.map((s) => [s.second, s]));
  for (const s of changed) map.set(s.second, s);
  const all = [...map.values()].sort((a, b) => a.second - b.second);
  return all.slice(Math.max(0, all.length - keep));
}

// ------------------------------------------------------------------ the feed (outside React)

let batcher: FrameBatcher<TensorEvent> | undefined;
let pendingSeconds: SecondAggregate[] = [];
let droppedBase = 0;
let lastDropped = 0;
let catchingUp = false;
let heldDuringCatchUp: TensorEvent[] = [];
// The snapshot can hold events the stream has not sent yet (it sends in batches about every
// 100 ms): for a while after a catch-up, a batch's events already shown are not shown twice.
const SNAPSHOT_OVERLAP_MS = 5000;
let shownBySnapshot: { keys: Set<string>; until: number } | undefined;

function isHidden(): boolean {
  return typeof document !== 'undefined' && document.visibilityState === 'hidden';
}

function deliver(events: TensorEvent[]): void {
  const seconds = pendingSeconds;
  pendingSeconds = [];
  useTraffic.setState((s) => ({ rows: prependCapped(s.rows, events, MAX_ROWS), seconds: mergeSeconds(s.seconds, seconds) }));
}

function onBatch(batch: StreamPayload<'traffic'>): void {
  // The server counts drops per subscription; a reconnect starts a new count.
  if (batch.dropped < lastDropped) droppedBase += lastDropped;
  lastDropped = batch.dropped;
  const dropped = droppedBase + batch.dropped;
  if (dropped !== useTraffic.getState().dropped) useTraffic.setState({ dropped });
  // A few per second at most, and true whatever the table shows: kept even while paused.
  if (batch.failed.length) useTraffic.setState((s) => ({ failed: mergeFailures(s.failed, batch.failed) }));
  for (const s of batch.seconds) pendingSeconds.push(s);
  if (catchingUp) {
    heldDuringCatchUp.push(...batch.events);
    return;
  }
  let events = batch.events;
  if (shownBySnapshot) {
    if (performance.now() > shownBySnapshot.until) shownBySnapshot = undefined;
    else events = events.filter((e) => !shownBySnapshot!.keys.has(eventKey(e)));
  }
  if (useTraffic.getState().paused || isHidden()) {
    if (events.length) useTraffic.setState((s) => ({ skipped: s.skipped + events.length }));
    if (!isHidden()) flushSecondsSoon();
    return;
  }
  if (events.length) batcher!.push(events);
  else flushSecondsSoon();
}

let secondsScheduled = false;
function flushSecondsSoon(): void {
  if (secondsScheduled) return;
  secondsScheduled = true;
  requestAnimationFrame(() => {
    secondsScheduled = false;
    if (pendingSeconds.length === 0) return;
    const seconds = pendingSeconds;
    pendingSeconds = [];
    useTraffic.setState((s) => ({ seconds: mergeSeconds(s.seconds, seconds) }));
  });
}

const eventKey = (e: TensorEvent) => `${e.requestId}|${e.tensor}|${e.time}|${e.nbytes}`;

/** Replace the table with the server's recent events, then add what arrived meanwhile. */
export async function catchUp(): Promise<void> {
  if (catchingUp) return;
  catchingUp = true;
  heldDuringCatchUp = [];
  batcher?.clear();
  useTraffic.setState({ catchingUp: true });
  try {
    const snap = await client().call('traffic.snapshot', { limit: MAX_ROWS });
    const seen = new Set(snap.events.slice(-2000).map(eventKey));
    const later = heldDuringCatchUp.filter((e) => !seen.has(eventKey(e)));
    for (const e of later) seen.add(eventKey(e));
    shownBySnapshot = { keys: seen, until: performance.now() + SNAPSHOT_OVERLAP_MS };
    const rows = prependCapped([], [...snap.events, ...later], MAX_ROWS);
    const seconds = mergeSeconds(mergeSeconds([], snap.seconds), pendingSeconds);
    pendingSeconds = [];
    useTraffic.setState((s) => ({ rows, seconds, failed: mergeFailures(s.failed, snap.failed), error: null, skipped: 0 }));
  } catch (err) {
    useTraffic.setState({ error: describeError(err) });
  } finally {
    catchingUp = false;
    heldDuringCatchUp = [];
    useTraffic.setState({ catchingUp: false });
  }
}

/** Subscribe once for the page's lifetime; returns the unsubscribe. */
export function startTrafficFeed(): () => void {
  batcher = createFrameBatcher(deliver);
  const off = client().subscribe('traffic', onBatch);
  const onVisibility = () => {
    if (!isHidden() && !useTraffic.getState().paused) void catchUp();
  };
  document.addEventListener('visibilitychange', onVisibility);
  void catchUp();
  return () => {
    off();
    document.removeEventListener('visibilitychange', onVisibility);
  };
}

/** The rows the table shows for these filters (console traffic hidden unless asked for). */
export function filterRows(rows: readonly TensorEvent[], f: TrafficFilters): TensorEvent[] {
  const text = f.text.trim().toLowerCase();
  const out: TensorEvent[] = [];
  for (const e of rows) {
    if (!f.showConsole && e.source === 'console') continue;
    if (f.path !== 'all' && e.path !== f.path) continue;
    if (f.worker && e.worker !== f.worker) continue;
    if (f.reason && e.reason !== f.reason) continue;
    if (f.leg && (e.leg ?? 'regular') !== f.leg) continue;
    if (f.cache !== 'all' && e.cache !== f.cache) continue;
    if (text && !e.requestId.toLowerCase().includes(text) && !e.tensor.toLowerCase().includes(text)) continue;
    out.push(e);
  }
  return out;
}
