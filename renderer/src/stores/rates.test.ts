// The rates store as plain functions: the window's rates as the console answers them, a new
// window asked for at once (what was on screen for the old one gone), an answer for a window
// the operator has left dropped, and a failure said in the backend's words.
import { beforeEach, describe, expect, it } from 'vitest';
import { ContractError, type Rates, type RateWindow } from '../../../core/console/contract.ts';
import { fakeConsole, type FakeConsole } from '../test/fake-console.ts';
import { setClient } from './client.ts';
import { refreshMs, useRates } from './rates.ts';

const BUCKET: Record<RateWindow, number> = { '1m': 1000, '15m': 10_000, '1h': 60_000 };
const rates = (window: RateWindow, requests: number): Rates => ({
  window,
  bucketMs: BUCKET[window],
  now: 1_700_000_000_000,
  percentileError: 0.118,
  series: [{ worker: 'grpc://127.0.0.1:50051', leg: 'regular', requests, errors: 0, perSecond: requests / 60, errorRate: 0, p50Ms: 40, p99Ms: 90, points: [] }],
});

let fake: FakeConsole;
beforeEach(() => {
  useRates.setState(useRates.getInitialState(), true);
  fake = fakeConsole({ 'metrics.rates': ({ window }) => rates(window, 60) });
  setClient(fake.client);
});

describe('rates store', () => {
  it('load asks for the chosen window (the last minute at first) and keeps its answer', async () => {
    await useRates.getState().load();
    expect(fake.inputsOf('metrics.rates')).toEqual([{ window: '1m' }]);
    expect(useRates.getState().data?.series[0]?.requests).toBe(60);
  });

  it('another window: asked for at once, and the old window’s rates are not shown under its name', async () => {
    await useRates.getState().load();
    let answer!: () => void;
    fake.answer('metrics.rates', async ({ window }) => {
      await new Promise<void>((r) => (answer = r));
      return rates(window, 900);
    });
    useRates.getState().setWindow('15m');
    expect(useRates.getState()).toMatchObject({ window: '15m', data: null });
    answer();
    await new Promise((r) => setTimeout(r, 10));
    expect(fake.inputsOf('metrics.rates').at(-1)).toEqual({ window: '15m' });
    expect(useRates.getState().data).toMatchObject({ window: '15m', series: [{ requests: 900 }] });
  });

  it('an answer for a window the operator has left is dropped', async () => {
    let answer!: () => void;
    fake.answer('metrics.rates', async ({ window }) => {
      if (window === '1m') await new Promise<void>((r) => (answer = r));
      return rates(window, window === '1m' ? 1 : 3600);
    });
    const late = useRates.getState().load();
    useRates.getState().setWindow('1h');
    await new Promise((r) => setTimeout(r, 10));
    answer();
    await late;
    expect(useRates.getState().data).toMatchObject({ window: '1h', series: [{ requests: 3600 }] });
  });

  it('a failed load says why', async () => {
    fake.answer('metrics.rates', () => {
      throw new ContractError('unauthorized', 'missing or wrong console token: open the URL mmtc serve printed (it ends with #token=…)');
    });
    await useRates.getState().load();
    expect(useRates.getState().error).toBe('missing or wrong console token: open the URL mmtc serve printed (it ends with #token=…)');
  });

  it('fetches again every second for the minute, every 5 s for the longer windows', () => {
    expect([refreshMs('1m'), refreshMs('15m'), refreshMs('1h')]).toEqual([1000, 5000, 5000]);
  });
});
