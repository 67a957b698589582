// The reference workers' stand-in for disaggregated serving's transfers (docs/router.md,
// "Disaggregated serving"). A real encode worker hands an image's embedding to the prefill
// worker, and a real prefill worker its KV cache to the decode worker, over their own channel
// (Mooncake, NIXL) keyed by a bootstrap room the router picks. Here that channel is a small
// HTTP server on the worker's bootstrap port: an encode worker keeps the record of what it
// read under the image's room, a prefill worker the record of its prefill under the KV room,
// and the next worker fetches it, waiting a bounded time for it to appear. What travels is a
// description of what was read, so the decode worker's answer can say where every tensor went.
//
// Anyone who can reach the port can send it anything: a request target that is not a URL is a
// 400 (it stopped the process), and idle fetches for rooms no call will ever fill cannot shut
// out the real ones. A room is *expected* once the call that will fill it has arrived (an
// Encode call for its image, a prefill's Generate for its KV room); when the table of waiting
// fetches is full, the fetch that has waited longest for a room nobody expects gives way
// (503, "displaced"), and a fetcher that is told so asks again while its wait lasts. Only a
// table full of fetches for expected rooms refuses a newcomer, and says so (RESOURCE_EXHAUSTED,
// never "no embedding within N ms").
import { status } from '@grpc/grpc-js';
import http from 'node:http';
import { requestTarget } from '../router/http-request.ts';

/** A call refused with its gRPC status (a role's missing bootstrap info, a record that never came). */
export class CallRefused extends Error {
  constructor(
    readonly code: status,
    message: string,
  ) {
    super(message);
  }
}

export type RecordKind = 'embedding' | 'kv';

/** How long a record (or a room's expectation) is kept, and how many at most: enough for any request in flight. */
const RECORD_TTL_MS = 120_000;
const MAX_RECORDS = 10_000;
/** The longest a fetch may wait for its record, and how many may wait at once. */
const MAX_WAIT_MS = 60_000;
export const MAX_WAITERS = 1_000;
/** A displaced fetch asks again after this pause, while its wait lasts, at most this often. */
const REFETCH_PAUSE_MS = 50;
const MAX_REFETCHES = 200;

interface Waiter {
  key: string;
  resolve(record: unknown): void;
  /** Answered 503 to make room for a fetch of a room that is expected. */
  displace(why: string): void;
}

export interface BootstrapServer {
  host: string;
  port: number;
  /** A record for `room` is coming (the call that makes it has arrived): its fetches are never displaced. */
  expect(kind: RecordKind, room: string): void;
  put(kind: RecordKind, room: string, record: unknown): void;
  close(): Promise<void>;
}

