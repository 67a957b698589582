// What a request's sampling means on the wire, by the gateway's rules (docs/router.md, "What
// each servicer reads"). The client's values win; a value the client left out comes from the
// model's defaults, which the worker publishes as GetModelInfo's default_sampling_params_json
// (vLLM and SGLang from the checkpoint's generation_config.json, TokenSpeed from its
// --preferred-sampling-params), for the five keys the gateway takes from there; what neither
// gives is the engines' own default. Under disaggregation the decode worker's defaults apply
// (it samples). The result names where each value came from, for the log line and the console.
//
// Each engine writes these values in its protocol's own way (tokenspeed.ts, vllm.ts,
// sglang.ts): every value set (TokenSpeed, SGLang: a proto3 zero is a real zero there, and a
// repetition_penalty of 0 divides logits by zero), or vLLM's optional temperature and top_k 0
// for "off". Stop strings travel as strings to a runtime that matches them, and as token ids
// (those that are one token) to one that does not (SGLang); the router matches and trims every
// stop string itself in any case (core/router/stop-matcher.ts).

/** The keys the gateway takes from a worker's default_sampling_params_json, in its order. */
export const SAMPLING_DEFAULT_KEYS = ['temperature', 'top_p', 'top_k', 'min_p', 'repetition_penalty'] as const;
export type SamplingDefaultKey = (typeof SAMPLING_DEFAULT_KEYS)[number];
export type SamplingDefaults = Partial<Record<SamplingDefaultKey, number>>;

/** The worker label that carries a worker's defaults (the GetModelInfo field's name, as the gateway labels it). */
export const SAMPLING_DEFAULTS_LABEL = 'default_sampling_params_json';

/** Where a value sent came from: the request, the model's defaults, or the engines' own default. */
export type SamplingSource = 'client' | 'model' | 'default';

/** What the client asked for; absent: not asked (null in the body counts as absent). */
export interface ClientSampling {
  maxTokens?: number;
  temperature?: number;
  topP?: number;
  topK?: number;
  minP?: number;
  repetitionPenalty?: number;
  frequencyPenalty?: number;
  presencePenalty?: number;
  stop?: string[];
}

/** The sampling a request is sent with, every runtime's fields derived from it. */
export interface SamplingOptions {
  maxTokens?: number;
  /** Undefined when neither the client nor the model gave one (vLLM then leaves it unset; the others send 1.0). */
  temperature?: number;
  topP: number;
  /** -1: off. */
  topK: number;
  minP: number;
  repetitionPenalty: number;
  frequencyPenalty: number;
  presencePenalty: number;
  /** The client's stop strings. */
  stop: string[];
  /** Those stop strings that are one token of the model's vocabulary, as ids (what a runtime that takes no stop strings gets). */
  stopTokenIds: number[];
  /** Where each of the five defaultable values came from. */
  sources: Record<SamplingDefaultKey, SamplingSource>;
}

/** The engines' own defaults: what a value is when neither the client nor the model says. */
export const ENGINE_SAMPLING_DEFAULTS: Readonly<Record<SamplingDefaultKey, number>> = { temperature: 1, top_p: 1, top_k: -1, min_p: 0, repetition_penalty: 1 };

/**
 * A worker's default_sampling_params_json, as the gateway reads it: the five keys, numbers
 * (top_k a whole number), nulls dropped, other keys ignored. Anything else (not JSON, not an
 * object, a value of the wrong type) gives no defaults and says why, as the gateway drops the
 * label with a warning.
 */
export function parseSamplingDefaults(text: string | undefined): { defaults: SamplingDefaults; warning?: string } {
  if (text === undefined || text.trim() === '') return { defaults: {} };
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return { defaults: {}, warning: `${SAMPLING_DEFAULTS_LABEL} is not JSON: ${text.slice(0, 120)}` };
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed))
    return { defaults: {}, warning: `${SAMPLING_DEFAULTS_LABEL} is not a JSON object: ${text.slice(0, 120)}` };
  const defaults: SamplingDefaults = {};
  for (const key of SAMPLING_DEFAULT_KEYS) {
    const value = (parsed as Record<string, unknown>)[key];
    if (value === undefined || value === null) continue;
    if (typeof value !== 'number' || !Number.isFinite(value) || (key === 'top_k' && !Number.isInteger(value))) {
      return {
        defaults: {},
        warning: `${SAMPLING_DEFAULTS_LABEL}: ${key} must be ${key === 'top_k' ? 'a whole number' : 'a number'}, got ${JSON.stringify(value)}; the worker's defaults are ignored`,
      };
    }
    defaults[key] = value;
  }
  return { defaults };
}

