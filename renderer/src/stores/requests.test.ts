// The requests store against a console held to the contract (fake-console.ts): the list loaded
// with the filters in force (what the contract would refuse is refused), the stream adding each
// request that passes them on top, and a selected request's whole record.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ContractError, type RequestRow, type RequestSummaryView } from '../../../core/console/contract.ts';
import { fakeConsole } from '../test/fake-console.ts';
import { setClient } from './client.ts';
import { addStreamed, filterInput, NO_FILTERS, startRequestsFeed, useRequests } from './requests.ts';

const W1 = 'grpc://127.0.0.1:50051';
const W2 = 'grpc://127.0.0.1:50052';
const row = (over: Partial<RequestRow>): RequestRow => ({
  id: 'chatcmpl-1',
  time: 1_700_000_000_000,
  status: 200,
  durationMs: 12,
  model: 'demo',
  worker: W1,
  legs: [{ leg: 'regular', worker: W1, startMs: 2, durationMs: 10, firstTokenMs: 5 }],
  tensorCount: 2,
  cacheHits: 0,
  ...over,
});
const failed = row({
  id: 'chatcmpl-2',
  status: 504,
  error: 'worker grpc://127.0.0.1:50051 did not answer within 1 s',
  legs: [{ leg: 'regular', worker: W1, startMs: 2, durationMs: 1000, error: 'timed out' }],
});
const epd = row({
  id: 'chatcmpl-3',
  worker: W2,
  legs: [
    { leg: 'encode', worker: W1, startMs: 3, durationMs: 4, image: 0 },
    { leg: 'prefill', worker: W2, startMs: 3, durationMs: 6 },
    { leg: 'decode', worker: W2, startMs: 3, durationMs: 9, firstTokenMs: 7 },
  ],
});
const page = (requests: RequestRow[]) => ({ requests, matched: requests.length, kept: requests.length, capacity: 10_000, workers: [W1, W2], models: ['demo'] });

afterEach(() => {
  useRequests.setState(useRequests.getInitialState());
});

async function connect(answers: Parameters<typeof fakeConsole>[0]) {
  const fake = fakeConsole(answers);
  setClient(fake.client);
  return fake;
}

describe('the requests store', () => {
  it('loads with the filters as the contract takes them: what is "all" is left out', async () => {
    const fake = await connect({ 'requests.list': () => page([failed]) });
    useRequests.getState().setFilters({ status: 'failed', worker: W1, leg: 'regular', errorsOnly: true });
    await vi.waitFor(() => expect(useRequests.getState().rows.map((r) => r.id)).toEqual(['chatcmpl-2']));
    expect(fake.inputsOf('requests.list').at(-1)).toEqual({ status: 'failed', worker: W1, leg: 'regular', errorsOnly: true, limit: 5_000 });
    expect(filterInput(NO_FILTERS)).toEqual({});
  });

  it("a list the console refuses shows the backend's words", async () => {
    await connect({
      'requests.list': () => {
        throw new ContractError('unauthorized', 'missing or wrong console token');
      },
    });
    await useRequests.getState().load();
    expect(useRequests.getState().error).toBe('missing or wrong console token');
  });

  it('the stream puts each request that passes the filters on top, newest first, and no other', () => {
    const filters = { ...NO_FILTERS, status: 'failed' as const };
    const { rows, added } = addStreamed(
      [row({ id: 'old', status: 500, error: 'x' })],
      [row({ id: 'fine' }), failed, row({ id: 'newer-fail', status: 502, error: 'y' })],
      filters,
    );
    expect(added).toBe(2);
    expect(rows.map((r) => r.id)).toEqual(['newer-fail', 'chatcmpl-2', 'old']);
    expect(addStreamed([], [epd, row({})], { ...NO_FILTERS, leg: 'encode' }).rows.map((r) => r.id)).toEqual(['chatcmpl-3']);
    expect(addStreamed([], [epd, row({})], { ...NO_FILTERS, worker: W2 }).rows.map((r) => r.id)).toEqual(['chatcmpl-3']);
    expect(addStreamed([], [row({ id: 'a' }), row({ id: 'b' }), row({ id: 'c' })], NO_FILTERS, 2).rows.map((r) => r.id)).toEqual(['c', 'b']);
  });

  it('streamed requests reach the list and its counts; a new worker is offered in the filters', async () => {
    const fake = await connect({ 'requests.list': () => page([row({})]) });
    await useRequests.getState().load();
    const stop = startRequestsFeed();
    fake.emit('requests', {
      requests: [row({ id: 'chatcmpl-9', legs: [{ leg: 'regular', worker: 'grpc://10.0.0.9:1', startMs: 0, durationMs: 1 }] })],
      dropped: 0,
    });
    expect(useRequests.getState().rows.map((r) => r.id)).toEqual(['chatcmpl-9', 'chatcmpl-1']);
    expect(useRequests.getState().matched).toBe(2);
    expect(useRequests.getState().workers).toContain('grpc://10.0.0.9:1');
    stop();
    expect(fake.listening('requests')).toBe(0);
  });

  it('selecting a request fetches its whole record; one the router forgot is null', async () => {
    const record: RequestSummaryView = { ...epd, phases: [{ name: 'body', startMs: 0, durationMs: 1 }], tensors: [] };
    delete (record as { tensorCount?: number }).tensorCount;
    const fake = await connect({ 'traffic.request': ({ requestId }) => (requestId === 'chatcmpl-3' ? record : null) });
    await useRequests.getState().select('chatcmpl-3');
    expect(useRequests.getState().detail?.legs?.map((l) => l.leg)).toEqual(['encode', 'prefill', 'decode']);
    expect(fake.inputsOf('traffic.request')).toEqual([{ requestId: 'chatcmpl-3' }]);
    await useRequests.getState().select('gone');
    expect(useRequests.getState().detail).toBeNull();
    expect(useRequests.getState().detailError).toBeNull();
  });
});
