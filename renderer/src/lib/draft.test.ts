import { describe, expect, it } from 'vitest';
import { RouterConfigSchema, type RouterConfig } from '../../../core/admin/contract.ts';
import { configAtRevision, configsDiffer, parseDiffPath, patchWorker, rebaseDraft, revertDiff, setRouterField } from './draft.ts';

const A = 'grpc://127.0.0.1:1';
const B = 'grpc://127.0.0.1:2';
const worker = (url: string, extra: object = {}) => ({ url, runtime: 'unspecified' as const, worker_type: 'regular' as const, labels: {}, priority: 50, ...extra });
const base: RouterConfig = RouterConfigSchema.parse({ port: 0, workers: [worker(A), worker(B)] });

describe('draft edits', () => {
  it('inherit removes the key instead of writing the default', () => {
    const d = patchWorker(base, A, { multimodal_tensor_transport: 'shm' });
    expect(d.workers[0]).toMatchObject({ multimodal_tensor_transport: 'shm' });
    const back = patchWorker(d, A, { multimodal_tensor_transport: undefined });
    expect('multimodal_tensor_transport' in back.workers[0]!).toBe(false);
    expect(configsDiffer(base, back)).toBe(false);
    expect(configsDiffer(base, setRouterField(base, 'multimodal_shm_min_bytes', 0))).toBe(true);
  });

  it('rebase keeps what someone else applied meanwhile and carries our own edits', () => {
    const mine = patchWorker(setRouterField(base, 'multimodal_tensor_transport', 'auto'), A, { multimodal_shm_min_bytes: 0 });
    const theirs = { ...patchWorker(base, B, { priority: 90 }), policy: 'least_load' as const };
    const r = rebaseDraft(base, mine, theirs);
    expect(r.policy).toBe('least_load');
    expect(r.multimodal_tensor_transport).toBe('auto');
    expect(r.workers.find((w) => w.url === A)).toMatchObject({ multimodal_shm_min_bytes: 0 });
    expect(r.workers.find((w) => w.url === B)).toMatchObject({ priority: 90 });
  });

  it('rebase carries added and removed workers', () => {
    const mine = { ...base, workers: [base.workers[0]!, worker('grpc://127.0.0.1:3')] };
    const r = rebaseDraft(base, mine, { ...base, policy: 'least_load' });
    expect(r.workers.map((w) => w.url)).toEqual([A, 'grpc://127.0.0.1:3']);
  });
});

describe('history reconstruction', () => {
  it('parses diff paths', () => {
    expect(parseDiffPath('policy')).toEqual({ key: 'policy' });
    expect(parseDiffPath('workers["grpc://a:1"].labels.zone')).toEqual({ url: 'grpc://a:1', rest: ['labels', 'zone'] });
    expect(parseDiffPath('workers["unix:///x"]')).toEqual({ url: 'unix:///x', rest: [] });
  });

  it('undoes recorded diffs back to an older revision', () => {
    const r3: RouterConfig = { ...patchWorker(base, A, { multimodal_tensor_transport: 'shm', labels: { zone: 'a' } }), multimodal_shm_min_bytes: 1024, workers: [] };
    r3.workers = [{ ...worker(A), multimodal_tensor_transport: 'shm', labels: { zone: 'a' } }, worker('grpc://127.0.0.1:3')];
    const entries = [
      { revision: 3, diff: [
        { path: 'multimodal_shm_min_bytes', kind: 'added' as const, after: 1024 },
        { path: `workers["${B}"]`, kind: 'removed' as const, before: worker(B) },
        { path: 'workers["grpc://127.0.0.1:3"]', kind: 'added' as const, after: worker('grpc://127.0.0.1:3') },
      ] },
      { revision: 2, diff: [
        { path: `workers["${A}"].multimodal_tensor_transport`, kind: 'added' as const, after: 'shm' },
        { path: `workers["${A}"].labels.zone`, kind: 'added' as const, after: 'a' },
        { path: 'policy', kind: 'changed' as const, before: 'least_load', after: 'round_robin' },
      ] },
    ];
    const r2 = configAtRevision(r3, 3, entries, 2)!;
    expect(r2.multimodal_shm_min_bytes).toBeUndefined();
    expect(r2.workers.map((w) => w.url).sort()).toEqual([A, B]);
    const r1 = configAtRevision(r3, 3, entries, 1)!;
    expect(r1.policy).toBe('least_load');
    expect(r1.workers.find((w) => w.url === A)).toEqual(worker(A));
    expect(configAtRevision(r3, 4, entries, 1)).toBeUndefined();
    expect(revertDiff(r3, [])).toEqual(r3);
  });
});
