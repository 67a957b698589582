// Precedence's "last request to this worker": the tensors that worker received, and no other's.
import { describe, expect, it } from 'vitest';
import { render, withState } from '../test/render.tsx';
import { configView, decision, overview, resolution, routerConfig, tensorEvent, workerView, WORKER_A, WORKER_B } from '../test/samples.ts';
import { useConfig } from '../stores/config.ts';
import { useOverview } from '../stores/overview.ts';
import { useWorkers } from '../stores/workers.ts';
import { useTraffic } from '../stores/traffic.ts';
import { PrecedenceScreen } from './Precedence.tsx';

const ENCODE = WORKER_A;
const PREFILL = WORKER_B;
const DECODE = 'grpc://127.0.0.1:50053';

/** The rows of the last caption's table: tensor name and size, as the operator reads them. */
function lastRequestRows(html: string): string[] {
  const table = /<caption>The last request to this worker<\/caption>[\s\S]*?<\/table>/.exec(html)?.[0] ?? '';
  return [...table.matchAll(/<td class="mono">([^<]+)<\/td><td class="r num">([^<]+)<\/td>/g)].map((m) => `${m[1]} ${m[2]}`);
}

describe('Precedence screen', () => {
  it("under EPD, an encode worker's last request shows its encoder inputs, once each, and none of the prefill's or decode's metadata", () => {
    const config = routerConfig({
      disaggregation: 'epd',
      multimodal_tensor_transport: 'shm',
      workers: [
        { url: ENCODE, worker_type: 'encode', runtime: 'tokenspeed' },
        { url: PREFILL, worker_type: 'prefill', runtime: 'tokenspeed', bootstrap_port: 8999 },
        { url: DECODE, worker_type: 'decode', runtime: 'tokenspeed' },
      ],
    });
    const ev = (worker: string, leg: 'encode' | 'prefill' | 'decode', tensor: string, nbytes: number, over = {}) =>
      tensorEvent({ requestId: 'chatcmpl-9', worker, leg, tensor, nbytes, shape: [nbytes], path: 'inline', reason: 'below_threshold', ...over });
    // Oldest first as the router sent them: two images to the encode worker (the second read
    // inline after its /dev/shm file could not be read: attempt 2), then the prefill and decode
    // legs with the images' metadata. The store keeps rows newest first.
    const sent = [
      ev(ENCODE, 'encode', 'encoder_input', 2_408_448, { room: '11', path: 'shm', reason: 'shm_writable' }),
      ev(ENCODE, 'encode', 'encoder_input', 1_204_224, { room: '12', path: 'shm', reason: 'shm_writable' }),
      ev(ENCODE, 'encode', 'encoder_input', 1_204_224, { room: '12', attempt: 2, reason: 'shm_worker_read_failed' }),
      ev(PREFILL, 'prefill', 'image_grid_thw', 24),
      ev(PREFILL, 'prefill', 'image_grid_thw', 24),
      ev(DECODE, 'decode', 'image_grid_thw', 24),
      ev(DECODE, 'decode', 'image_grid_thw', 24),
    ];
    const { html } = render(
      <PrecedenceScreen worker={ENCODE} />,
      withState(useConfig, {
        view: configView({ config }),
        resolved: [{ url: ENCODE, resolution: resolution(ENCODE, { router: 'shm' }, {}, 'encode'), decision: decision('shm_writable', 'shm') }],
        resolvedFor: 'applied',
      }),
      withState(useTraffic, { rows: [...sent].reverse() }),
    );
    expect(lastRequestRows(html)).toEqual(['encoder_input 2.30 MiB', 'encoder_input 1.15 MiB']);
  });

  it('a worker that is down: its verdict is that no request reaches it, and the chain does not blame its token', () => {
    const down = decision('worker_not_healthy', 'no_request');
    const { html, text } = render(
      <PrecedenceScreen worker={WORKER_A} />,
      withState(useConfig, {
        view: configView(),
        resolved: [{ url: WORKER_A, resolution: resolution(WORKER_A, { router: 'auto' }), decision: { ...down, shmEnabled: false } }],
        resolvedFor: 'applied',
      }),
      withState(useWorkers, { loaded: true, workers: [workerView(WORKER_A, { health: 'unhealthy', decision: { ...down, shmEnabled: false } })] }),
      withState(useOverview, { data: overview() }),
    );
    expect(text).toContain('Verdict ✕ no request reaches it worker_not_healthy');
    expect(text).toContain('not reached: no request reaches this worker now (see the verdict).');
    expect(html).toContain('class="verdict verdict-bad"');
    // Its token matches: the token step passes; what stops it is its health, which the verdict says.
    expect(html).toMatch(/Namespace token matches <span class="badge badge-ok"><span class="badge-icon" aria-hidden="true">✓<\/span>pass<\/span>/);
  });
});
