// The Workers screen's rates panel as the operator first sees it (server-rendered, its store in
// the state under test): each worker's row, the leg column under disaggregation only, the numbers
// of each series, what the charts plot, the empty window, and a failure.
import { describe, expect, it } from 'vitest';
import { commands, type Rates } from '../../../core/console/contract.ts';
import { render, withState } from '../test/render.tsx';
import { useRates } from '../stores/rates.ts';
import { RatesPanel } from './RatesPanel.tsx';

const T = 1_700_000_040_000;
/** A minute of buckets, `perBucket` requests each second (`errorsAt` of them failed in the last), p50/p99 as given. */
function series(worker: string, leg: 'regular' | 'encode' | 'prefill' | 'decode', perBucket: number, p50Ms: number | null, p99Ms: number | null, errors = 0) {
  const points = Array.from({ length: 60 }, (_, i) => ({ t: T - 59_000 + i * 1000, requests: perBucket, errors: i === 59 ? errors : 0, p50Ms, p99Ms }));
  const requests = perBucket * 60;
  return { worker, leg, requests, errors, perSecond: perBucket, errorRate: errors / requests, p50Ms, p99Ms, points };
}
const rates = (s: ReturnType<typeof series>[], window: Rates['window'] = '1m'): Rates =>
  commands['metrics.rates'].output.parse({ window, bucketMs: { '1m': 1000, '15m': 10_000, '1h': 60_000 }[window], now: T, percentileError: 0.118, series: s });

describe('RatesPanel', () => {
  it('regular workers: a row each with requests/s, the error rate and its count, p50 and p99; no leg column', () => {
    const { text, html } = render(
      <RatesPanel />,
      withState(useRates, {
        data: rates([series('grpc://127.0.0.1:50051', 'regular', 12, 42, 180, 6), series('grpc://127.0.0.1:50052', 'regular', 2, null, null)]),
      }),
    );
    expect(text).toContain('Requests per worker over the last minute');
    expect(text).toContain('grpc://127.0.0.1:50051 12.0/s 0.8 % (6 of 720) 42.0 ms 180 ms');
    // No request of this window had its duration: a dash, not 0 ms.
    expect(text).toContain('grpc://127.0.0.1:50052 2.0/s 0 % (0 of 120) – –');
    expect(text).not.toContain('Leg');
    expect(text).toContain('p50 and p99 are within ±12 %');
    // The requests/s chart plots each second's rate: 12 + 2 a second over 60 s.
    expect(html).toMatch(/aria-label="Requests\/s per worker over the last minute" data-sum="840"/);
    expect(html).toMatch(/aria-label="Error rate per worker over the last minute" data-sum="0.5"/);
  });

  it('under disaggregation: the leg of each row', () => {
    const { text } = render(
      <RatesPanel />,
      withState(useRates, {
        data: rates([series('grpc://10.0.0.1:50051', 'encode', 4, 30, 60), series('grpc://10.0.0.2:50051', 'decode', 4, 400, 900)]),
      }),
    );
    expect(text).toContain('Worker Leg Requests/s Errors p50 p99');
    expect(text).toContain('grpc://10.0.0.1:50051 encode 4.0/s');
    expect(text).toContain('grpc://10.0.0.2:50051 decode 4.0/s 0 % (0 of 240) 400 ms 900 ms');
  });

  it('an empty window says so and what is counted', () => {
    const { text } = render(<RatesPanel />, withState(useRates, { window: '15m', data: rates([], '15m') }));
    expect(text).toContain('No requests to a worker in the last 15 minutes');
    expect(text).toContain(
      "Each request that reaches a worker is counted here, per worker and leg: the router's API's and the console's own (test requests, calibration).",
    );
  });

  it('a failure says why', () => {
    const { text } = render(<RatesPanel />, withState(useRates, { error: 'the console backend is not reachable' }));
    expect(text).toContain('✕ the console backend is not reachable');
    expect(text).not.toContain('Loading');
  });
});
