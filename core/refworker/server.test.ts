// The reference worker and the probe client over real loopback gRPC, with the tensor bytes
// going through the real /dev/shm tmpfs (a private directory of this test).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as ts from '../gen/tokenspeed/grpc/scheduler.ts';
import * as vllm from '../gen/vllm/grpc/engine.ts';
import * as sg from '../gen/sglang/grpc/scheduler.ts';
import { TransportMetrics } from '../telemetry/metrics.ts';
import { makeShmTestDir } from '../test/shm-dir.ts';
import { decideTransport } from '../transport/decision.ts';
import { fnv1a64Hex } from '../util/fnv.ts';
import { readNamespaceToken } from '../transport/namespace.ts';
import { placeTensor } from '../transport/placement.ts';
import { TensorReader } from '../transport/shm-reader.ts';
import { ShmRequestScope, ShmWriter } from '../transport/shm-writer.ts';
import type { EngineFailure } from '../engines/engine.ts';
import { ENGINES } from '../engines/table.ts';
import { tensorDataFromPlaced } from '../engines/tensor-data.ts';
import { probeWorker } from '../workers/discovery.ts';
import { runDoctor } from '../cli/doctor.ts';
import { loadModelDirectory } from '../multimodal/model-dir.ts';
import type { WireRuntime } from '../config/schema.ts';
import { startReferenceWorker, type ReferenceWorker } from './server.ts';

const shm = makeShmTestDir();
const model = await loadModelDirectory();
const PAD = 151655;
const GRID_INLINE = { shape: [1, 3], dtype: 'int64', payload: { $case: 'inline' as const, value: Buffer.from(new BigInt64Array([1n, 4n, 4n]).buffer) } };
/** patches_per_image for images of these patch counts: int64 [n], inline. */
const patchesInline = (...n: bigint[]) => ({
  shape: [n.length],
  dtype: 'int64',
  payload: { $case: 'inline' as const, value: Buffer.from(new BigInt64Array(n).buffer) },
});
/** vLLM's field layout for Qwen-VL, as the gateway sends it, and one media hash per image. */
const VLLM_LAYOUT = {
  batchedKeys: ['image_grid_thw', 'patches_per_image'],
  flatKeys: { pixel_values: 'patches_per_image' },
  keepOnCpuKeys: ['image_grid_thw'],
  mmHashes: ['0'.repeat(64)],
  modality: 1,
};
/** SGLang's sampling as the gateway fills it (its proto3 zeros are real values). */
const SGLANG_SAMPLING = { temperature: 1, topP: 1, topK: -1, repetitionPenalty: 1, skipSpecialTokens: true, spacesBetweenSpecialTokens: true, n: 1 };
const routerToken = readNamespaceToken().token!;
const workers: ReferenceWorker[] = [];
const start = async (...args: Parameters<typeof startReferenceWorker>) => {
  const w = await startReferenceWorker({ reader: new TensorReader({ dir: shm.dir }), ...args[0] });
  workers.push(w);
  return w;
};
afterAll(async () => {
  await Promise.all(workers.map((w) => w.close()));
  shm.remove();
});

/** One Generate through the router's own engine connection: the text the worker answered, or its failure. */
function generate(
  url: string,
  runtime: WireRuntime,
  request: ts.GenerateRequest | vllm.GenerateRequest | sg.GenerateRequest,
): Promise<{ text: string; error?: EngineFailure }> {
  const connection = ENGINES[runtime].connect(url);
  return new Promise((resolve) => {
    const ids: number[] = [];
    connection.generate(
      { runtime, message: request },
      { deadline: Date.now() + 10_000 },
      {
        event: (ev) => ids.push(...ev.tokenIds),
        failure: (error) => {
          connection.close();
          resolve({ text: '', error });
        },
        end: () => {
          connection.close();
          resolve({ text: model.tokenizer.decode(ids, false) });
        },
      },
    );
  });
}

