import { describe, expect, it } from 'vitest';
import { decideTransport, decisionOutcome, type DecisionWorker } from './decision.ts';
import { DECISION_REASONS } from './vocabulary.ts';

const ROUTER = 'boot-a:26';
const worker = (token: string | undefined, extra: Partial<DecisionWorker> = {}): DecisionWorker => ({
  url: 'grpc://w:1',
  worker_type: 'regular',
  shm_namespace_id: token,
  ...extra,
});

describe('decideTransport: every reason', () => {
  it.each([
    ['inline', true, ROUTER, worker(ROUTER), false, 'mode_inline'],
    ['rdma', true, ROUTER, worker(ROUTER), false, 'mode_rdma'],
    ['shm', true, ROUTER, worker(undefined), true, 'shm_writable'],
    ['shm', false, ROUTER, worker(ROUTER), false, 'shm_not_writable'],
    ['shm', true, ROUTER, worker(ROUTER), true, 'shm_writable'],
    ['shm', true, ROUTER, worker('boot-a:27'), true, 'shm_worker_other_shm'],
    ['shm', true, ROUTER, worker('boot-b:26'), true, 'shm_worker_other_host'],
    ['shm', true, undefined, worker('boot-b:26'), true, 'shm_writable'],
    ['auto', true, ROUTER, worker(ROUTER), true, 'auto_tokens_equal'],
    ['auto', false, ROUTER, worker(ROUTER), false, 'auto_shm_not_writable'],
    ['auto', true, undefined, worker(ROUTER), false, 'auto_router_no_token'],
    ['auto', true, ROUTER, worker(undefined), false, 'auto_worker_no_token'],
    ['auto', true, ROUTER, worker(''), false, 'auto_worker_no_token'],
    ['auto', true, ROUTER, worker('boot-b:26'), false, 'auto_different_host'],
    ['auto', true, ROUTER, worker('boot-a:27'), false, 'auto_different_shm'],
    ['auto', true, ROUTER, worker('garbage'), false, 'auto_different_host'],
    ['auto', true, ROUTER, worker(undefined, { reachable: false }), false, 'auto_worker_unreachable'],
  ] as const)('%s, writable=%s, router=%s -> %s', (mode, shmWritable, routerToken, w, enabled, reason) => {
    const d = decideTransport({ shmLane: true, mode, shmWritable, routerToken, workers: [w] });
    expect(d).toMatchObject({ shmEnabled: enabled, reason });
    expect(DECISION_REASONS[d.reason]).toBeTruthy();
  });

  it('the outcome says what the next request will do: shm forced to a worker known to have another /dev/shm is attempted, then inline', () => {
    const at = (mode: 'shm' | 'auto', token: string | undefined) =>
      decisionOutcome(decideTransport({ shmLane: true, mode, shmWritable: true, routerToken: ROUTER, workers: [worker(token)] }));
    expect(at('shm', 'boot-a:27')).toBe('shm_then_inline');
    expect(at('shm', 'boot-b:26')).toBe('shm_then_inline');
    expect(at('shm', ROUTER)).toBe('shm');
    expect(at('shm', undefined)).toBe('shm');
    expect(at('auto', 'boot-a:27')).toBe('inline');
    expect(at('auto', ROUTER)).toBe('shm');
    // A worker no request reaches now: no transport outcome at all.
    expect(decisionOutcome({ shmEnabled: false, reason: 'worker_not_healthy' })).toBe('no_request');
    expect(decisionOutcome({ shmEnabled: false, reason: 'route_not_healthy' })).toBe('no_request');
  });

  it('a protocol without a /dev/shm lane is inline under shm and auto, with its own reason, never an error', () => {
    for (const mode of ['shm', 'auto'] as const) {
      const d = decideTransport({ shmLane: false, mode, shmWritable: true, routerToken: ROUTER, workers: [worker(ROUTER)] });
      expect(d).toEqual({ shmEnabled: false, reason: 'runtime_inline_only' });
      expect(decisionOutcome(d)).toBe('inline');
    }
    expect(decideTransport({ shmLane: false, mode: 'inline', shmWritable: true, routerToken: ROUTER, workers: [worker(ROUTER)] }).reason).toBe('mode_inline');
  });

  it('the token comparison is byte-exact (no trimming, no case folding)', () => {
    expect(decideTransport({ shmLane: true, mode: 'auto', shmWritable: true, routerToken: ROUTER, workers: [worker(`${ROUTER} `)] }).shmEnabled).toBe(false);
    expect(decideTransport({ shmLane: true, mode: 'auto', shmWritable: true, routerToken: 'abc:1', workers: [worker('ABC:1')] }).shmEnabled).toBe(false);
  });

  it('auto under disaggregation: every encode worker must share /dev/shm', () => {
    const enc = (token: string, url: string): DecisionWorker => ({ url, worker_type: 'encode', shm_namespace_id: token });
    const prefillElsewhere: DecisionWorker = { url: 'grpc://p:1', worker_type: 'prefill', shm_namespace_id: 'other:1' };
    expect(
      decideTransport({ shmLane: true, mode: 'auto', shmWritable: true, routerToken: ROUTER, workers: [enc(ROUTER, 'grpc://e1:1'), prefillElsewhere] })
        .shmEnabled,
    ).toBe(true);
    const d = decideTransport({
      shmLane: true,
      mode: 'auto',
      shmWritable: true,
      routerToken: ROUTER,
      workers: [enc(ROUTER, 'grpc://e1:1'), enc('boot-a:99', 'grpc://e2:1')],
    });
    expect(d).toEqual({ shmEnabled: false, reason: 'auto_different_shm', worker: 'grpc://e2:1' });
  });

  it('auto without encode workers: both prefill and decode must share', () => {
    const p: DecisionWorker = { url: 'grpc://p:1', worker_type: 'prefill', shm_namespace_id: ROUTER };
    const d: DecisionWorker = { url: 'grpc://d:1', worker_type: 'decode', shm_namespace_id: undefined };
    expect(decideTransport({ shmLane: true, mode: 'auto', shmWritable: true, routerToken: ROUTER, workers: [p, d] })).toEqual({
      shmEnabled: false,
      reason: 'auto_worker_no_token',
      worker: 'grpc://d:1',
    });
    expect(
      decideTransport({ shmLane: true, mode: 'auto', shmWritable: true, routerToken: ROUTER, workers: [p, { ...d, shm_namespace_id: ROUTER }] }).shmEnabled,
    ).toBe(true);
  });
});
