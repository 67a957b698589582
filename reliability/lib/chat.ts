// Chat requests with corpus images, and the check of what came back: the worker's sentence
// must list exactly the tensors the router had to produce for those images, with the same
// shapes, dtypes, sizes and FNV-1a fingerprints (nothing lost, nothing corrupted), and the
// path each tensor took.
import { compareTensors, expectedTensors, parseWorkerReport, type CorpusImage, type ReportedTensor } from './images.ts';
import { parseSse, request, type Reply } from './http.ts';
import type { Rng } from './rng.ts';

export interface SentChat {
  images: CorpusImage[];
  stream: boolean;
  body: Buffer;
}

export function chatBody(images: ReadonlyArray<Pick<CorpusImage, 'dataUrl'>>, options: { stream?: boolean; text?: string; maxTokens?: number } = {}): Buffer {
  const content = [
    ...images.flatMap((im, i) => [
      { type: 'image_url', image_url: { url: im.dataUrl } },
      ...(i < images.length - 1 ? [{ type: 'text', text: `image ${i + 1} and` }] : []),
    ]),
    { type: 'text', text: options.text ?? 'What is in these pictures?' },
  ];
  return Buffer.from(
    JSON.stringify({
      model: 'qwen2-vl-mini',
      ...(options.stream ? { stream: true, stream_options: { include_usage: true } } : {}),
      ...(options.maxTokens ? { max_tokens: options.maxTokens } : {}),
      messages: [{ role: 'user', content }],
    }),
  );
}

/** 1–3 images (or as many as `counts` draws) of mixed sizes and formats, streaming or not. */
export function randomChat(rng: Rng, corpus: readonly CorpusImage[], counts: readonly number[] = [1, 1, 2, 2, 3]): SentChat {
  const n = rng.pick(counts);
  const images = Array.from({ length: n }, () => rng.pick(corpus));
  const stream = rng.chance(0.5);
  return { images, stream, body: chatBody(images, { stream }) };
}

export interface Verdict {
  ok: boolean;
  problems: string[];
  runtime?: 'tokenspeed' | 'vllm';
  tensors: ReportedTensor[];
  /** Tensors by path as the worker reported them. */
  paths: Record<string, number>;
  id?: string;
  revision?: number;
}

export function replyId(reply: Reply): string | undefined {
  if (reply.json?.id) return reply.json.id as string;
  if (String(reply.headers['content-type']).startsWith('text/event-stream')) return parseSse(reply.body).ids[0];
  return undefined;
}

/** Check a 200 reply against what the images must have become. */
export function verifyChat(reply: Reply, sent: SentChat): Verdict {
  const problems: string[] = [];
  const revisionHeader = reply.headers['x-mmtc-config-revision'];
  const base = {
    tensors: [] as ReportedTensor[],
    paths: {} as Record<string, number>,
    id: replyId(reply),
    ...(revisionHeader !== undefined ? { revision: Number(revisionHeader) } : {}),
  };
  if (reply.status !== 200) return { ok: false, problems: [`HTTP ${reply.status || reply.neterr}: ${reply.body.slice(0, 300)}`], ...base };
  if (sent.stream && (!reply.done || reply.streamError))
    problems.push(`stream ${reply.streamError ? `error: ${reply.streamError}` : 'did not end with [DONE]'}`);
  if (revisionHeader === undefined) problems.push('no x-mmtc-config-revision header');
  const report = reply.content === undefined ? undefined : parseWorkerReport(reply.content);
  if (!report) return { ok: false, problems: [...problems, `no worker report in the completion: ${String(reply.content).slice(0, 200)}`], ...base };
  const runtime = report.tensors.some((t) => t.name === 'pixel_values') ? 'vllm' : 'tokenspeed';
  if (report.images !== sent.images.length) problems.push(`the worker saw ${report.images} images, ${sent.images.length} were sent`);
  problems.push(...compareTensors(expectedTensors(runtime, sent.images), report.tensors));
  const paths: Record<string, number> = {};
  for (const t of report.tensors) paths[t.path] = (paths[t.path] ?? 0) + 1;
  return { ...base, ok: problems.length === 0, problems, runtime, tensors: report.tensors, paths };
}

export async function sendChat(base: string, sent: SentChat, timeoutMs = 120_000): Promise<{ reply: Reply; verdict: Verdict }> {
  const reply = await request(base, sent.body, { timeoutMs });
  return { reply, verdict: verifyChat(reply, sent) };
}

export interface RequestLogLine {
  id?: string;
  status: number;
  worker?: string;
  revision?: number;
  tensors?: Record<string, number>;
  error?: string;
  path: string;
  latency_ms: number;
  shm_read_failed?: string;
}

/** The router's JSON request lines in a process's output. */
export function requestLines(output: string): RequestLogLine[] {
  const out: RequestLogLine[] = [];
  for (const line of output.split('\n')) {
    if (!line.startsWith('{"time"')) continue;
    try {
      const j = JSON.parse(line);
      if (j.event === 'request') out.push(j);
    } catch {
      /* cut by the output cap */
    }
  }
  return out;
}
