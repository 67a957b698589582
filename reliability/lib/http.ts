// The suite's HTTP client: node:http with keep-alive (fetch costs the client more per request,
// on a box it shares with the router; measured:
// docs/performance.md, "fetch against node:http in the load clients"), every outcome captured (status, headers, body,
// the text of a JSON or SSE completion, an error event inside a stream, a reset connection).
import http from 'node:http';
import { scenarioAborted } from './procs.ts';

export const agent = new http.Agent({ keepAlive: true, maxSockets: 512 });

export interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
  json: any;
  /** The completion's text (JSON choices[0].message.content, or the SSE deltas joined). */
  content: string | undefined;
  /** An error reported inside an SSE stream after it started. */
  streamError: string | undefined;
  /** The stream ended with data: [DONE]. */
  done: boolean;
  ms: number;
  /** The connection failed (reset, refused) before a response: the error code. */
  neterr?: string;
}

export function parseSse(text: string): { content: string; error?: string; done: boolean; ids: string[] } {
  let content = '';
  let error: string | undefined;
  const ids = new Set<string>();
  const events = text.split('\n\n').filter((e) => e.startsWith('data: '));
  for (const e of events) {
    const data = e.slice(6);
    if (data === '[DONE]') continue;
    try {
      const chunk = JSON.parse(data);
      if (chunk.error) error = chunk.error.message;
      if (chunk.id) ids.add(chunk.id);
      for (const c of chunk.choices ?? []) content += c.delta?.content ?? '';
    } catch {
      error = `unparsable SSE event: ${data.slice(0, 80)}`;
    }
  }
  return { content, ...(error ? { error } : {}), done: events.at(-1) === 'data: [DONE]', ids: [...ids] };
}

export interface RequestOptions {
  method?: string;
  path?: string;
  headers?: Record<string, string>;
  /** Send the body in these pieces, `delayMs` apart (chunked). */
  chunks?: Buffer[];
  delayMs?: number;
  timeoutMs?: number;
  /** Abort the request this many ms after it was sent (a client that goes away). */
  abortAfterMs?: number;
  agent?: http.Agent | false;
  /** Called with the body so far each time bytes arrive (a streaming client that watches). */
  onData?: (soFar: string) => void;
  /** Send again once after a reset on a reused keep-alive socket (default true; false to see every reset). */
  retry?: boolean;
}

let retries = 0;
/** How many requests were sent again after a reset on a reused socket (suite.ts reports it per scenario as client_retries). */
export const clientRetries = () => retries;

/**
 * One request; a request that failed on a kept-alive socket the server had just closed (its
 * keep-alive timeout, 5 s, racing our reuse) is sent again once on a new socket, as Node's
 * documentation advises: that is the client's race, not an answer of the server. Every such
 * retry is counted (clientRetries(), each scenario's `client_retries`); `retry: false` turns
 * it off for a scenario that must see a reset.
 */
export async function request(base: string, body: unknown, o: RequestOptions = {}): Promise<Reply> {
  const first = await requestOnce(base, body, o);
  if (first.retryable && o.retry !== false) {
    retries += 1;
    // On a connection of its own: the pool may hold more sockets the server has closed meanwhile.
    const { retryable: _again, ...reply } = await requestOnce(base, body, { ...o, agent: false });
    return reply;
  }
  const { retryable: _r, ...reply } = first;
  return reply;
}

