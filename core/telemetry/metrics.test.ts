import { describe, expect, it } from 'vitest';
import { TransportMetrics } from './metrics.ts';

const line = (text: string, series: string) =>
  text
    .split('\n')
    .find((l) => l.startsWith(`${series} `))
    ?.slice(series.length + 1);

describe('TransportMetrics.observeRequest', () => {
  it("exports a disaggregated request's legs by worker and leg, and the gateway's PD prefill and end-to-end TTFT", async () => {
    const m = new TransportMetrics();
    const runtimes: Record<string, string> = { 'grpc://p:1': 'vllm', 'grpc://d:2': 'sglang' };
    m.observeRequest(
      {
        id: 'a',
        time: 1,
        status: 200,
        durationMs: 700,
        worker: 'grpc://d:2',
        legs: [
          { leg: 'encode', worker: 'grpc://e:0', startMs: 2, durationMs: 40, error: 'encode worker unavailable' },
          { leg: 'prefill', worker: 'grpc://p:1', startMs: 42, durationMs: 120 },
          { leg: 'decode', worker: 'grpc://d:2', startMs: 162, durationMs: 530, firstTokenMs: 38 },
        ],
      },
      'qwen2-vl-mini',
      (w) => runtimes[w],
    );
    const text = await m.text();
    expect(line(text, 'smg_worker_cb_outcomes_total{worker="grpc://e:0",outcome="failure"}')).toBe('1');
    expect(line(text, 'smg_worker_cb_outcomes_total{worker="grpc://d:2",outcome="success"}')).toBe('1');
    expect(line(text, 'mmtc_worker_leg_requests_total{worker="grpc://e:0",leg="encode",outcome="failure"}')).toBe('1');
    expect(line(text, 'mmtc_worker_leg_requests_total{worker="grpc://p:1",leg="prefill",outcome="success"}')).toBe('1');
    expect(line(text, 'mmtc_worker_leg_requests_total{worker="grpc://p:1",leg="prefill",outcome="failure"}')).toBeUndefined();
    expect(line(text, 'mmtc_worker_leg_duration_seconds_sum{worker="grpc://p:1",leg="prefill"}')).toBe('0.12');
    expect(line(text, 'mmtc_worker_leg_ttft_seconds_sum{worker="grpc://d:2",leg="decode"}')).toBe('0.038');
    expect(line(text, 'smg_pd_prefill_duration_seconds_sum{backend_type="pd",model="qwen2-vl-mini",runtime="vllm"}')).toBe('0.12');
    // From the prefill's start (42 ms) to the decode's first token (162 + 38 ms).
    expect(line(text, 'smg_pd_ttft_seconds_sum{backend_type="pd",model="qwen2-vl-mini",runtime="sglang"}')).toBe('0.158');
  });

  it('as the gateway, the PD metrics are success-only: a request whose decode failed records no prefill duration; smg_worker_health is 0 for a worker out of rotation', async () => {
    const m = new TransportMetrics();
    m.watchWorkers(() => [
      { url: 'grpc://p:1', ready: true, inFlight: 0 },
      { url: 'grpc://d:2', ready: false, inFlight: 1 },
    ]);
    m.observeRequest(
      {
        id: 'b',
        time: 1,
        status: 502,
        durationMs: 300,
        worker: 'grpc://d:2',
        error: 'decode worker failed',
        legs: [
          { leg: 'prefill', worker: 'grpc://p:1', startMs: 1, durationMs: 100 },
          { leg: 'decode', worker: 'grpc://d:2', startMs: 101, durationMs: 20, error: 'decode worker failed' },
        ],
      },
      'qwen2-vl-mini',
      () => 'vllm',
    );
    const text = await m.text();
    expect(line(text, 'smg_pd_prefill_duration_seconds_count{backend_type="pd",model="qwen2-vl-mini",runtime="vllm"}')).toBeUndefined();
    expect(line(text, 'smg_worker_health{worker="grpc://p:1"}')).toBe('1');
    expect(line(text, 'smg_worker_health{worker="grpc://d:2"}')).toBe('0');
  });
});
