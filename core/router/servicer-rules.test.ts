// Requests as the gateway's worker servicers judge them (docs/router.md, "What each servicer
// reads"), through the real router and real `mmtc worker` processes, which refuse what the
// TokenSpeed, vLLM and SGLang servicers refuse: 1 to 3 images, streamed and not, with a client
// stop, reach each runtime and are answered, cut at the stop; the model's sampling defaults
// reach the worker that samples; SGLang gets its one-token stops as ids and never a string.
import sharp from 'sharp';
import { afterAll, describe, expect, it } from 'vitest';
import { startRouter, type RunningRouter } from './server.ts';
import { readTransportEnvironment } from '../config/env.ts';
import { RouterConfigSchema, type WireRuntime } from '../config/schema.ts';
import { loadModelDirectory } from '../multimodal/model-dir.ts';
import { useRouterRig } from '../test/router-rig.ts';

const model = await loadModelDirectory();
const { startWorker, stops } = useRouterRig();

/** Three images of different aspect ratios, as data: URLs. */
const pngs = await Promise.all(
  [
    [160, 90],
    [64, 200],
    [120, 120],
  ].map(
    async ([w, h], i) =>
      `data:image/png;base64,${(
        await sharp({ create: { width: w!, height: h!, channels: 3, background: { r: 40 * i, g: 120, b: 200 - 50 * i } } })
          .png()
          .toBuffer()
      ).toString('base64')}`,
  ),
);
afterAll(() => {});

async function routerOver(workerUrl: string, mode: 'inline' | 'shm', logs: string[] = []): Promise<RunningRouter> {
  const r = await startRouter({
    config: RouterConfigSchema.parse({
      port: 0,
      multimodal_tensor_transport: mode,
      multimodal_shm_min_bytes: 0,
      health_check_interval_secs: 0.2,
      workers: [{ url: workerUrl }],
    }),
    env: readTransportEnvironment({}),
    processEnv: {},
    log: (line) => logs.push(line),
  });
  stops.push(() => r.close());
  return r;
}

function chat(images: number, extra: Record<string, unknown> = {}) {
  return {
    model: 'qwen2-vl-mini',
    messages: [
      { role: 'user', content: [...pngs.slice(0, images).map((url) => ({ type: 'image_url', image_url: { url } })), { type: 'text', text: 'Describe them.' }] },
    ],
    ...extra,
  };
}

/** The answer's text and finish reason, from JSON or from the SSE stream. */
async function ask(r: RunningRouter, body: unknown): Promise<{ status: number; content: string; finish: string | null; error?: string }> {
  const res = await fetch(`${r.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const text = await res.text();
  if (res.status !== 200) return { status: res.status, content: '', finish: null, error: (JSON.parse(text) as { error: { message: string } }).error.message };
  if (!(body as { stream?: boolean }).stream) {
    const json = JSON.parse(text) as { choices: Array<{ message: { content: string }; finish_reason: string }> };
    return { status: 200, content: json.choices[0]!.message.content, finish: json.choices[0]!.finish_reason };
  }
  let content = '';
  let finish: string | null = null;
  for (const line of text.split('\n')) {
    if (!line.startsWith('data: {')) continue;
    const chunk = JSON.parse(line.slice(6)) as { choices: Array<{ delta: { content?: string }; finish_reason: string | null }> };
    for (const c of chunk.choices) {
      content += c.delta.content ?? '';
      finish = c.finish_reason ?? finish;
    }
  }
  return { status: 200, content, finish };
}

const CASES: Array<{ runtime: WireRuntime; mode: 'inline' | 'shm' }> = [
  { runtime: 'tokenspeed', mode: 'shm' },
  { runtime: 'vllm', mode: 'shm' },
  { runtime: 'sglang', mode: 'inline' },
];

describe.each(CASES)('$runtime', ({ runtime, mode }) => {
  it("1 to 3 images, streamed and not, with a client stop: the servicer's checks pass and the answer ends before the stop", async () => {
    const r = await routerOver(await startWorker(runtime), mode);
    for (const images of [1, 2, 3]) {
      const full = await ask(r, chat(images));
      expect(full.status, full.error).toBe(200);
      expect(full.content).toMatch(new RegExp(`^${images} images?: `));
      // A stop the answer holds: the text before its first occurrence, finish_reason stop.
      const stop = ' via ';
      const expected = full.content.slice(0, full.content.indexOf(stop));
      for (const stream of [false, true]) {
        const cut = await ask(r, chat(images, { stream, stop: [stop, 'never-there'] }));
        expect(cut, `${images} images, stream ${stream}`).toEqual({ status: 200, content: expected, finish: 'stop' });
      }
    }
  });
});

describe('SGLang (skip_tokenizer_init): no stop strings on the wire', () => {
  it('a one-token stop travels as stop_token_ids and the worker stops on it; the router cuts its text', async () => {
    const r = await routerOver(await startWorker('sglang'), 'inline');
    const full = await ask(r, chat(1));
    const semicolon = model.tokenizer.encode(';');
    expect(semicolon).toHaveLength(1);
    const res = await fetch(`${r.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(chat(1, { stop: ';' })),
    });
    const json = (await res.json()) as { choices: Array<{ message: { content: string }; finish_reason: string }>; usage: { completion_tokens: number } };
    expect(res.status).toBe(200);
    expect(json.choices[0]).toMatchObject({ message: { content: full.content.slice(0, full.content.indexOf(';')) }, finish_reason: 'stop' });
    // The worker stopped at the ';' token (included in its output, as SGLang returns it), not at the end of its answer.
    const upToStop = model.tokenizer.encode(full.content.slice(0, full.content.indexOf(';') + 1)).length;
    expect(json.usage.completion_tokens).toBe(upToStop);
  });
});

describe("the model's sampling defaults", () => {
  it('fill what the client left out, from the worker that samples; the log line says what was sent and which came from the model', async () => {
    const logs: string[] = [];
    const r = await routerOver(
      await startWorker('vllm', ['--default-sampling-params', '{"temperature":0.3,"top_k":5,"repetition_penalty":1.1}']),
      'inline',
      logs,
    );
    expect((await ask(r, chat(1, { temperature: 0.9 }))).status).toBe(200);
    const line = JSON.parse(logs.find((l) => l.includes('"event":"request"'))!) as { sampling: Record<string, unknown> };
    expect(line.sampling).toEqual({
      temperature: 0.9,
      top_p: 1,
      top_k: 5,
      min_p: 0,
      repetition_penalty: 1.1,
      frequency_penalty: 0,
      presence_penalty: 0,
      max_tokens: null,
      stop: [],
      from_model_defaults: ['top_k', 'repetition_penalty'],
    });
  });

  it("reach the worker: a TokenSpeed default its engine refuses (top_k 200, above its fused kernel) is the worker's refusal, in its words", async () => {
    const r = await routerOver(await startWorker('tokenspeed', ['--default-sampling-params', '{"top_k":200}']), 'inline');
    const refused = await ask(r, chat(1));
    expect(refused.status).toBe(502);
    expect(refused.error).toContain('top_k must be < 128 (fused kernel limit) or -1 (disable), got 200.');
    // The client's own top_k wins over the model's.
    expect((await ask(r, chat(1, { top_k: 40 }))).status).toBe(200);
  });
});
