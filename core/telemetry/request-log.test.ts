// The request log's bound and order: at capacity the oldest goes (get no longer finds it), a
// request added again is kept once, as the newest, and query lists newest first with pages.
import { describe, expect, it } from 'vitest';
import { RequestLog, type RequestSummary } from './requests.ts';

const s = (id: string, status = 200): RequestSummary => ({ id, time: 0, status });

describe('RequestLog', () => {
  it('keeps the newest `capacity` requests; a request added again is kept once, as the newest', () => {
    const log = new RequestLog(3);
    for (const id of ['a', 'b', 'c', 'd']) log.add(s(id));
    expect(log.get('a')).toBeUndefined();
    expect(log.size).toBe(3);
    expect(log.query({}, 10).requests.map((r) => r.id)).toEqual(['d', 'c', 'b']);
    log.add(s('c', 500));
    expect(log.query({}, 10).requests.map((r) => [r.id, r.status])).toEqual([
      ['c', 500],
      ['d', 200],
    ]);
    expect(log.get('c')!.status).toBe(500);
    log.add(s('e'));
    log.add(s('f'));
    // The slot of c's first arrival went without taking the c added since.
    expect(log.query({}, 10).requests.map((r) => r.id)).toEqual(['f', 'e', 'c']);
    expect(log.get('c')!.status).toBe(500);
  });

  it('query filters and pages newest first', () => {
    const log = new RequestLog(10);
    for (const [id, status] of [
      ['a', 200],
      ['b', 504],
      ['c', 200],
      ['d', 502],
    ] as const)
      log.add({ ...s(id, status), ...(status >= 400 ? { error: 'x' } : {}) });
    expect(log.query({ status: 'failed' }, 10)).toMatchObject({ matched: 2, requests: [{ id: 'd' }, { id: 'b' }] });
    expect(log.query({}, 2, 'c').requests.map((r) => r.id)).toEqual(['b', 'a']);
  });
});
