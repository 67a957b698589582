import { describe, expect, it } from 'vitest';
import type { TensorEvent } from '../../../core/admin/contract.ts';
import { filterRows, mergeSeconds } from './traffic.ts';

const ev = (over: Partial<TensorEvent>): TensorEvent => ({ time: 1, revision: 1, requestId: 'r1', source: 'api', worker: 'grpc://a:1', runtime: 'vllm', tensor: 'encoder_input', shape: [1], dtype: 'float32', nbytes: 4, path: 'inline', reason: 'mode_inline', writeMicros: 0, ...over });
const agg = (second: number, n: number) => ({ second, tensors: { inline: n, shm: 0, remote: 0 }, bytes: { inline: n, shm: 0, remote: 0 }, shmWriteFailures: 0 });

describe('traffic store logic', () => {
  it('hides the console\'s own traffic unless asked, and filters by path, worker, reason and text', () => {
    const rows = [ev({ source: 'console' }), ev({ path: 'shm', reason: 'auto_tokens_equal', requestId: 'chat-xyz' }), ev({ worker: 'grpc://b:2' })];
    const f = { path: 'all' as const, worker: '', reason: '', text: '', showConsole: false };
    expect(filterRows(rows, f)).toHaveLength(2);
    expect(filterRows(rows, { ...f, showConsole: true })).toHaveLength(3);
    expect(filterRows(rows, { ...f, path: 'shm' })).toHaveLength(1);
    expect(filterRows(rows, { ...f, worker: 'grpc://b:2' })).toHaveLength(1);
    expect(filterRows(rows, { ...f, reason: 'auto_tokens_equal' })).toHaveLength(1);
    expect(filterRows(rows, { ...f, text: 'XYZ' })).toHaveLength(1);
  });
  it('filters on the per-tensor reasons too (a full SHM budget)', () => {
    const rows = [ev({ reason: 'shm_budget_exceeded', nbytes: 2_408_448 }), ev({ reason: 'below_threshold', tensor: 'image_grid_thw' })];
    const f = { path: 'all' as const, worker: '', reason: 'shm_budget_exceeded', text: '', showConsole: false };
    expect(filterRows(rows, f).map((e) => e.tensor)).toEqual(['encoder_input']);
  });
  it('merges per-second aggregates: a changed second replaces the old one, the window is bounded', () => {
    const kept = [agg(1, 1), agg(2, 2)];
    expect(mergeSeconds(kept, [agg(2, 5), agg(3, 1)]).map((s) => [s.second, s.tensors.inline])).toEqual([[1, 1], [2, 5], [3, 1]]);
    expect(mergeSeconds(kept, [agg(3, 1)], 2).map((s) => s.second)).toEqual([2, 3]);
  });
});