describe('probe and discovery', () => {
  let tsWorker: ReferenceWorker;
  let vllmWorker: ReferenceWorker;
  beforeAll(async () => {
    tsWorker = await start({ runtime: 'tokenspeed' });
    vllmWorker = await start({ runtime: 'vllm', socket: `${shm.dir}/vllm.sock` });
  });

  it('detects each runtime from which HealthCheck answers and reads its token', async () => {
    const a = await probeWorker(tsWorker.url);
    expect(a).toMatchObject({ reachable: true, runtime: 'tokenspeed', healthy: true });
    expect(a.labels).toMatchObject({ shm_namespace_id: routerToken, multimodal_encoder_dtype: 'bfloat16', supports_vision: 'true' });
    const b = await probeWorker(vllmWorker.url);
    expect(vllmWorker.url).toBe(`unix://${shm.dir}/vllm.sock`);
    expect(b).toMatchObject({ reachable: true, runtime: 'vllm' });
    expect(b.labels.shm_namespace_id).toBe(routerToken);
    const sglang = await start({ runtime: 'sglang' });
    const c = await probeWorker(sglang.url);
    expect(c).toMatchObject({ reachable: true, runtime: 'sglang', healthy: true });
    expect(c.labels).toMatchObject({ server_type: 'grpc', supports_vision: 'true', dp_rank_count: '1' });
    expect(c.labels.shm_namespace_id).toBeUndefined();
  });

  it('an unreachable worker is reported, not thrown', async () => {
    const r = await probeWorker('grpc://127.0.0.1:1', { timeoutMs: 1000 });
    expect(r.reachable).toBe(false);
    expect(r.error).toContain('no worker protocol answered HealthCheck');
  });
});

describe('doctor verdicts', () => {
  const [bootId, stDev] = [routerToken.slice(0, routerToken.lastIndexOf(':')), routerToken.slice(routerToken.lastIndexOf(':') + 1)];
  it.each([
    ['the real token', undefined, 'auto_tokens_equal', true],
    ['another host', `00000000-0000-0000-0000-000000000000:${stDev}`, 'auto_different_host', false],
    ['another /dev/shm', `${bootId}:${BigInt(stDev) + 1n}`, 'auto_different_shm', false],
    ['no token', '', 'auto_worker_no_token', false],
  ])('a worker advertising %s', async (_name, shmNamespaceId, reason, uses) => {
    const w = await start({ runtime: 'tokenspeed', ...(shmNamespaceId !== undefined ? { shmNamespaceId } : {}) });
    const report = await runDoctor({ worker: w.url, dir: shm.dir });
    expect(report.router.token).toBe(routerToken);
    expect(report.router.shm_writable).toBe(true);
    expect(report.worker).toMatchObject({ reachable: true, runtime: 'tokenspeed', reason, auto_uses_shm: uses });
    if (reason === 'auto_different_shm') expect(report.worker!.advice).toBe("run the worker container with --ipc=host or mount the host's /dev/shm into it");
  });
});

