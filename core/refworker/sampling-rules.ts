// What each runtime's servicer and engine make of a request's SamplingParams, so the reference
// worker refuses what the real one refuses, with its words (docs/router.md, "What each servicer
// reads"), and generates under the stop conditions the real engine applies:
//   vLLM       the servicer maps an unset temperature to 1.0, top_p 0 and repetition_penalty 0
//              to 1.0, then vLLM's SamplingParams checks its bounds; stop strings are matched
//              on the text (the output's ids end with the token that completes one).
//   TokenSpeed the servicer forwards only the optional fields that are set, the engine fills
//              the rest (temperature 1, top_p 1, top_k -1, ...) and verify() checks the bounds,
//              its fused top-k kernel taking at most 127; stop strings as vLLM.
//   SGLang     the servicer passes every field through as it is (a proto3 zero is a real
//              zero) and nothing checks the bounds on the gRPC path: a repetition_penalty of 0
//              divides the logits by zero, top_p 0 keeps no token. The reference worker refuses
//              those with the words of SGLang's own SamplingParams.verify(), since the engine
//              would compute garbage. Its workers run with skip_tokenizer_init, under which
//              normalize() refuses stop strings and min_new_tokens; stop_token_ids stop it,
//              the stop token included in the output.
// Every refusal is INVALID_ARGUMENT (a ValueError in the servicer).
import type { SamplingParams as SglangSampling } from '../gen/sglang/grpc/scheduler.ts';
import type { SamplingParams as TokenSpeedSampling } from '../gen/tokenspeed/grpc/scheduler.ts';
import type { SamplingParams as VllmSampling } from '../gen/vllm/grpc/engine.ts';
import { RequestInvalid } from './receive.ts';

/** How the engine ends a generation besides its token limit and the EOS. */
export interface StopRules {
  /** Stop strings, matched on the generated text. */
  strings: readonly string[];
  /** Stop token ids: the generation ends with the first of them (included). */
  tokenIds: readonly number[];
}

/** What a request's sampling leaves the reference worker to apply as it generates. */
export interface GenerationRules {
  maxTokens: number | undefined;
  stops: StopRules;
}

/** A float as Python prints it in these messages (1 -> 1.0; both print the shortest repr otherwise). */
function py(x: number): string {
  return Number.isInteger(x) ? x.toFixed(1) : String(x);
}

function check(ok: boolean, message: string): void {
  if (!ok) throw new RequestInvalid(message);
}

/** vLLM's servicer mapping and SamplingParams checks (vllm/sampling_params.py _verify_args). */
export function judgeVllmSampling(p: VllmSampling | undefined): GenerationRules {
  const s =
    p ??
    ({
      topP: 0,
      topK: 0,
      minP: 0,
      frequencyPenalty: 0,
      presencePenalty: 0,
      repetitionPenalty: 0,
      stop: [],
      stopTokenIds: [],
      minTokens: 0,
    } as unknown as VllmSampling);
  const temperature = s.temperature ?? 1;
  const topP = s.topP !== 0 ? s.topP : 1;
  const repetition = s.repetitionPenalty !== 0 ? s.repetitionPenalty : 1;
  check(-2 <= s.presencePenalty && s.presencePenalty <= 2, `presence_penalty must be in [-2, 2], got ${py(s.presencePenalty)}.`);
  check(-2 <= s.frequencyPenalty && s.frequencyPenalty <= 2, `frequency_penalty must be in [-2, 2], got ${py(s.frequencyPenalty)}.`);
  check(repetition > 0, `repetition_penalty must be greater than zero, got ${py(repetition)}.`);
  check(temperature >= 0, `temperature must be non-negative, got ${py(temperature)}.`);
  check(topP > 0 && topP <= 1, `top_p must be in (0, 1], got ${py(topP)}.`);
  check(s.minP >= 0 && s.minP <= 1, `min_p must be in [0, 1], got ${py(s.minP)}.`);
  if (s.maxTokens !== undefined) check(s.maxTokens >= 1, `max_tokens must be at least 1, got ${s.maxTokens}.`);
  if (s.maxTokens !== undefined && s.minTokens > s.maxTokens)
    throw new RequestInvalid(`min_tokens must be less than or equal to max_tokens=${s.maxTokens}, got ${s.minTokens}.`);
  return { maxTokens: s.maxTokens, stops: { strings: s.stop, tokenIds: s.stopTokenIds } };
}

