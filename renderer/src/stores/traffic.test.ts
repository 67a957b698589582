import { describe, expect, it } from 'vitest';
import type { TensorEvent } from '../../../core/console/contract.ts';
import { filterRows, mergeSeconds } from './traffic.ts';

const ev = (over: Partial<TensorEvent>): TensorEvent => ({
  time: 1,
  revision: 1,
  requestId: 'r1',
  source: 'api',
  worker: 'grpc://a:1',
  runtime: 'vllm',
  tensor: 'encoder_input',
  shape: [1],
  dtype: 'float32',
  nbytes: 4,
  path: 'inline',
  reason: 'mode_inline',
  writeMicros: 0,
  ...over,
});
const agg = (second: number, n: number) => ({
  second,
  tensors: { inline: n, shm: 0, remote: 0 },
  bytes: { inline: n, shm: 0, remote: 0 },
  shmWriteFailures: 0,
});

describe('traffic store logic', () => {
  it("hides the console's own traffic unless asked, and filters by path, worker, reason and text", () => {
    const rows = [ev({ source: 'console' }), ev({ path: 'shm', reason: 'auto_tokens_equal', requestId: 'chat-xyz' }), ev({ worker: 'grpc://b:2' })];
    const f = { path: 'all' as const, worker: '', reason: '', leg: '', cache: 'all' as const, text: '', showConsole: false };
    expect(filterRows(rows, f)).toHaveLength(2);
    expect(filterRows(rows, { ...f, showConsole: true })).toHaveLength(3);
    expect(filterRows(rows, { ...f, path: 'shm' })).toHaveLength(1);
    expect(filterRows(rows, { ...f, worker: 'grpc://b:2' })).toHaveLength(1);
    expect(filterRows(rows, { ...f, reason: 'auto_tokens_equal' })).toHaveLength(1);
    expect(filterRows(rows, { ...f, text: 'XYZ' })).toHaveLength(1);
  });
  it('filters on the per-tensor reasons too (a full SHM budget)', () => {
    const rows = [ev({ reason: 'shm_budget_exceeded', nbytes: 2_408_448 }), ev({ reason: 'below_threshold', tensor: 'image_grid_thw' })];
    const f = { path: 'all' as const, worker: '', reason: 'shm_budget_exceeded', leg: '', cache: 'all' as const, text: '', showConsole: false };
    expect(filterRows(rows, f).map((e) => e.tensor)).toEqual(['encoder_input']);
  });
  it("filters by the pixel cache's answer: a hit or a miss is an image tensor that has one", () => {
    const rows = [ev({ cache: 'hit', requestId: 'second' }), ev({ cache: 'miss', requestId: 'first' }), ev({ tensor: 'image_grid_thw', requestId: 'first' })];
    const f = { path: 'all' as const, worker: '', reason: '', leg: '', cache: 'all' as const, text: '', showConsole: false };
    expect(filterRows(rows, f)).toHaveLength(3);
    expect(filterRows(rows, { ...f, cache: 'hit' }).map((e) => e.requestId)).toEqual(['second']);
    expect(filterRows(rows, { ...f, cache: 'miss' }).map((e) => [e.requestId, e.tensor])).toEqual([['first', 'encoder_input']]);
  });
  it('merges per-second aggregates: a changed second replaces the old one, the window is bounded', () => {
    const kept = [agg(1, 1), agg(2, 2)];
    expect(mergeSeconds(kept, [agg(2, 5), agg(3, 1)]).map((s) => [s.second, s.tensors.inline])).toEqual([
      [1, 1],
      [2, 5],
      [3, 1],
    ]);
    expect(mergeSeconds(kept, [agg(3, 1)], 2).map((s) => s.second)).toEqual([2, 3]);
  });
});

describe('the traffic feed', () => {
  it('an event the catch-up snapshot already showed is not shown again when its stream batch arrives after it', async () => {
    const { vi } = await import('vitest');
    const { setClient } = await import('./client.ts');
    const { startTrafficFeed, useTraffic } = await import('./traffic.ts');
    vi.stubGlobal('document', { visibilityState: 'visible', addEventListener() {}, removeEventListener() {} });
    vi.stubGlobal('requestAnimationFrame', (cb: () => void) => setTimeout(cb, 0));
    const e1 = ev({ requestId: 'chatcmpl-1', time: 10 });
    const e2 = ev({ requestId: 'chatcmpl-2', time: 20 });
    let listener: ((batch: { events: TensorEvent[]; seconds: never[]; dropped: number }) => void) | undefined;
    setClient({
      // The snapshot already holds e1, which the stream sends only in its next batch.
      call: (async () => ({ events: [e1], seconds: [] })) as never,
      subscribe: ((_stream: string, l: typeof listener) => {
        listener = l;
        return () => {};
      }) as never,
    });
    const stop = startTrafficFeed();
    await vi.waitFor(() => expect(useTraffic.getState().rows.map((r) => r.requestId)).toEqual(['chatcmpl-1']));
    listener!({ events: [e1, e2], seconds: [], dropped: 0 });
    await new Promise((r) => setTimeout(r, 10));
    expect(useTraffic.getState().rows.map((r) => r.requestId)).toEqual(['chatcmpl-2', 'chatcmpl-1']);
    stop();
    vi.unstubAllGlobals();
  });
});