function requestOnce(base: string, body: unknown, o: RequestOptions = {}): Promise<Reply & { retryable?: boolean }> {
  const u = new URL(`${base}${o.path ?? '/v1/chat/completions'}`);
  const data = body === undefined ? undefined : Buffer.isBuffer(body) ? body : Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
  const t = performance.now();
  return new Promise((resolve) => {
    // A scenario past its time bound sends nothing more (lib/suite.ts).
    if (scenarioAborted())
      return resolve({
        status: 0,
        headers: {},
        body: '',
        json: undefined,
        content: undefined,
        streamError: undefined,
        done: false,
        neterr: 'ESCENARIO_ABORTED',
        ms: 0,
      });
    let finished = false;
    const finish = (r: Omit<Reply, 'ms'> & { retryable?: boolean }) => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      resolve({ ...r, ms: performance.now() - t });
    };
    const failed = (code: string): Omit<Reply, 'ms'> => ({
      status: 0,
      headers: {},
      body: '',
      json: undefined,
      content: undefined,
      streamError: undefined,
      done: false,
      neterr: code,
    });
    const headers: Record<string, string | number> = {
      ...(data !== undefined ? { 'content-type': 'application/json' } : {}),
      ...(data !== undefined && !o.chunks ? { 'content-length': data.byteLength } : {}),
      ...o.headers,
    };
    let responded = false;
    const req = http.request(
      {
        host: u.hostname,
        port: u.port,
        path: u.pathname + u.search,
        method: o.method ?? (data !== undefined || o.chunks ? 'POST' : 'GET'),
        agent: o.agent ?? agent,
        headers,
      },
      (res) => {
        responded = true;
        const parts: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          size += c.length;
          if (size < 64 * 1024 * 1024) parts.push(c);
          if (o.onData) o.onData(Buffer.concat(parts).toString());
        });
        res.on('error', () => finish(failed('ERESPONSE')));
        res.on('aborted', () => finish(failed('EABORTED')));
        res.on('end', () => {
          const text = Buffer.concat(parts).toString();
          let json: unknown;
          let content: string | undefined;
          let streamError: string | undefined;
          let done = false;
          if (String(res.headers['content-type']).startsWith('text/event-stream')) {
            const s = parseSse(text);
            content = s.content;
            streamError = s.error;
            done = s.done;
          } else {
            try {
              json = JSON.parse(text);
              content = (json as { choices?: Array<{ message?: { content?: string } }> }).choices?.[0]?.message?.content;
            } catch {
              /* not a JSON completion (not JSON, or JSON null): the reply is read by its status and body */
            }
          }
          finish({ status: res.statusCode ?? 0, headers: res.headers, body: text, json, content, streamError, done });
        });
      },
    );
    const timer = setTimeout(() => {
      req.destroy();
      finish(failed('ETIMEOUT'));
    }, o.timeoutMs ?? 120_000);
    req.on('error', (err: NodeJS.ErrnoException) => {
      const code = err.code ?? 'EERROR';
      // An answer that came before the body was all sent (a 413 for a body too big): the
      // server may stop reading; what counts is the answer, which ends on its own.
      if (responded) return;
      if (req.reusedSocket && (code === 'ECONNRESET' || code === 'EPIPE')) finish({ ...failed(code), retryable: true });
      else finish(failed(code));
    });
    if (o.abortAfterMs !== undefined) setTimeout(() => req.destroy(), o.abortAfterMs);
    if (!o.chunks) {
      req.end(data);
      return;
    }
    let i = 0;
    const next = () => {
      if (req.destroyed) return;
      if (i >= o.chunks!.length) return void req.end();
      req.write(o.chunks![i++]);
      setTimeout(next, o.delayMs ?? 0);
    };
    next();
  });
}

export const get = (base: string, p: string, o: RequestOptions = {}) => request(base, undefined, { ...o, path: p, method: 'GET' });

/** Prometheus text -> {`name{labels}`: value}. */
export function parseMetrics(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const i = line.lastIndexOf(' ');
    out.set(line.slice(0, i), Number(line.slice(i + 1)));
  }
  return out;
}

export async function metrics(base: string): Promise<Map<string, number>> {
  const r = await get(base, '/metrics', { timeoutMs: 10_000 });
  return parseMetrics(r.body);
}

/**
 * /metrics for a sampler or a note: undefined when the router does not answer (stopping, or busy
 * past the 10 s timeout). A missed reading is a sample fewer, never a failure of the scenario;
 * what a scenario checks it reads with metrics().
 */
export async function metricsIfAnswered(base: string): Promise<Map<string, number> | undefined> {
  return metrics(base).catch(() => undefined); // no answer: no reading
}

/** Sum of every series of `name` whose labels contain all of `labels` (`path="shm"`). */
export function metricSum(m: Map<string, number>, name: string, ...labels: string[]): number {
  let n = 0;
  for (const [k, v] of m) {
    if (k !== name && !k.startsWith(`${name}{`)) continue;
    if (labels.every((l) => k.includes(l))) n += v;
  }
  return n;
}

export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!;
}

/** A console command through the HTTP binding (POST /api/<command> with the bearer token). */
export async function consoleCall(
  consoleUrl: string,
  token: string | undefined,
  command: string,
  input: unknown,
  extra: Record<string, string> = {},
): Promise<Reply> {
  return request(consoleUrl, input === undefined ? '{}' : input, {
    path: `/api/${command}`,
    headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...extra },
    timeoutMs: 60_000,
  });
}