export async function startBootstrapServer(host: string, port: number): Promise<BootstrapServer> {
  const maxWaiters = MAX_WAITERS;
  const records = new Map<string, { record: unknown; expires: number }>();
  /** Rooms whose record is coming: key -> until when. */
  const expected = new Map<string, number>();
  const waiters = new Map<string, Set<Waiter>>();
  /** Fetches for rooms nobody expects (yet), oldest first: the first to give way. */
  const unexpected = new Set<Waiter>();
  let waiting = 0;
  const sweep = () => {
    const now = Date.now();
    for (const [key, r] of records) if (r.expires < now || records.size > MAX_RECORDS) records.delete(key);
    for (const [key, until] of expected) if (until < now || expected.size > MAX_RECORDS) expected.delete(key);
  };
  const server = http.createServer((req, res) => {
    const send = (code: number, body: unknown, headers: Record<string, string> = {}) => {
      if (res.headersSent) return;
      const text = JSON.stringify(body);
      res.writeHead(code, { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
      res.end(text);
    };
    const target = requestTarget(req.url);
    if (!target.ok) return send(400, { error: target.error }, { connection: 'close' });
    const m = /^\/(embedding|kv)\/(\d{1,20})$/.exec(target.pathname);
    if (req.method !== 'GET' || !m) return send(404, { error: `no such resource ${JSON.stringify(target.pathname.slice(0, 80))}` });
    const key = `${m[1]}/${m[2]}`;
    const held = records.get(key);
    if (held) return send(200, held.record);
    const waitMs = Math.min(MAX_WAIT_MS, Math.max(0, Number(target.query.get('wait_ms')) || 0));
    if (waitMs === 0) return send(404, { error: `no ${m[1]} for room ${m[2]}` });
    if (waiting >= maxWaiters) {
      const oldest = unexpected.values().next().value;
      if (!oldest) return send(503, { error: `${waiting} fetches are waiting already, each for a room whose record is coming (at most ${maxWaiters})` });
      oldest.displace(`displaced: ${waiting} fetches are waiting (at most ${maxWaiters}) and this one's room is not expected; fetch again`);
    }
    const set = waiters.get(key) ?? new Set<Waiter>();
    waiters.set(key, set);
    const forget = () => {
      clearTimeout(timer);
      set.delete(waiter);
      unexpected.delete(waiter);
      if (set.size === 0 && waiters.get(key) === set) waiters.delete(key);
    };
    const waiter: Waiter = {
      key,
      resolve(record) {
        forget();
        send(200, record);
      },
      displace(why) {
        forget();
        send(503, { error: why });
      },
    };
    const timer = setTimeout(() => {
      forget();
      send(404, { error: `no ${m[1]} for room ${m[2]} within ${waitMs} ms` });
    }, waitMs);
    set.add(waiter);
    if (!expected.has(key)) unexpected.add(waiter);
    waiting += 1;
    res.on('close', () => {
      forget();
      waiting -= 1;
    });
  });
  const hostPart = host.includes(':') ? `[${host}]` : host;
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err) => reject(new Error(`cannot start the bootstrap server on ${hostPart}:${port}: ${err.message}`)));
    server.listen(port, host, () => resolve());
  });
  const bound = (server.address() as { port: number }).port;
  return {
    host,
    port: bound,
    expect(kind, room) {
      sweep();
      const key = `${kind}/${room}`;
      if (records.has(key)) return;
      expected.set(key, Date.now() + RECORD_TTL_MS);
      for (const w of waiters.get(key) ?? []) unexpected.delete(w);
    },
    put(kind, room, record) {
      sweep();
      const key = `${kind}/${room}`;
      expected.delete(key);
      records.set(key, { record, expires: Date.now() + RECORD_TTL_MS });
      const set = waiters.get(key);
      waiters.delete(key);
      for (const w of [...(set ?? [])]) w.resolve(record);
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** One GET of a record: its status and body, or the connection's error; `started` gets the request (to cancel it). */
function getOnce(
  host: string,
  port: number,
  path: string,
  timeoutMs: number,
  started: (req: http.ClientRequest) => void,
): Promise<{ status: number; body: string } | { error: Error }> {
  return new Promise((resolve) => {
    const req = http.get({ host, port, path, timeout: timeoutMs }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => {
        if (body.length < 1 << 20) body += d;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', (error) => resolve({ error }));
    });
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', (error) => resolve({ error }));
    started(req);
  });
}

/** The server's own words in an error body, quoted short. */
function serverWords(body: string): string {
  try {
    const e = (JSON.parse(body) as { error?: unknown } | null)?.error;
    if (typeof e === 'string') return e.slice(0, 300);
  } catch (err) {
    if (!(err instanceof SyntaxError)) throw err;
    // Not JSON: the body itself is quoted below.
  }
  return JSON.stringify(body.slice(0, 120));
}

/**
 * Fetch the record under `room` from a bootstrap server, waiting at most `waitMs` for it:
 * DEADLINE_EXCEEDED naming the server and room when it never came; RESOURCE_EXHAUSTED when the
 * server's table of waiting fetches stayed full (a displaced fetch asks again while its wait
 * lasts); FAILED_PRECONDITION when the server cannot be reached; UNKNOWN for any other answer,
 * in its words. `cancelled` stops the wait (the call was cancelled).
 */
export async function fetchBootstrapRecord<T>(
  what: string,
  host: string,
  port: number,
  kind: RecordKind,
  room: string,
  waitMs: number,
  cancelled: { on(event: 'cancelled', f: () => void): unknown },
): Promise<T> {
  const where = `${host.includes(':') ? `[${host}]` : host}:${port}`;
  const kindWords = kind === 'kv' ? 'KV' : kind;
  const end = Date.now() + waitMs;
  let gone = false;
  let current: http.ClientRequest | undefined;
  cancelled.on('cancelled', () => {
    gone = true;
    current?.destroy(new Error('the call was cancelled'));
  });
  for (let attempt = 1; ; attempt++) {
    const left = Math.max(1, end - Date.now());
    const r = await getOnce(host, port, `/${kind}/${room}?wait_ms=${left}`, left + 2_000, (req) => {
      current = req;
      if (gone) req.destroy(new Error('the call was cancelled'));
    });
    // Not UNAVAILABLE: this worker is up; the peer whose bootstrap server it needs is not.
    if ('error' in r) throw new CallRefused(status.FAILED_PRECONDITION, `${what}: the bootstrap server ${where} cannot be reached: ${r.error.message}`);
    if (r.status === 200) {
      try {
        return JSON.parse(r.body) as T;
      } catch {
        throw new CallRefused(status.INTERNAL, `${what}: the bootstrap server ${where} sent a record that is not JSON`);
      }
    }
    if (r.status === 404) throw new CallRefused(status.DEADLINE_EXCEEDED, `${what}: no ${kindWords} from ${where} room ${room} within ${waitMs} ms`);
    if (r.status !== 503)
      throw new CallRefused(status.UNKNOWN, `${what}: the bootstrap server ${where} answered ${r.status} to the fetch of room ${room}: ${serverWords(r.body)}`);
    if (gone || attempt >= MAX_REFETCHES || Date.now() + REFETCH_PAUSE_MS >= end) {
      throw new CallRefused(
        status.RESOURCE_EXHAUSTED,
        `${what}: the bootstrap server ${where} refused the fetch of room ${room} (503, ${attempt} time${attempt === 1 ? '' : 's'} in ${waitMs - Math.max(0, end - Date.now())} ms): ${serverWords(r.body)}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, REFETCH_PAUSE_MS));
  }
}
