import { describe, expect, it } from 'vitest';
import { RouterConfigSchema, type RouterConfig } from '../../../core/console/contract.ts';
import { addWorker, configsDiffer, mayBeUnset, parseDiffPath, patchWorker, rebaseDraft, setRouterField, typedNumber } from './draft.ts';

const A = 'grpc://127.0.0.1:1';
const B = 'grpc://127.0.0.1:2';
const worker = (url: string, extra: object = {}) => ({
  url,
  runtime: 'unspecified' as const,
  worker_type: 'regular' as const,
  labels: {},
  priority: 50,
  ...extra,
});
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

describe('diff paths and worker lists', () => {
  it('parses diff paths', () => {
    expect(parseDiffPath('policy')).toEqual({ key: 'policy' });
    expect(parseDiffPath('workers["grpc://a:1"].labels.zone')).toEqual({ url: 'grpc://a:1', rest: ['labels', 'zone'] });
    expect(parseDiffPath('workers["unix:///x"]')).toEqual({ url: 'unix:///x', rest: [] });
  });

  it('adding a worker replaces the embedded reference worker', () => {
    const embedded = RouterConfigSchema.parse({ port: 0, workers: [worker('grpc://127.0.0.1:9')] });
    const next = addWorker(embedded, worker(A), { replaceUrls: new Set(['grpc://127.0.0.1:9']) });
    expect(next.workers.map((w) => w.url)).toEqual([A]);
  });
});

// One rule for every number field, on every form (Router, Limits, Workers' Add and Edit).
describe('typedNumber', () => {
  it('a plain decimal number, signed or with a fraction, is that number; the schema says whether it fits', () => {
    expect(['50', ' 1.5 ', '-1', '0'].map((t) => typedNumber(t))).toEqual([50, 1.5, -1, 0]);
  });

  it('anything else stays the text, on every field alike: an exponent, a unit, a separator', () => {
    expect(['1e2', '1e3', '30x', '1,000', '0x10'].map((t) => typedNumber(t))).toEqual(['1e2', '1e3', '30x', '1,000', '0x10']);
  });

  it("blank unsets only a setting that may be unset; one with a default keeps '' for its schema to refuse", () => {
    expect(typedNumber('  ')).toBe('');
    expect(typedNumber('  ', { optional: true })).toBeUndefined();
    expect(RouterConfigSchema.shape.body_timeout_secs.safeParse(typedNumber('')).success).toBe(false);
  });

  it('mayBeUnset: an optional setting yes, one with a default no', () => {
    expect(mayBeUnset(RouterConfigSchema.shape.multimodal_shm_max_outstanding_bytes)).toBe(true);
    expect(mayBeUnset(RouterConfigSchema.shape.body_timeout_secs)).toBe(false);
  });
});
