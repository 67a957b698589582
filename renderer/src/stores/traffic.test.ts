// The traffic store as plain functions (the filters, the per-second window) and its feed
// outside React: one table update per frame however many batches arrive, pause and a hidden
// page holding the table still, the catch-up from the server after either, the dropped count.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ContractError, type RequestFailure, type TensorEvent } from '../../../core/console/contract.ts';
import { fakeConsole } from '../test/fake-console.ts';
import { secondAggregate, tensorEvent } from '../test/samples.ts';
import { filterRows, mergeFailures, mergeSeconds } from './traffic.ts';

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
  /** The page around the feed: animation frames run when the test says, and a document whose visibility the test sets. */
  async function page() {
    vi.resetModules();
    const frames: Array<() => void> = [];
    const visibility: { state: 'visible' | 'hidden'; listeners: Array<() => void> } = { state: 'visible', listeners: [] };
    vi.stubGlobal('requestAnimationFrame', (cb: () => void) => frames.push(cb));
    vi.stubGlobal('document', {
      get visibilityState() {
        return visibility.state;
      },
      addEventListener: (_: string, l: () => void) => visibility.listeners.push(l),
      removeEventListener: (_: string, l: () => void) => visibility.listeners.splice(visibility.listeners.indexOf(l), 1),
    });
    const fake = fakeConsole({ 'traffic.snapshot': () => ({ events: [], seconds: [], failed: [] }) });
    const { setClient } = await import('./client.ts');
    const traffic = await import('./traffic.ts');
    setClient(fake.client);
    const updates = { count: 0 };
    traffic.useTraffic.subscribe(() => updates.count++);
    return {
      fake,
      traffic,
      updates,
      state: () => traffic.useTraffic.getState(),
      rows: () => traffic.useTraffic.getState().rows.map((r) => r.requestId),
      /** Run the animation frames asked for so far. */
      frame: () => frames.splice(0).forEach((f) => f()),
      setVisibility(state: 'visible' | 'hidden') {
        visibility.state = state;
        for (const l of [...visibility.listeners]) l();
      },
    };
  }
  const settled = () => new Promise((r) => setTimeout(r, 10));
  const batch = (events: TensorEvent[], dropped = 0, seconds: ReturnType<typeof secondAggregate>[] = [], failed: RequestFailure[] = []) => ({
    events,
    seconds,
    dropped,
    failed,
  });

  afterEach(() => {
    vi.unstubAllGlobals();
  });

  it('batches arriving between two frames reach the table in one update at the next frame, newest first', async () => {
    const p = await page();
    const stop = p.traffic.startTrafficFeed();
    await settled();
    const before = p.updates.count;
    p.fake.emit('traffic', batch([tensorEvent({ requestId: 'chatcmpl-1' }), tensorEvent({ requestId: 'chatcmpl-2' })]));
    p.fake.emit('traffic', batch([tensorEvent({ requestId: 'chatcmpl-3' })]));
    expect(p.rows()).toEqual([]);
    p.frame();
    expect(p.rows()).toEqual(['chatcmpl-3', 'chatcmpl-2', 'chatcmpl-1']);
    expect(p.updates.count - before).toBe(1);
    stop();
  });

  it('paused: the table holds still and counts what it does not show; resume catches up from the server, not from a backlog', async () => {
    const p = await page();
    const stop = p.traffic.startTrafficFeed();
    await settled();
    p.fake.emit('traffic', batch([tensorEvent({ requestId: 'chatcmpl-1' })]));
    p.frame();
    p.state().setPaused(true);
    p.fake.emit('traffic', batch([tensorEvent({ requestId: 'chatcmpl-2' }), tensorEvent({ requestId: 'chatcmpl-3' })], 0, [secondAggregate(1_700_000_000, 2)]));
    p.frame();
    expect(p.rows()).toEqual(['chatcmpl-1']);
    expect(p.state().skipped).toBe(2);
    // The per-second charts keep moving while the table is paused.
    expect(p.state().seconds.map((s) => [s.second, s.tensors.inline])).toEqual([[1_700_000_000, 2]]);

    p.fake.answer('traffic.snapshot', () => ({
      events: ['chatcmpl-1', 'chatcmpl-2', 'chatcmpl-3'].map((requestId, i) => tensorEvent({ requestId, time: 1_700_000_000_000 + i })),
      seconds: [],
      failed: [],
    }));
    p.state().setPaused(false);
    await settled();
    expect(p.rows()).toEqual(['chatcmpl-3', 'chatcmpl-2', 'chatcmpl-1']);
    expect(p.state().skipped).toBe(0);
    expect(p.fake.inputsOf('traffic.snapshot').at(-1)).toEqual({ limit: p.traffic.MAX_ROWS });
    stop();
  });

  it('a hidden page queues nothing and catches up when it is shown again', async () => {
    const p = await page();
    const stop = p.traffic.startTrafficFeed();
    await settled();
    const snapshots = p.fake.inputsOf('traffic.snapshot').length;
    p.setVisibility('hidden');
    p.fake.emit('traffic', batch([tensorEvent({ requestId: 'chatcmpl-1' })]));
    p.frame();
    expect(p.rows()).toEqual([]);
    p.fake.answer('traffic.snapshot', () => ({ events: [tensorEvent({ requestId: 'chatcmpl-1' })], seconds: [], failed: [] }));
    p.setVisibility('visible');
    await settled();
    expect(p.fake.inputsOf('traffic.snapshot')).toHaveLength(snapshots + 1);
    expect(p.rows()).toEqual(['chatcmpl-1']);
    stop();
    expect(p.fake.listening('traffic')).toBe(0);
  });

  it("the server's dropped count adds up across reconnects (each subscription counts from zero)", async () => {
    const p = await page();
    const stop = p.traffic.startTrafficFeed();
    await settled();
    p.fake.emit('traffic', batch([], 3));
    p.fake.emit('traffic', batch([], 5));
    expect(p.state().dropped).toBe(5);
    p.fake.emit('traffic', batch([], 1));
    expect(p.state().dropped).toBe(6);
    stop();
  });

  it("a catch-up that fails shows the backend's words", async () => {
    const p = await page();
    p.fake.answer('traffic.snapshot', () => {
      throw new ContractError('unauthorized', 'missing or wrong console token: open the URL mmtc serve printed (it ends with #token=…)');
    });
    const stop = p.traffic.startTrafficFeed();
    await settled();
    expect(p.state().error).toBe('missing or wrong console token: open the URL mmtc serve printed (it ends with #token=…)');
    expect(p.state().catchingUp).toBe(false);
    stop();
  });

  it('an event the catch-up snapshot already showed is not shown again when its stream batch arrives after it', async () => {
    const p = await page();
    const e1 = tensorEvent({ requestId: 'chatcmpl-1', time: 10 });
    const e2 = tensorEvent({ requestId: 'chatcmpl-2', time: 20 });
    // The snapshot already holds e1, which the stream sends only in its next batch.
    p.fake.answer('traffic.snapshot', () => ({ events: [e1], seconds: [], failed: [] }));
    const stop = p.traffic.startTrafficFeed();
    await vi.waitFor(() => expect(p.rows()).toEqual(['chatcmpl-1']));
    p.fake.emit('traffic', batch([e1, e2]));
    p.frame();
    expect(p.rows()).toEqual(['chatcmpl-2', 'chatcmpl-1']);
    stop();
  });

  it('a failed request: its rows are known as failed from the batch that says so, also while paused, and from the catch-up snapshot', async () => {
    const p = await page();
    p.fake.answer('traffic.snapshot', () => ({
      events: [tensorEvent({ requestId: 'chatcmpl-old' })],
      seconds: [],
      failed: [{ requestId: 'chatcmpl-old', status: 503, error: 'no healthy worker' }],
    }));
    const stop = p.traffic.startTrafficFeed();
    await vi.waitFor(() => expect(p.rows()).toEqual(['chatcmpl-old']));
    expect(p.state().failed.get('chatcmpl-old')).toEqual({ requestId: 'chatcmpl-old', status: 503, error: 'no healthy worker' });
    p.state().setPaused(true);
    p.fake.emit('traffic', batch([tensorEvent({ requestId: 'chatcmpl-9' })], 0, [], [{ requestId: 'chatcmpl-9', status: 502, error: 'worker unavailable' }]));
    expect(p.state().failed.get('chatcmpl-9')?.status).toBe(502);
    expect(p.state().failed.has('chatcmpl-old')).toBe(true);
    stop();
  });
});

describe('mergeFailures', () => {
  it('keeps the newest up to its cap, a repeated id moved to the newest', () => {
    const f = (id: string, status = 502) => ({ requestId: id, status, error: null });
    let kept = mergeFailures(new Map(), [f('a'), f('b'), f('c')], 3);
    kept = mergeFailures(kept, [f('a', 504), f('d')], 3);
    expect([...kept.keys()]).toEqual(['c', 'a', 'd']);
    expect(kept.get('a')?.status).toBe(504);
    expect(mergeFailures(kept, [], 3)).toBe(kept);
  });
});