/** TokenSpeed's forwarding of set fields and its SamplingParams.verify(). */
export function judgeTokenSpeedSampling(p: TokenSpeedSampling | undefined): GenerationRules {
  const temperature = p?.temperature ?? 1;
  let topK = p?.topK ?? -1;
  const topP = p?.topP ?? 1;
  const minP = p?.minP ?? 0;
  const repetition = p?.repetitionPenalty ?? 1;
  const frequency = p?.frequencyPenalty ?? 0;
  const presence = p?.presencePenalty ?? 0;
  check(temperature >= 0, `temperature must be non-negative, got ${py(temperature)}.`);
  // A temperature this close to 0 is greedy: top_k 1.
  if (temperature < 1e-6) topK = 1;
  check(topP > 0 && topP <= 1, `top_p must be in (0, 1], got ${py(topP)}.`);
  check(minP >= 0 && minP <= 1, `min_p must be in [0, 1], got ${py(minP)}.`);
  check(topK === -1 || topK >= 1, `top_k must be -1 (disable), or at least 1, got ${topK}.`);
  check(topK === -1 || topK < 128, `top_k must be < 128 (fused kernel limit) or -1 (disable), got ${topK}.`);
  check(-2 <= frequency && frequency <= 2, `frequency_penalty must be in [-2, 2], got ${py(frequency)}.`);
  check(-2 <= presence && presence <= 2, `presence_penalty must be in [-2, 2], got ${py(presence)}.`);
  check(0 <= repetition && repetition <= 2, `repetition_penalty must be in (0, 2], got ${py(repetition)}.`);
  const max = p?.maxNewTokens;
  if (max !== undefined) check(max >= 0, `max_new_tokens must be at least 0, got ${max}.`);
  if (max !== undefined && (p?.minNewTokens ?? 0) > max)
    throw new RequestInvalid(`min_new_tokens must be in (0, max_new_tokens(${max})], got ${p!.minNewTokens}.`);
  return { maxTokens: max, stops: { strings: p?.stop ?? [], tokenIds: p?.stopTokenIds ?? [] } };
}

/** SGLang under skip_tokenizer_init: normalize()'s refusals, and the bounds of its verify() the engine needs to compute anything sensible. */
export function judgeSglangSampling(p: SglangSampling | undefined): GenerationRules {
  const s =
    p ??
    ({
      temperature: 0,
      topP: 0,
      topK: 0,
      minP: 0,
      frequencyPenalty: 0,
      presencePenalty: 0,
      repetitionPenalty: 0,
      stop: [],
      stopTokenIds: [],
      minNewTokens: 0,
    } as unknown as SglangSampling);
  if (s.stop.length > 0)
    throw new RequestInvalid(`stop=${pyList(s.stop)} is unavailable when skip_tokenizer_init=True (requires tokenizer to decode tokens to text for matching).`);
  if (s.minNewTokens > 0)
    throw new RequestInvalid(`min_new_tokens=${s.minNewTokens} is unavailable when skip_tokenizer_init=True (requires tokenizer for eos_token_id).`);
  check(Number.isFinite(s.temperature) && s.temperature >= 0, `temperature must be a non-negative finite number, got ${py(s.temperature)}.`);
  check(s.topP > 0 && s.topP <= 1, `top_p must be in (0, 1], got ${py(s.topP)}.`);
  check(s.minP >= 0 && s.minP <= 1, `min_p must be in [0, 1], got ${py(s.minP)}.`);
  // Greedy (temperature ~0) sets top_k 1 before the check; -1 is "all".
  const topK = s.temperature < 1e-6 ? 1 : s.topK;
  check(topK === -1 || topK >= 1, `top_k must be -1 (disable) or at least 1, got ${topK}.`);
  check(-2 <= s.frequencyPenalty && s.frequencyPenalty <= 2, `frequency_penalty must be in [-2, 2], got ${py(s.frequencyPenalty)}.`);
  check(-2 <= s.presencePenalty && s.presencePenalty <= 2, `presence_penalty must be in [-2, 2], got ${py(s.presencePenalty)}.`);
  check(s.repetitionPenalty > 0 && s.repetitionPenalty <= 2, `repetition_penalty must be in (0, 2] (1.0 = no penalty), got ${py(s.repetitionPenalty)}.`);
  return { maxTokens: s.maxNewTokens, stops: { strings: [], tokenIds: s.stopTokenIds } };
}

/** A list of strings as Python's repr prints it. */
function pyList(items: readonly string[]): string {
  return `[${items.map((s) => `'${s.replaceAll('\\', '\\\\').replaceAll("'", "\\'")}'`).join(', ')}]`;
}