/** The defaults a worker's labels give (an operator label overrides the discovered one, as every label does). */
export function samplingDefaultsOf(labels: Readonly<Record<string, string>>): { defaults: SamplingDefaults; warning?: string } {
  return parseSamplingDefaults(labels[SAMPLING_DEFAULTS_LABEL]);
}

/**
 * The request's sampling: the client's values, else the model's defaults, else the engines'.
 * `stopTokenId` says which stop strings are one token (the router's tokenizer).
 */
export function resolveSampling(client: ClientSampling, defaults: SamplingDefaults, stopTokenId: (stop: string) => number | undefined): SamplingOptions {
  const sources = {} as Record<SamplingDefaultKey, SamplingSource>;
  const pick = (key: SamplingDefaultKey, asked: number | undefined): number | undefined => {
    if (asked !== undefined) {
      sources[key] = 'client';
      return asked;
    }
    if (defaults[key] !== undefined) {
      sources[key] = 'model';
      return defaults[key];
    }
    sources[key] = 'default';
    return undefined;
  };
  const temperature = pick('temperature', client.temperature);
  const stop = client.stop ?? [];
  const stopTokenIds: number[] = [];
  for (const s of stop) {
    const id = stopTokenId(s);
    if (id !== undefined && !stopTokenIds.includes(id)) stopTokenIds.push(id);
  }
  return {
    ...(client.maxTokens !== undefined ? { maxTokens: client.maxTokens } : {}),
    ...(temperature !== undefined ? { temperature } : {}),
    topP: pick('top_p', client.topP) ?? ENGINE_SAMPLING_DEFAULTS.top_p,
    topK: pick('top_k', client.topK) ?? ENGINE_SAMPLING_DEFAULTS.top_k,
    minP: pick('min_p', client.minP) ?? ENGINE_SAMPLING_DEFAULTS.min_p,
    repetitionPenalty: pick('repetition_penalty', client.repetitionPenalty) ?? ENGINE_SAMPLING_DEFAULTS.repetition_penalty,
    frequencyPenalty: client.frequencyPenalty ?? 0,
    presencePenalty: client.presencePenalty ?? 0,
    stop,
    stopTokenIds,
    sources,
  };
}

/**
 * The sampling fields of a protocol whose proto3 zeros are real values (TokenSpeed, SGLang:
 * their generated messages name them alike), as the gateway fills them: every value set,
 * special tokens skipped, one completion; the stop strings for a runtime that matches them
 * (`stopStrings`), else the one-token stops as stop_token_ids.
 */
export function everyValueSet(s: SamplingOptions, stopStrings: boolean) {
  return {
    temperature: s.temperature ?? ENGINE_SAMPLING_DEFAULTS.temperature,
    topP: s.topP,
    topK: s.topK,
    minP: s.minP,
    frequencyPenalty: s.frequencyPenalty,
    presencePenalty: s.presencePenalty,
    repetitionPenalty: s.repetitionPenalty,
    ...(s.maxTokens !== undefined ? { maxNewTokens: s.maxTokens } : {}),
    stop: stopStrings ? s.stop : [],
    stopTokenIds: stopStrings ? [] : s.stopTokenIds,
    skipSpecialTokens: true,
    spacesBetweenSpecialTokens: true,
    n: 1,
  };
}

/** The values sent, by the gateway's names, with the keys the model's defaults filled, for the log line and the console. */
export function samplingSummary(s: SamplingOptions): Record<string, number | string[] | null> {
  return {
    temperature: s.temperature ?? ENGINE_SAMPLING_DEFAULTS.temperature,
    top_p: s.topP,
    top_k: s.topK,
    min_p: s.minP,
    repetition_penalty: s.repetitionPenalty,
    frequency_penalty: s.frequencyPenalty,
    presence_penalty: s.presencePenalty,
    max_tokens: s.maxTokens ?? null,
    stop: s.stop,
    from_model_defaults: SAMPLING_DEFAULT_KEYS.filter((k) => s.sources[k] === 'model'),
  };
}
