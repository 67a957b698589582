// A request's sampling by the gateway's rules: the client's values, else the model's defaults
// (default_sampling_params_json, five keys), else the engines' own; and the worker label read
// as the gateway reads it.
import { describe, expect, it } from 'vitest';
import { parseSamplingDefaults, resolveSampling, samplingSummary } from './sampling.ts';

const noStopIds = () => undefined;

describe("a worker's default_sampling_params_json", () => {
  it('gives the five keys it sets, ignoring others and nulls', () => {
    expect(parseSamplingDefaults('{"temperature":0.7,"top_p":0.8,"top_k":20,"repetition_penalty":1.05,"max_new_tokens":512,"min_p":null}')).toEqual({
      defaults: { temperature: 0.7, top_p: 0.8, top_k: 20, repetition_penalty: 1.05 },
    });
    expect(parseSamplingDefaults('')).toEqual({ defaults: {} });
    expect(parseSamplingDefaults(undefined)).toEqual({ defaults: {} });
  });

  it('is ignored whole, with the reason, when it is not what the gateway reads', () => {
    expect(parseSamplingDefaults('{"temperature":"hot"}')).toEqual({
      defaults: {},
      warning: 'default_sampling_params_json: temperature must be a number, got "hot"; the worker\'s defaults are ignored',
    });
    expect(parseSamplingDefaults('{"top_k":1.5}').warning).toContain('top_k must be a whole number, got 1.5');
    expect(parseSamplingDefaults('[1]').warning).toBe('default_sampling_params_json is not a JSON object: [1]');
    expect(parseSamplingDefaults('{nope').warning).toBe('default_sampling_params_json is not JSON: {nope');
  });
});

describe('the sampling a request is sent with', () => {
  const model = { temperature: 0.7, top_p: 0.8, top_k: 20, repetition_penalty: 1.05 };

  it("takes the client's values over the model's, the model's over the engines'", () => {
    const s = resolveSampling({ temperature: 0.2, maxTokens: 64 }, model, noStopIds);
    expect(s).toMatchObject({
      temperature: 0.2,
      topP: 0.8,
      topK: 20,
      minP: 0,
      repetitionPenalty: 1.05,
      frequencyPenalty: 0,
      presencePenalty: 0,
      maxTokens: 64,
    });
    expect(s.sources).toEqual({ temperature: 'client', top_p: 'model', top_k: 'model', min_p: 'default', repetition_penalty: 'model' });
  });

  it('with nothing from the client or the model: repetition_penalty 1 and top_p 1, never a proto3 zero; temperature left to the engine', () => {
    const s = resolveSampling({}, {}, noStopIds);
    expect(s).toMatchObject({ topP: 1, topK: -1, minP: 0, repetitionPenalty: 1, frequencyPenalty: 0, presencePenalty: 0, stop: [], stopTokenIds: [] });
    expect(s.temperature).toBeUndefined();
    expect(s.maxTokens).toBeUndefined();
    expect(samplingSummary(s)).toMatchObject({ temperature: 1, repetition_penalty: 1, max_tokens: null, from_model_defaults: [] });
  });

  it('turns the stops that are one token into ids, once each, keeping every stop string', () => {
    const ids: Record<string, number> = { '<|im_end|>': 151645, '\n': 198 };
    const s = resolveSampling({ stop: ['<|im_end|>', 'two words', '\n', '<|im_end|>'] }, {}, (t) => ids[t]);
    expect(s.stop).toEqual(['<|im_end|>', 'two words', '\n', '<|im_end|>']);
    expect(s.stopTokenIds).toEqual([151645, 198]);
  });

  it("names the model's defaults it used, for the log line and the console", () => {
    expect(samplingSummary(resolveSampling({ topP: 0.5 }, model, noStopIds)).from_model_defaults).toEqual(['temperature', 'top_k', 'repetition_penalty']);
  });
});
