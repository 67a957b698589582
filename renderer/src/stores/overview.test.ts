// The Overview store as plain functions: the overview and when it was fetched, a failed fetch
// said in the backend's words beside the last one, and the pixel cache's flush (the screen
// shows the cache as the flush left it at once, then fetches the overview again).
import { beforeEach, describe, expect, it } from 'vitest';
import { ContractError, type PixelCacheView } from '../../../core/console/contract.ts';
import { fakeConsole, type FakeConsole } from '../test/fake-console.ts';
import { overview } from '../test/samples.ts';
import { setClient } from './client.ts';
import { flushPixelCache, useOverview } from './overview.ts';

const cache = (over: Partial<PixelCacheView> = {}): PixelCacheView => ({
  budgetBytes: 512 * 2 ** 20,
  heldBytes: 96 * 2 ** 20,
  entries: 12,
  hits: 30,
  misses: 12,
  evictions: 0,
  tampered: 0,
  notStored: 0,
  flushes: 0,
  configured: { mb: 512, source: 'default', origin: null },
  off: null,
  ...over,
});

let fake: FakeConsole;
beforeEach(() => {
  useOverview.setState(useOverview.getInitialState(), true);
  fake = fakeConsole({ overview: () => overview({ pixelCache: cache() }) });
  setClient(fake.client);
});

describe('overview store', () => {
  it('load takes the overview and the time it arrived', async () => {
    const before = Date.now();
    await useOverview.getState().load();
    const s = useOverview.getState();
    expect(s.data?.pixelCache?.entries).toBe(12);
    expect(s.loadedAt).toBeGreaterThanOrEqual(before);
    expect(s.error).toBeNull();
  });

  it('a failed load says why and keeps the last overview (the screen says how old it is)', async () => {
    await useOverview.getState().load();
    const loadedAt = useOverview.getState().loadedAt;
    fake.answer('overview', () => {
      throw new ContractError('unauthorized', 'missing or wrong console token: open the URL mmtc serve printed (it ends with #token=…)');
    });
    await useOverview.getState().load();
    expect(useOverview.getState()).toMatchObject({
      error: 'missing or wrong console token: open the URL mmtc serve printed (it ends with #token=…)',
      loadedAt,
    });
    expect(useOverview.getState().data).not.toBeNull();
  });

  it('Flush: the cache as the flush left it is on screen before the next overview arrives', async () => {
    await useOverview.getState().load();
    let answer!: () => void;
    fake.answer('pixelCache.flush', () => ({ dropped: 12, pixelCache: cache({ heldBytes: 0, entries: 0, flushes: 1 }) }));
    fake.answer('overview', async () => {
      await new Promise<void>((r) => (answer = r));
      return overview({ pixelCache: cache({ heldBytes: 0, entries: 0, flushes: 1, misses: 13 }) });
    });
    expect(await flushPixelCache()).toMatchObject({ dropped: 12 });
    expect(useOverview.getState().data?.pixelCache).toMatchObject({ entries: 0, heldBytes: 0, flushes: 1, misses: 12 });
    answer();
    await new Promise((r) => setTimeout(r, 10));
    expect(useOverview.getState().data?.pixelCache?.misses).toBe(13);
  });
});
