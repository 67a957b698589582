// The reference workers' stand-in for disaggregated serving's transfers (docs/router.md,
// "Disaggregated serving"). A real encode worker hands an image's embedding to the prefill
// worker, and a real prefill worker its KV cache to the decode worker, over their own channel
// (Mooncake, NIXL) keyed by a bootstrap room the router picks. Here that channel is a small
// HTTP server on the worker's bootstrap port: an encode worker keeps the record of what it
// read under the image's room, a prefill worker the record of its prefill under the KV room,
// and the next worker fetches it, waiting a bounded time for it to appear. What travels is a
// description of what was read, so the decode worker's answer can say where every tensor went.
import { status } from '@grpc/grpc-js';
import http from 'node:http';

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

/** How long a record is kept, and how many at most: enough for any request in flight. */
const RECORD_TTL_MS = 120_000;
const MAX_RECORDS = 10_000;
/** The longest a fetch may wait for its record, and how many may wait at once. */
const MAX_WAIT_MS = 60_000;
const MAX_WAITERS = 1_000;

interface Waiter {
  resolve(record: unknown): void;
}

export interface BootstrapServer {
  host: string;
  port: number;
  put(kind: RecordKind, room: string, record: unknown): void;
  close(): Promise<void>;
}

export async function startBootstrapServer(host: string, port: number): Promise<BootstrapServer> {
  const records = new Map<string, { record: unknown; expires: number }>();
  const waiters = new Map<string, Set<Waiter>>();
  let waiting = 0;
  const sweep = () => {
    const now = Date.now();
    for (const [key, r] of records) if (r.expires < now || records.size > MAX_RECORDS) records.delete(key);
  };
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://bootstrap');
    const m = /^\/(embedding|kv)\/(\d{1,20})$/.exec(url.pathname);
    const send = (code: number, body: unknown) => {
      res.writeHead(code, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (req.method !== 'GET' || !m) return send(404, { error: `no such resource ${url.pathname}` });
    const key = `${m[1]}/${m[2]}`;
    const held = records.get(key);
    if (held) return send(200, held.record);
    const waitMs = Math.min(MAX_WAIT_MS, Math.max(0, Number(url.searchParams.get('wait_ms')) || 0));
    if (waitMs === 0) return send(404, { error: `no ${m[1]} for room ${m[2]}` });
    if (waiting >= MAX_WAITERS) return send(503, { error: `${waiting} fetches are waiting already (at most ${MAX_WAITERS})` });
    const set = waiters.get(key) ?? new Set<Waiter>();
    waiters.set(key, set);
    const waiter: Waiter = {
      resolve(record) {
        clearTimeout(timer);
        set.delete(waiter);
        send(200, record);
      },
    };
    const timer = setTimeout(() => {
      set.delete(waiter);
      if (set.size === 0) waiters.delete(key);
      send(404, { error: `no ${m[1]} for room ${m[2]} within ${waitMs} ms` });
    }, waitMs);
    res.on('close', () => {
      clearTimeout(timer);
      set.delete(waiter);
      if (set.size === 0 && waiters.get(key) === set) waiters.delete(key);
    });
    set.add(waiter);
    waiting += 1;
    res.on('close', () => (waiting -= 1));
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
    put(kind, room, record) {
      sweep();
      const key = `${kind}/${room}`;
      records.set(key, { record, expires: Date.now() + RECORD_TTL_MS });
      const set = waiters.get(key);
      waiters.delete(key);
      for (const w of set ?? []) w.resolve(record);
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/**
 * Fetch the record under `room` from a bootstrap server, waiting at most `waitMs` for it:
 * DEADLINE_EXCEEDED naming the server and room when it never came, FAILED_PRECONDITION when
 * the server cannot be reached. `cancelled` stops the wait (the call was cancelled).
 */
export function fetchBootstrapRecord<T>(what: string, host: string, port: number, kind: RecordKind, room: string, waitMs: number, cancelled: { on(event: 'cancelled', f: () => void): unknown }): Promise<T> {
  const where = `${host.includes(':') ? `[${host}]` : host}:${port}`;
  return new Promise<T>((resolve, reject) => {
    const req = http.get({ host, port, path: `/${kind}/${room}?wait_ms=${waitMs}`, timeout: waitMs + 2_000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => {
        if (body.length < 1 << 20) body += d;
      });
      res.on('end', () => {
        if (res.statusCode === 200) {
          try {
            return resolve(JSON.parse(body) as T);
          } catch {
            return reject(new CallRefused(status.INTERNAL, `${what}: the bootstrap server ${where} sent a record that is not JSON`));
          }
        }
        reject(new CallRefused(status.DEADLINE_EXCEEDED, `${what}: no ${kind === 'kv' ? 'KV' : kind} from ${where} room ${room} within ${waitMs} ms`));
      });
    });
    req.on('timeout', () => req.destroy(new Error('timed out')));
    // Not UNAVAILABLE: this worker is up; the peer whose bootstrap server it needs is not.
    req.on('error', (err) => reject(new CallRefused(status.FAILED_PRECONDITION, `${what}: the bootstrap server ${where} cannot be reached: ${err.message}`)));
    cancelled.on('cancelled', () => req.destroy(new Error('the call was cancelled')));
  });
}
