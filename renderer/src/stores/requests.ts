// The Requests screen's data: the router's request records (docs/console.md, "Requests"). The
// list is loaded with requests.list for the filters in force (newest first, one page of at
// most MAX_REQUEST_PAGE); the requests stream then adds each request as it ends, when it
// passes the same filters (requestPasses, the router's own rule), newest first, capped at
// MAX_REQUEST_ROWS. The selected request's whole record (legs, phases, tensors) comes from
// traffic.request.
import { create } from 'zustand';
import {
  MAX_REQUEST_PAGE,
  requestPasses,
  type CommandInput,
  type RequestRow,
  type RequestSummaryView,
  type StreamPayload,
} from '../../../core/console/contract.ts';
import { prependCapped } from '../lib/batcher.ts';
import { client, describeError } from './client.ts';

/** The most rows the list holds (the router keeps the last 10,000 requests). */
export const MAX_REQUEST_ROWS = 10_000;

export interface RequestFilters {
  status: 'all' | 'ok' | 'failed';
  /** '' for every worker. */
  worker: string;
  /** '' for every leg. */
  leg: '' | 'regular' | 'encode' | 'prefill' | 'decode';
  /** '' for every model. */
  model: string;
  errorsOnly: boolean;
}

export const NO_FILTERS: RequestFilters = { status: 'all', worker: '', leg: '', model: '', errorsOnly: false };

interface RequestsState {
  rows: RequestRow[];
  /** How many kept requests pass the filters (at load), plus those streamed in since. */
  matched: number;
  /** How many the router keeps, and at most. */
  kept: number;
  capacity: number;
  workers: string[];
  models: string[];
  filters: RequestFilters;
  loading: boolean;
  error: string | null;
  selectedId: string | null;
  /** The selected request's record: undefined while it loads, null when the router no longer keeps it. */
  detail: RequestSummaryView | null | undefined;
  detailError: string | null;
  setFilters(patch: Partial<RequestFilters>): void;
  load(): Promise<void>;
  select(id: string | null): Promise<void>;
}

/** The contract's filter input for these filters (what is 'all' left out). */
export function filterInput(f: RequestFilters): CommandInput<'requests.list'> {
  return {
    ...(f.status !== 'all' ? { status: f.status } : {}),
    ...(f.worker ? { worker: f.worker } : {}),
    ...(f.leg ? { leg: f.leg } : {}),
    ...(f.model ? { model: f.model } : {}),
    ...(f.errorsOnly ? { errorsOnly: true } : {}),
  };
}

let loadSeq = 0;
let detailSeq = 0;

export const useRequests = create<RequestsState>((set, get) => ({
  rows: [],
  matched: 0,
  kept: 0,
  capacity: 0,
  workers: [],
  models: [],
  filters: NO_FILTERS,
  loading: false,
  error: null,
  selectedId: null,
  detail: undefined,
  detailError: null,
  setFilters(patch) {
    set({ filters: { ...get().filters, ...patch } });
    void get().load();
  },
  async load() {
    const seq = ++loadSeq;
    set({ loading: true });
    try {
      const page = await client().call('requests.list', { ...filterInput(get().filters), limit: MAX_REQUEST_PAGE });
      if (seq !== loadSeq) return;
      set({
        rows: page.requests,
        matched: page.matched,
        kept: page.kept,
        capacity: page.capacity,
        workers: page.workers,
        models: page.models,
        error: null,
        loading: false,
      });
    } catch (err) {
      if (seq === loadSeq) set({ error: describeError(err), loading: false });
    }
  },
  async select(id) {
    const seq = ++detailSeq;
    if (id === null) return set({ selectedId: null, detail: undefined, detailError: null });
    if (id === get().selectedId && get().detail) return;
    set({ selectedId: id, detail: undefined, detailError: null });
    try {
      const detail = await client().call('traffic.request', { requestId: id });
      if (seq === detailSeq) set({ detail });
    } catch (err) {
      if (seq === detailSeq) set({ detail: null, detailError: describeError(err) });
    }
  },
}));

/** The rows after a batch of the stream: those that pass the filters go on top (newest first), capped. */
export function addStreamed(
  rows: readonly RequestRow[],
  batch: readonly RequestRow[],
  filters: RequestFilters,
  cap = MAX_REQUEST_ROWS,
): { rows: RequestRow[]; added: number } {
  const input = filterInput(filters);
  const passing = batch.filter((r) => requestPasses(r, input));
  if (passing.length === 0) return { rows: rows as RequestRow[], added: 0 };
  return { rows: prependCapped(rows, passing, cap), added: passing.length };
}

/** Workers and models named by `batch` added to those the filters offer. */
function merged(known: readonly string[], more: Iterable<string>): string[] {
  const all = new Set(known);
  for (const m of more) all.add(m);
  return all.size === known.length ? (known as string[]) : [...all].sort();
}

function onBatch(batch: StreamPayload<'requests'>): void {
  if (batch.requests.length === 0) return;
  useRequests.setState((s) => {
    const { rows, added } = addStreamed(s.rows, batch.requests, s.filters);
    const workers = merged(
      s.workers,
      batch.requests.flatMap((r) => [...(r.worker ? [r.worker] : []), ...(r.legs ?? []).map((l) => l.worker)]),
    );
    const models = merged(
      s.models,
      batch.requests.flatMap((r) => (r.model ? [r.model] : [])),
    );
    return { rows, matched: s.matched + added, kept: Math.min(s.capacity || Infinity, s.kept + batch.requests.length), workers, models };
  });
}

/** Subscribe once for the page's lifetime; returns the unsubscribe. */
export function startRequestsFeed(): () => void {
  return client().subscribe('requests', onBatch);
}