describe('SHM handoff through a real gRPC call', () => {
  it.each(['tokenspeed', 'vllm'] as const)('%s: the worker reads exactly the bytes the router wrote and unlinks the file', async (runtime) => {
    const workerMetrics = new TransportMetrics();
    const worker = await start({ runtime, metrics: workerMetrics });
    const probe = await probeWorker(worker.url);
    const writer = new ShmWriter({ dir: shm.dir });
    const decision = decideTransport({
      shmLane: true,
      mode: 'auto',
      shmWritable: writer.probe().writable,
      routerToken,
      workers: [{ url: worker.url, worker_type: 'regular', shm_namespace_id: probe.labels.shm_namespace_id }],
    });
    expect(decision).toEqual({ shmEnabled: true, reason: 'auto_tokens_equal' });

    const values = Float32Array.from({ length: 16 * 1176 }, (_, i) => Math.sin(i));
    const bytes = new Uint8Array(values.buffer);
    const grid = new Uint8Array(new BigInt64Array([1n, 4n, 4n]).buffer);
    const scope = new ShmRequestScope(shm.dir);
    const ctx = { requestId: 'r1', revision: 1, source: 'api' as const, worker: worker.url, runtime, decision, minBytes: 1024, writer, scope };
    const pixels = await placeTensor(ctx, { name: 'pixel_values', shape: [16, 1176], dtype: 'float32', bytes });
    const gridPlaced = await placeTensor(ctx, { name: 'image_grid_thw', shape: [1, 3], dtype: 'int64', bytes: grid });
    expect(pixels.payload.kind).toBe('shm');
    expect(gridPlaced.payload.kind).toBe('inline'); // 24 bytes < 1024
    expect(shm.files().filter((f) => f.startsWith('smg-tokenspeed-'))).toHaveLength(1);

    const request =
      runtime === 'tokenspeed'
        ? ts.GenerateRequest.fromPartial({
            requestId: 'r1',
            tokenized: { inputIds: [1, PAD, PAD, PAD, PAD, 2] },
            mmInputs: {
              items: [
                {
                  modality: 1,
                  encoderInput: tensorDataFromPlaced(pixels),
                  modelSpecificTensors: { image_grid_thw: tensorDataFromPlaced(gridPlaced) },
                  placeholders: [{ offset: 1, length: 4 }],
                  placeholderTokenId: PAD,
                },
              ],
            },
          })
        : vllm.GenerateRequest.fromPartial({
            requestId: 'r1',
            input: { $case: 'tokenized', value: { inputIds: [1, PAD, PAD, PAD, PAD, 2] } },
            mmInputs: {
              pixelValues: tensorDataFromPlaced(pixels),
              modelSpecificTensors: { image_grid_thw: tensorDataFromPlaced(gridPlaced), patches_per_image: patchesInline(16n) },
              mmPlaceholders: [{ offset: 1, length: 4 }],
              imTokenId: PAD,
              ...VLLM_LAYOUT,
            },
          });
    const { text, error } = await generate(worker.url, runtime, request);
    expect(error).toBeUndefined();
    expect(scope.complete()).toBe(0); // the worker read and unlinked it: nothing left for the router
    const name = runtime === 'tokenspeed' ? 'encoder_input' : 'pixel_values';
    const patches =
      runtime === 'vllm' ? `; patches_per_image [1] int64 via inline, 8 bytes, fnv1a ${fnv1a64Hex(new Uint8Array(new BigInt64Array([16n]).buffer))}` : '';
    expect(text).toBe(
      `1 image: ${name} [16,1176] float32 via shm, 75264 bytes, fnv1a ${fnv1a64Hex(bytes)}; image_grid_thw [1,3] int64 via inline, 24 bytes, fnv1a ${fnv1a64Hex(grid)}${patches}`,
    );
    expect(shm.files().filter((f) => f.startsWith('smg-tokenspeed-'))).toEqual([]);
    expect(await workerMetrics.text()).toContain(`smg_mm_shm_read_seconds_count{runtime="${runtime}"} 1`);
  });

  it('vLLM refuses bfloat16 and the router cleans up the file the worker never read', async () => {
    const worker = await start({ runtime: 'vllm' });
    const writer = new ShmWriter({ dir: shm.dir });
    const scope = new ShmRequestScope(shm.dir);
    const placed = await placeTensor(
      {
        requestId: 'r2',
        revision: 1,
        source: 'api' as const,
        worker: worker.url,
        runtime: 'vllm',
        decision: { shmEnabled: true, reason: 'shm_writable' },
        minBytes: 0,
        writer,
        scope,
      },
      { name: 'pixel_values', shape: [8], dtype: 'bfloat16', bytes: new Uint8Array(16) },
    );
    const { error } = await generate(
      worker.url,
      'vllm',
      vllm.GenerateRequest.fromPartial({
        requestId: 'r2',
        input: { $case: 'tokenized', value: { inputIds: [1, PAD, PAD, PAD, PAD, 2] } },
        mmInputs: {
          pixelValues: tensorDataFromPlaced(placed),
          modelSpecificTensors: { image_grid_thw: GRID_INLINE, patches_per_image: patchesInline(16n) },
          mmPlaceholders: [{ offset: 1, length: 4 }],
          imTokenId: PAD,
          ...VLLM_LAYOUT,
        },
      }),
    );
    expect(error?.status).toBe('INVALID_ARGUMENT');
    expect(error?.details).toBe('vLLM accepts float32, int64 and uint32 tensors; pixel_values is bfloat16');
    expect(shm.files().filter((f) => f.startsWith('smg-tokenspeed-'))).toHaveLength(1);
    expect(scope.cleanup()).toBe(1);
    expect(shm.files().filter((f) => f.startsWith('smg-tokenspeed-'))).toEqual([]);
  });

  it('a reader refusal reaches the router as INVALID_ARGUMENT with the reader message', async () => {
    const worker = await start({ runtime: 'tokenspeed' });
    const { error } = await generate(
      worker.url,
      'tokenspeed',
      ts.GenerateRequest.fromPartial({
        requestId: 'r3',
        tokenized: { inputIds: [1, PAD, PAD, PAD, PAD, 2] },
        mmInputs: {
          items: [
            {
              modality: 1,
              encoderInput: { shape: [1], dtype: 'float32', payload: { $case: 'shm', value: { name: '../etc/passwd', offset: 0, nbytes: 4, ownerId: 'x' } } },
              modelSpecificTensors: { image_grid_thw: GRID_INLINE },
              placeholders: [{ offset: 1, length: 4 }],
            },
          ],
        },
      }),
    );
    expect(error?.status).toBe('INVALID_ARGUMENT');
    expect(error?.details).toBe(`invalid shm name "../etc/passwd": contains '/'`);
  });

  it.each([
    [
      'a placeholder range outside the prompt',
      { offset: 4, length: 4 },
      [1, PAD, PAD, PAD, PAD],
      'item 0: placeholder range [4, 8) is outside the 5 input ids',
    ],
    [
      'a placeholder length that disagrees with the grid',
      { offset: 1, length: 3 },
      [1, PAD, PAD, PAD, PAD],
      'item 0: placeholder length 3 does not match grid 1x4x4 (4 tokens)',
    ],
    [
      'placeholder ids that are not the image token',
      { offset: 0, length: 4 },
      [1, PAD, PAD, PAD, PAD],
      `item 0: placeholder range holds ids other than ${PAD}`,
    ],
  ])('refuses %s', async (_name, placeholder, inputIds, message) => {
    const worker = await start({ runtime: 'tokenspeed' });
    const encoderInput = { shape: [16, 4], dtype: 'float32', payload: { $case: 'inline' as const, value: Buffer.alloc(256) } };
    const { error } = await generate(
      worker.url,
      'tokenspeed',
      ts.GenerateRequest.fromPartial({
        requestId: 'r4',
        tokenized: { inputIds },
        mmInputs: {
          items: [{ modality: 1, encoderInput, modelSpecificTensors: { image_grid_thw: GRID_INLINE }, placeholders: [placeholder], placeholderTokenId: PAD }],
        },
      }),
    );
    expect(error?.status).toBe('INVALID_ARGUMENT');
    expect(error?.details).toBe(message);
  });

  // What the reliability suite's fuzz/generate found accepted (docs/reliability.md).
  const f32 = (rows: number) => ({ shape: [rows, 4], dtype: 'float32', payload: { $case: 'inline' as const, value: Buffer.alloc(rows * 16) } });
  const int64 = (values: bigint[], dtype = 'int64') => ({
    shape: [values.length / 3, 3],
    dtype,
    payload: { $case: 'inline' as const, value: Buffer.from(new BigInt64Array(values).buffer) },
  });
  it.each([
    [
      'TokenSpeed: an image with no placeholder range',
      'tokenspeed',
      { items: [{ modality: 1, encoderInput: f32(16), modelSpecificTensors: { image_grid_thw: GRID_INLINE }, placeholders: [], placeholderTokenId: PAD }] },
      'MultimodalItem carried no placeholders',
    ],
    [
      'TokenSpeed: patches_per_image as float64',
      'tokenspeed',
      {
        items: [
          {
            modality: 1,
            encoderInput: f32(16),
            modelSpecificTensors: {
              image_grid_thw: GRID_INLINE,
              patches_per_image: { shape: [1], dtype: 'float64', payload: { $case: 'inline' as const, value: Buffer.alloc(8) } },
            },
            placeholders: [{ offset: 1, length: 4 }],
            placeholderTokenId: PAD,
          },
        ],
      },
      'patches_per_image must be int64, got float64',
    ],
    [
      'TokenSpeed: an encoder input as uint32',
      'tokenspeed',
      {
        items: [
          {
            modality: 1,
            encoderInput: { ...f32(16), dtype: 'uint32' },
            modelSpecificTensors: { image_grid_thw: GRID_INLINE },
            placeholders: [{ offset: 1, length: 4 }],
            placeholderTokenId: PAD,
          },
        ],
      },
      'encoder_input must be float32, bfloat16 or float16, got uint32',
    ],
    [
      'vLLM: pixel_values and no image placed in the prompt',
      'vllm',
      {
        pixelValues: f32(16),
        modelSpecificTensors: { image_grid_thw: GRID_INLINE, patches_per_image: patchesInline(16n) },
        mmPlaceholders: [],
        imTokenId: PAD,
        ...VLLM_LAYOUT,
      },
      'multimodal tensors but no image placed in the prompt (no placeholder range)',
    ],
    [
      'vLLM: pixel_values as uint32',
      'vllm',
      {
        pixelValues: { ...f32(16), dtype: 'uint32' },
        modelSpecificTensors: { image_grid_thw: GRID_INLINE, patches_per_image: patchesInline(16n) },
        mmPlaceholders: [{ offset: 1, length: 4 }],
        imTokenId: PAD,
        ...VLLM_LAYOUT,
      },
      'pixel_values must be float32, got uint32',
    ],
    [
      'SGLang: pixel_values as int64',
      'sglang',
      {
        pixelValues: { ...f32(16), dtype: 'int64' },
        modelSpecificTensors: { image_grid_thw: GRID_INLINE },
        imageData: [Buffer.from('png')],
        modalities: ['image'],
        mmPlaceholders: [{ offset: 1, length: 4 }],
        imTokenId: PAD,
      },
      'pixel_values must be float32, got int64',
    ],
    [
      'SGLang: no encoded image bytes',
      'sglang',
      {
        pixelValues: f32(16),
        modelSpecificTensors: { image_grid_thw: GRID_INLINE },
        imageData: [],
        modalities: ['image'],
        mmPlaceholders: [{ offset: 1, length: 4 }],
        imTokenId: PAD,
      },
      'mm_inputs has 0 image_data entries for 1 image in the prompt',
    ],
    [
      'SGLang: images without the image modality',
      'sglang',
      {
        pixelValues: f32(16),
        modelSpecificTensors: { image_grid_thw: GRID_INLINE },
        imageData: [Buffer.from('png')],
        modalities: [],
        mmPlaceholders: [{ offset: 1, length: 4 }],
        imTokenId: PAD,
      },
      'mm_inputs.modalities is [], without image',
    ],
    [
      'vLLM: two grid rows for one image in the prompt',
      'vllm',
      {
        pixelValues: f32(32),
        modelSpecificTensors: { image_grid_thw: int64([1n, 4n, 4n, 1n, 4n, 4n]), patches_per_image: patchesInline(16n, 16n) },
        mmPlaceholders: [{ offset: 1, length: 4 }],
        imTokenId: PAD,
        ...VLLM_LAYOUT,
        mmHashes: ['a', 'b'],
      },
      'image_grid_thw has 2 rows but the request places 1 image in the prompt',
    ],
    // vLLM's field layouts (the servicer's _build_preprocessed_mm_inputs and MultiModalKwargsItems.from_hf_inputs).
    [
      'vLLM: pixel_values split by image_grid_thw (3 sizes for 1 image)',
      'vllm',
      {
        pixelValues: f32(16),
        modelSpecificTensors: { image_grid_thw: GRID_INLINE },
        mmPlaceholders: [{ offset: 1, length: 4 }],
        imTokenId: PAD,
        ...VLLM_LAYOUT,
        batchedKeys: ['image_grid_thw'],
        flatKeys: { pixel_values: 'image_grid_thw' },
      },
      "Cannot merge different batch sizes for modality='image'! Found: batch_sizes={'pixel_values': 3, 'image_grid_thw': 1}",
    ],
    [
      'vLLM: patches_per_image left out of batched_keys (shared, one per placeholder)',
      'vllm',
      {
        pixelValues: f32(32),
        modelSpecificTensors: { image_grid_thw: int64([1n, 4n, 4n, 1n, 4n, 4n]), patches_per_image: patchesInline(16n, 16n) },
        mmPlaceholders: [{ offset: 1, length: 4 }],
        imTokenId: PAD,
        ...VLLM_LAYOUT,
        batchedKeys: ['image_grid_thw'],
        mmHashes: ['a', 'b'],
      },
      "Cannot merge different batch sizes for modality='image'! Found: batch_sizes={'pixel_values': 2, 'image_grid_thw': 2, 'patches_per_image': 1}",
    ],
    [
      "vLLM: sizes that are not the images' rows",
      'vllm',
      {
        pixelValues: f32(16),
        modelSpecificTensors: { image_grid_thw: GRID_INLINE, patches_per_image: patchesInline(12n) },
        mmPlaceholders: [{ offset: 1, length: 4 }],
        imTokenId: PAD,
        ...VLLM_LAYOUT,
      },
      "flat_keys splits pixel_values by patches_per_image = [12], 12 rows in all, but pixel_values has 16 rows: vLLM would hand the encoder rows that are not the images'",
    ],
  ] as Array<[string, WireRuntime, unknown, string]>)('refuses %s', async (_name, runtime, mmInputs, message) => {
    const worker = await start({ runtime });
    const inputIds = [1, PAD, PAD, PAD, PAD, 2, PAD, PAD, PAD, PAD, 2];
    const request =
      runtime === 'tokenspeed'
        ? ts.GenerateRequest.fromPartial({ requestId: 'r5', tokenized: { inputIds }, mmInputs: mmInputs as ts.GenerateRequest['mmInputs'] })
        : runtime === 'vllm'
          ? vllm.GenerateRequest.fromPartial({
              requestId: 'r5',
              input: { $case: 'tokenized', value: { inputIds } },
              mmInputs: mmInputs as vllm.GenerateRequest['mmInputs'],
            })
          : sg.GenerateRequest.fromPartial({
              requestId: 'r5',
              tokenized: { originalText: '', inputIds },
              samplingParams: SGLANG_SAMPLING,
              mmInputs: mmInputs as sg.GenerateRequest['mmInputs'],
            });
    const { error } = await generate(worker.url, runtime, request);
    expect(error?.status).toBe('INVALID_ARGUMENT');
    expect(error?.details).toBe(message);
  });
});
