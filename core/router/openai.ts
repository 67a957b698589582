// The OpenAI-compatible surface: the chat-completions request schema (text and image_url
// parts, max_tokens / max_completion_tokens, the sampling fields, stop, stream), the error
// body ({error: {message, type, param, code}}) with its HTTP status, and the response and
// SSE chunk shapes exactly as OpenAI clients parse them.
import { z } from 'zod';
import { formatPath } from '../config/errors.ts';

const TextPart = z.strictObject({ type: z.literal('text'), text: z.string({ error: 'expected a string' }) });
const ImagePart = z.strictObject({
  type: z.literal('image_url'),
  image_url: z.strictObject({
    url: z.string({ error: 'expected a data: or http(s) URL' }).min(1, { error: 'expected a data: or http(s) URL' }),
    detail: z.enum(['auto', 'low', 'high']).optional(),
  }),
});
const ContentPart = z.discriminatedUnion('type', [TextPart, ImagePart], { error: "expected a content part of type 'text' or 'image_url'" });

const Message = z.object({
  role: z.enum(['system', 'user', 'assistant', 'developer'], { error: 'expected system, user, assistant or developer' }),
  content: z.union([z.string(), z.array(ContentPart), z.null()], { error: 'expected a string or a list of content parts' }),
  name: z.string().optional(),
});

export const ChatCompletionRequestSchema = z.object({
  model: z.string({ error: 'expected the model name as a string' }).optional(),
  messages: z.array(Message, { error: 'expected a list of messages' }).min(1, { error: 'expected at least one message' }),
  max_tokens: z.int({ error: 'expected a positive integer' }).positive({ error: 'expected a positive integer' }).nullish(),
  max_completion_tokens: z.int({ error: 'expected a positive integer' }).positive({ error: 'expected a positive integer' }).nullish(),
  temperature: z
    .number({ error: 'expected a number from 0 to 2' })
    .min(0, { error: 'expected a number from 0 to 2' })
    .max(2, { error: 'expected a number from 0 to 2' })
    .nullish(),
  top_p: z
    .number({ error: 'expected a number above 0 and at most 1' })
    .gt(0, { error: 'expected a number above 0 and at most 1' })
    .max(1, { error: 'expected a number above 0 and at most 1' })
    .nullish(),
  // vLLM's and SGLang's extensions, with the bounds their engines hold them to (the gateway's).
  top_k: z
    .int({ error: 'expected -1 (off) or a whole number from 1' })
    .refine((k) => k === -1 || k >= 1, { error: 'expected -1 (off) or a whole number from 1' })
    .nullish(),
  min_p: z
    .number({ error: 'expected a number from 0 to 1' })
    .min(0, { error: 'expected a number from 0 to 1' })
    .max(1, { error: 'expected a number from 0 to 1' })
    .nullish(),
  repetition_penalty: z
    .number({ error: 'expected a number above 0 and at most 2 (1 is no penalty)' })
    .gt(0, { error: 'expected a number above 0 and at most 2 (1 is no penalty)' })
    .max(2, { error: 'expected a number above 0 and at most 2 (1 is no penalty)' })
    .nullish(),
  frequency_penalty: z
    .number({ error: 'expected a number from -2 to 2' })
    .min(-2, { error: 'expected a number from -2 to 2' })
    .max(2, { error: 'expected a number from -2 to 2' })
    .nullish(),
  presence_penalty: z
    .number({ error: 'expected a number from -2 to 2' })
    .min(-2, { error: 'expected a number from -2 to 2' })
    .max(2, { error: 'expected a number from -2 to 2' })
    .nullish(),
  stop: z
    .union(
      [
        z.string().min(1, { error: 'expected a non-empty stop sequence' }),
        z.array(z.string().min(1, { error: 'expected a non-empty stop sequence' })).max(4, { error: 'expected at most 4 stop sequences' }),
      ],
      { error: 'expected a string or a list of strings' },
    )
    .nullish(),
  stream: z.boolean({ error: 'expected true or false' }).nullish(),
  stream_options: z.object({ include_usage: z.boolean().optional() }).nullish(),
  n: z.literal(1, { error: 'only n = 1 is supported' }).nullish(),
  user: z.string().optional(),
});
export type ChatCompletionRequest = z.infer<typeof ChatCompletionRequestSchema>;

export type ApiErrorType = 'invalid_request_error' | 'server_error' | 'service_unavailable' | 'timeout';

export class ApiError extends Error {
  override readonly name = 'ApiError';
  constructor(
    readonly status: number,
    message: string,
    readonly type: ApiErrorType = status < 500 ? 'invalid_request_error' : 'server_error',
    readonly param: string | null = null,
    readonly code: string | null = null,
  ) {
    super(message);
  }

  body() {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }
}

export function parseChatRequest(body: unknown): ChatCompletionRequest {
  const r = ChatCompletionRequestSchema.safeParse(body);
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  const path = formatPath(issue.path.filter((p): p is string | number => typeof p !== 'symbol'));
  const message =
    issue.code === 'unrecognized_keys' ? `unknown field ${path ? `${path}.` : ''}${issue.keys[0]}` : `invalid ${path || 'request body'}: ${issue.message}`;
  throw new ApiError(400, message, 'invalid_request_error', path || null);
}

export interface CompletionUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

export function completionBody(id: string, created: number, model: string, content: string, finishReason: string, usage: CompletionUsage) {
  return {
    id,
    object: 'chat.completion',
    created,
    model,
    choices: [{ index: 0, message: { role: 'assistant', content }, logprobs: null, finish_reason: finishReason }],
    usage,
  };
}

export function chunkBody(
  id: string,
  created: number,
  model: string,
  delta: { role?: 'assistant'; content?: string },
  finishReason: string | null,
  usage?: CompletionUsage | null,
) {
  return {
    id,
    object: 'chat.completion.chunk',
    created,
    model,
    choices: usage && finishReason === null && Object.keys(delta).length === 0 ? [] : [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
    ...(usage !== undefined ? { usage } : {}),
  };
}

/** OpenAI's finish reasons from the workers' ("stop", "length", "abort" …). */
export function openAiFinishReason(reason: string): string {
  if (reason === 'length') return 'length';
  if (reason === 'stop' || reason === 'eos' || reason === '') return 'stop';
  return reason;
}
