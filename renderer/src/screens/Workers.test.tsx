// The Workers screen's states the end-to-end tests do not reach (e2e/workers.spec.ts and
// override.spec.ts add, edit and remove workers on a running router): no workers at all, a
// list that could not be fetched again (the last one stays, with the reason), and a draft with
// a problem (the values shown are from before it).
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { render, withState } from '../test/render.tsx';
import { configView, routerConfig, workerView, WORKER_A, WORKER_B } from '../test/samples.ts';
import { useConfig } from '../stores/config.ts';
import { useWorkers } from '../stores/workers.ts';
import { WorkerEditor, WorkersScreen } from './Workers.tsx';
import { formatClock } from '../lib/format.ts';

beforeEach(() => {
  vi.useFakeTimers();
  vi.setSystemTime(1_700_000_060_000);
});
afterEach(() => {
  vi.useRealTimers();
});

describe('Workers screen', () => {
  it('no workers: says so and what a worker URL looks like', () => {
    const { text } = render(<WorkersScreen />, withState(useWorkers, { loaded: true, workers: [] }));
    expect(text).toContain('No workers Add a worker (grpc://host:port or unix:///path) to send requests to it.');
  });

  it("each worker's model and family; a worker of another family than the router's says what it would get and what to do", () => {
    const { text } = render(
      <WorkersScreen />,
      withState(useWorkers, {
        loaded: true,
        workers: [
          workerView(WORKER_A, {
            model: {
              name: '/models/Qwen2-VL-7B-Instruct/',
              modelType: 'qwen2_vl',
              family: 'Qwen2-VL, Qwen2.5-VL',
              sameFamily: true,
              routerFamily: 'Qwen2-VL, Qwen2.5-VL',
            },
          }),
          workerView(WORKER_B, {
            model: { name: 'llava-hf/llava-1.5-7b-hf', modelType: 'llava', family: 'LLaVA-1.5', sameFamily: false, routerFamily: 'Qwen2-VL, Qwen2.5-VL' },
          }),
        ],
      }),
      withState(useConfig, { view: configView() }),
    );
    expect(text).toContain('model Qwen2-VL-7B-Instruct · Qwen2-VL, Qwen2.5-VL');
    expect(text).toContain(
      "model llava-1.5-7b-hf · LLaVA-1.5 not the router's family (Qwen2-VL, Qwen2.5-VL): its images would get Qwen2-VL, Qwen2.5-VL's tensors and token counts",
    );
    expect(text.match(/not the router's family/g)).toHaveLength(1);
  });

  it('before the list arrives: no "No workers" yet', () => {
    expect(render(<WorkersScreen />).text).not.toContain('No workers');
  });

  it('a list that could not be fetched again: the reason above the list it had', () => {
    const { text } = render(
      <WorkersScreen />,
      withState(useWorkers, {
        loaded: true,
        workers: [workerView(WORKER_A), workerView(WORKER_B, { health: 'unhealthy', lastError: 'connection refused' })],
        error: 'the console backend did not start: EADDRINUSE',
      }),
      withState(useConfig, { view: configView() }),
    );
    expect(text).toContain('✕ the console backend did not start: EADDRINUSE');
    expect(text).toContain(WORKER_A);
    expect(text).toContain(WORKER_B);
    expect(text).toContain(`${WORKER_B} tokenspeed · regular · router.yaml:3:5 ladder doctor ✕ unhealthy`);
  });

  it('a draft with a problem: the values shown are from before it', () => {
    const { text } = render(
      <WorkersScreen />,
      withState(useWorkers, { loaded: true, workers: [workerView(WORKER_A)] }),
      withState(useConfig, { view: configView(), resolvedFor: 'invalid' }),
    );
    expect(text).toContain(
      'The draft has a problem (named in the bar below): the mode, threshold and next request shown are from before it, until it is fixed or discarded.',
    );
  });

  it('an encoder dtype the router cannot read: the worker’s row says so and that float32 goes instead', () => {
    const warning =
      "unknown encoder dtype 'int8' from label multimodal_encoder_dtype: expected float32|fp32|f32, bfloat16|bf16 or float16|fp16|f16|half; using float32";
    const { text } = render(
      <WorkersScreen />,
      withState(useWorkers, {
        loaded: true,
        workers: [workerView(WORKER_A, { encoderDtype: { dtype: 'float32', source: 'label multimodal_encoder_dtype', warning } }), workerView(WORKER_B)],
      }),
      withState(useConfig, { view: configView() }),
    );
    expect(text).toContain(`encoder input: ${warning}`);
    expect(text.match(/encoder input: /g)).toHaveLength(1);
  });

  it('the Edit form of a worker left to detection names the runtime detected on it, not "unspecified"', () => {
    const { html } = render(
      <WorkerEditor url={WORKER_A} onClose={() => {}} />,
      withState(useWorkers, {
        loaded: true,
        workers: [workerView(WORKER_A, { spec: { url: WORKER_A, runtime: 'unspecified', worker_type: 'regular', labels: {}, priority: 50 }, runtime: 'vllm' })],
      }),
      withState(useConfig, { view: configView({ config: routerConfig({ workers: [{ url: WORKER_A }] }) }) }),
    );
    const options = [...html.matchAll(/<option value="([^"]+)"( selected="")?>([^<]*)<\/option>/g)].filter((m) =>
      ['tokenspeed', 'vllm', 'sglang', 'unspecified'].includes(m[1]!),
    );
    expect(options.map((m) => [m[1], m[3], m[2] !== undefined])).toEqual([
      ['tokenspeed', 'tokenspeed', false],
      ['vllm', 'vllm', false],
      ['sglang', 'sglang', false],
      ['unspecified', 'detect (found vllm)', true],
    ]);
  });

  it('the traffic share reads as a share of the tensors sent, not as busy time', () => {
    const { text } = render(
      <WorkersScreen />,
      withState(useWorkers, {
        loaded: true,
        workers: [workerView(WORKER_A, { trafficShare: 1 / 3, inFlight: 2 }), workerView(WORKER_B, { trafficShare: 2 / 3 })],
      }),
      withState(useConfig, { view: configView() }),
    );
    expect(text).toContain('2 in flight · 33 % of tensors (last 60 s)');
    expect(text).toContain('0 in flight · 67 % of tensors (last 60 s)');
    expect(text).not.toContain('of 60 s');
  });

  it('a drained worker: its row says drained since when and what is still finishing, and offers Return to rotation; the other offers Drain', () => {
    const drainedAt = 1_700_000_030_000;
    const { text, html } = render(
      <WorkersScreen />,
      withState(useWorkers, { loaded: true, workers: [workerView(WORKER_A, { drainedAt, inFlight: 2 }), workerView(WORKER_B)] }),
      withState(useConfig, { view: configView() }),
    );
    expect(text).toContain(`drained since ${formatClock(drainedAt)}, 2 still finishing 2 in flight`);
    expect(text.match(/drained since/g)).toHaveLength(1);
    expect(html).toContain(`aria-label="Return to rotation ${WORKER_A}"`);
    expect(html).toContain(`aria-label="Drain ${WORKER_B}"`);
    expect(html).not.toContain(`aria-label="Drain ${WORKER_A}"`);
  });
});
