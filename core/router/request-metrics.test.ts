// The per-worker metrics and rates through a real router and a real `mmtc worker`: requests that
// succeed and one the worker refuses, then GET /metrics and the rates (docs/router.md, "Metrics").
import { describe, expect, it } from 'vitest';
import { useRouterRig } from '../test/router-rig.ts';
import type { RequestSummary } from '../telemetry/requests.ts';
import type { RunningRouter } from './server.ts';

const { startWorker, router } = useRouterRig();

const PNG_1x1 = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC';
const chat = (extra: Record<string, unknown> = {}) => ({
  messages: [
    {
      role: 'user',
      content: [
        { type: 'image_url', image_url: { url: `data:image/png;base64,${PNG_1x1}` } },
        { type: 'text', text: 'What is it?' },
      ],
    },
  ],
  ...extra,
});
const post = (r: RunningRouter, body: unknown) =>
  fetch(`${r.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

/** The value of one sample line of the Prometheus text, or undefined when there is none. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe('per-worker request metrics', () => {
  it('count each worker call by outcome and leg at /metrics, with the rates from the same requests', async () => {
    const worker = await startWorker('tokenspeed');
    const r = await router(worker, 'inline');
    const seen: RequestSummary[] = [];
    r.context.requests!.subscribe((summary) => seen.push(summary));
    for (let i = 0; i < 3; i++) expect((await post(r, chat())).status).toBe(200);
    // TokenSpeed's engine refuses top_k 200 (its fused kernel's limit): the worker call fails.
    expect((await post(r, chat({ top_k: 200 }))).status).toBe(502);
    // A request refused before any worker is no worker's.
    expect((await post(r, { messages: [] })).status).toBe(400);

    const res = await fetch(`${r.url}/metrics`);
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(sample(text, `smg_worker_cb_outcomes_total{worker="${worker}",outcome="success"}`)).toBe(3);
    expect(sample(text, `smg_worker_cb_outcomes_total{worker="${worker}",outcome="failure"}`)).toBe(1);
    expect(sample(text, `mmtc_worker_leg_requests_total{worker="${worker}",leg="regular",outcome="success"}`)).toBe(3);
    expect(sample(text, `mmtc_worker_leg_requests_total{worker="${worker}",leg="regular",outcome="failure"}`)).toBe(1);
    // The four requests that reached the worker, timed as the HTTP API's requests are.
    expect(text).toMatch(/^smg_router_request_duration_seconds_count\{router_type="grpc",backend_type="regular",[^}]*\} 4$/m);
    expect(sample(text, `smg_worker_health{worker="${worker}"}`)).toBe(1);
    expect(sample(text, `smg_worker_requests_active{worker="${worker}"}`)).toBe(0);

    const rates = r.context.rates!.read('1m');
    expect(rates.series).toHaveLength(1);
    expect(rates.series[0]).toMatchObject({ worker, leg: 'regular', requests: 4, errors: 1, errorRate: 0.25 });
    // Latency: every request the router timed is in the histogram and the percentiles (one source).
    const timed = seen.filter((s) => s.worker && s.durationMs !== undefined).length;
    expect(sample(text, `mmtc_worker_leg_duration_seconds_count{worker="${worker}",leg="regular"}`) ?? 0).toBe(timed);
    expect(rates.series[0]!.p50Ms === null).toBe(timed === 0);
  });
});
