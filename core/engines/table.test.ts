import { describe, expect, it } from 'vitest';
import { RUNTIMES, WIRE_RUNTIMES } from '../config/schema.ts';
import { declaredRuntime, ENGINE_RUNTIMES, ENGINES } from './table.ts';

describe('the engine table', () => {
  it('has an engine for every runtime the configuration can name, and declares what each means', () => {
    expect(ENGINE_RUNTIMES).toEqual([...WIRE_RUNTIMES]);
    expect(RUNTIMES).toEqual([...WIRE_RUNTIMES, 'unspecified']);
    for (const r of ENGINE_RUNTIMES) expect(ENGINES[r].runtime).toBe(r);
    expect(Object.fromEntries(ENGINE_RUNTIMES.map((r) => [r, [ENGINES[r].capabilities.shmLane, ENGINES[r].capabilities.encoderTensor]]))).toEqual({
      tokenspeed: [true, 'per_image'],
      vllm: [true, 'per_request'],
      sglang: [false, 'per_request'],
    });
    expect(declaredRuntime('sglang')).toBe('sglang');
    expect(declaredRuntime('unspecified')).toBeUndefined();
    expect(declaredRuntime('toString')).toBeUndefined();
  });
});

describe('encoder-input dtype, by each engine', () => {
  it('per-modality env beats the general env, which beats the worker label, which beats bfloat16', () => {
    const label = { multimodal_encoder_dtype: 'float16' };
    expect(
      ENGINES.tokenspeed.capabilities.encoderDtype(
        'image',
        { SMG_TOKENSPEED_IMAGE_ENCODER_INPUT_DTYPE: 'fp32', SMG_TOKENSPEED_ENCODER_INPUT_DTYPE: 'bf16' },
        label,
      ),
    ).toEqual({ dtype: 'float32', source: 'SMG_TOKENSPEED_IMAGE_ENCODER_INPUT_DTYPE' });
    expect(
      ENGINES.tokenspeed.capabilities.encoderDtype(
        'image',
        { SMG_TOKENSPEED_VIDEO_ENCODER_INPUT_DTYPE: 'fp32', SMG_TOKENSPEED_ENCODER_INPUT_DTYPE: 'bf16' },
        label,
      ),
    ).toEqual({ dtype: 'bfloat16', source: 'SMG_TOKENSPEED_ENCODER_INPUT_DTYPE' });
    expect(ENGINES.tokenspeed.capabilities.encoderDtype('image', {}, label)).toEqual({ dtype: 'float16', source: 'label multimodal_encoder_dtype' });
    expect(ENGINES.tokenspeed.capabilities.encoderDtype('image', {}, {})).toEqual({ dtype: 'bfloat16', source: 'default' });
  });

  it('an unknown spelling warns and uses float32', () => {
    const r = ENGINES.tokenspeed.capabilities.encoderDtype('image', { SMG_TOKENSPEED_ENCODER_INPUT_DTYPE: 'int4' }, {});
    expect(r.dtype).toBe('float32');
    expect(r.warning).toBe(
      "unknown encoder dtype 'int4' from SMG_TOKENSPEED_ENCODER_INPUT_DTYPE: expected float32|fp32|f32, bfloat16|bf16 or float16|fp16|f16|half; using float32",
    );
  });

  it('vLLM is always float32', () => {
    expect(
      ENGINES.vllm.capabilities.encoderDtype('image', { SMG_TOKENSPEED_ENCODER_INPUT_DTYPE: 'bf16' }, { multimodal_encoder_dtype: 'bfloat16' }).dtype,
    ).toBe('float32');
  });

  it('SGLang takes float32 pixel_values', () => {
    expect(
      ENGINES.sglang.capabilities.encoderDtype('image', { SMG_TOKENSPEED_ENCODER_INPUT_DTYPE: 'bf16' }, { multimodal_encoder_dtype: 'bfloat16' }).dtype,
    ).toBe('float32');
  });
});
