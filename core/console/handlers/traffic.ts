// The traffic commands: the recent tensor events and per-second aggregates, a synthetic test
// request through the real pipeline to one worker, threshold calibration (one at a time) and
// its plan, and the router's Prometheus text.
import { runChatInMemory } from '../../router/chat.ts';
import { calibrateWorker, calibrationPlan, DEFAULT_CALIBRATION_SAMPLES, minSamplesForWinner } from '../calibrate.ts';
import { ContractError, type RequestFailure } from '../contract.ts';
import { failureOf } from '../feeds.ts';
import { requestFailed } from '../../telemetry/requests.ts';
import { findWorker, type ConsoleState, type HandlerGroup } from '../state.ts';
import { syntheticChat } from '../test-image.ts';

type TrafficCommand = 'traffic.snapshot' | 'traffic.request' | 'traffic.sendTestRequest' | 'transport.calibrationPlan' | 'transport.calibrate' | 'metrics.text';

export function trafficHandlers(state: ConsoleState): HandlerGroup<TrafficCommand> {
  const { store } = state;
  const ctx = state.running.context;
  const handlers = {
    async 'traffic.snapshot'(input: { limit?: number }) {
      const events = ctx.events.recent(input.limit ?? 1000);
      const failed: RequestFailure[] = [];
      for (const id of new Set(events.map((e) => e.requestId))) {
        const s = ctx.requests?.get(id);
        if (s && requestFailed(s)) failed.push(failureOf(s));
      }
      return { events, seconds: [...ctx.events.perSecond()], failed };
    },

    async 'traffic.request'(input: { requestId: string }) {
      return ctx.requests?.get(input.requestId) ?? null;
    },

    async 'traffic.sendTestRequest'(input: { url: string; width: number; height: number; format: 'png' | 'jpeg' | 'webp' }) {
      const s = store.current();
      findWorker(s, input.url);
      const t = performance.now();
      const chat = await runChatInMemory(ctx, await syntheticChat(input.width, input.height, input.format, 512), { source: 'console', worker: input.url });
      const ms = performance.now() - t;
      const parsed = JSON.parse(chat.body || '{}') as { choices?: Array<{ message?: { content?: string } }>; error?: { message?: string } };
      const content = parsed.choices?.[0]?.message?.content ?? parsed.error?.message ?? chat.body;
      const events = chat.requestId ? ctx.events.recent().filter((e) => e.requestId === chat.requestId) : [];
      return { status: chat.status, requestId: chat.requestId ?? null, revision: chat.revision ?? s.revision, worker: input.url, content, events, ms };
    },

    async 'transport.calibrationPlan'(input: { url: string }) {
      findWorker(store.current(), input.url);
      const plan = calibrationPlan(state, input.url);
      return {
        worker: input.url,
        dtype: plan.dtype,
        sizes: plan.sizes,
        defaultSamples: DEFAULT_CALIBRATION_SAMPLES,
        minSamplesForWinner: minSamplesForWinner(),
      };
    },

    async 'transport.calibrate'(input: { url: string; samples?: number }) {
      findWorker(store.current(), input.url);
      if (state.busy.has('calibrate')) throw new ContractError('busy', 'a calibration is already running; wait for it to finish');
      state.busy.add('calibrate');
      try {
        return await calibrateWorker(state, input.url, input.samples ?? DEFAULT_CALIBRATION_SAMPLES);
      } finally {
        state.busy.delete('calibrate');
      }
    },

    async 'metrics.text'() {
      return { text: await ctx.metrics.text() };
    },
  };
  return handlers;
}
