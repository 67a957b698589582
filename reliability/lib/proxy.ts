// A loopback TCP proxy in front of a worker: the slow link of the fault scenarios. It passes
// bytes through unchanged (gRPC over HTTP/2 does not know it is there) at a bounded rate in
// each direction, with an added latency per chunk; its rates and latency can be changed while
// it runs, and it can cut every connection or send new ones to another target (a worker
// restarted behind the same address). Listens on 127.0.0.1 only.
import net from 'node:net';

export interface ProxyOptions {
  target: { host: string; port: number };
  /** Bytes per second from the router to the worker (the inline tensors); Infinity: no limit. */
  upBytesPerSec?: number;
  /** Bytes per second from the worker to the router (the answers). */
  downBytesPerSec?: number;
  /** Added to every chunk in each direction. */
  latencyMs?: number;
  listenPort?: number;
}

export interface Proxy {
  port: number;
  url: string;
  /** Bytes forwarded each way so far. */
  stats(): { up: number; down: number; connections: number };
  set(options: Partial<Pick<ProxyOptions, 'upBytesPerSec' | 'downBytesPerSec' | 'latencyMs'>>): void;
  /** Destroy every open connection (a link that drops). */
  cut(): void;
  /** Send new connections elsewhere (a process that restarted behind the same address). */
  retarget(target: { host: string; port: number }): void;
  close(): Promise<void>;
}

/**
 * A paced pipe: chunks leave in order, no faster than `rate()` bytes/s, each `latency()` ms
 * late. One queue and one timer per direction, so bytes are never reordered; the source is
 * paused while more than 4 MiB wait.
 */
function pace(from: net.Socket, to: net.Socket, rate: () => number, latency: () => number, count: (n: number) => void): void {
  const SLICE = 16 * 1024;
  const queue: Array<{ part: Buffer; at: number }> = [];
  let queued = 0;
  let nextFree = 0;
  let timer: NodeJS.Timeout | undefined;
  const pump = () => {
    timer = undefined;
    const now = Date.now();
    while (queue.length > 0 && queue[0]!.at <= now) {
      const { part } = queue.shift()!;
      queued -= part.length;
      if (!to.destroyed) to.write(part);
      count(part.length);
    }
    if (queued < 1024 * 1024 && from.isPaused()) from.resume();
    if (queue.length > 0) timer = setTimeout(pump, Math.max(1, queue[0]!.at - now));
  };
  from.on('data', (chunk: Buffer) => {
    for (let off = 0; off < chunk.length; off += SLICE) {
      const part = chunk.subarray(off, Math.min(chunk.length, off + SLICE));
      const r = rate();
      const now = Date.now();
      const start = Math.max(now, nextFree);
      nextFree = start + (Number.isFinite(r) && r > 0 ? (part.length * 1000) / r : 0);
      queue.push({ part, at: Math.max(nextFree + latency(), queue.at(-1)?.at ?? 0) });
      queued += part.length;
    }
    if (queued > 4 * 1024 * 1024) from.pause();
    if (!timer) pump();
  });
  from.on('close', () => {
    if (timer) clearTimeout(timer);
  });
}

export async function startProxy(options: ProxyOptions): Promise<Proxy> {
  const o = { upBytesPerSec: Infinity, downBytesPerSec: Infinity, latencyMs: 0, ...options };
  const sockets = new Set<net.Socket>();
  const totals = { up: 0, down: 0, connections: 0 };
  const server = net.createServer((client) => {
    totals.connections += 1;
    const upstream = net.connect(o.target.port, o.target.host);
    sockets.add(client);
    sockets.add(upstream);
    const close = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('error', close);
    upstream.on('error', close);
    client.on('close', close);
    upstream.on('close', close);
    pace(
      client,
      upstream,
      () => o.upBytesPerSec,
      () => o.latencyMs,
      (n) => (totals.up += n),
    );
    pace(
      upstream,
      client,
      () => o.downBytesPerSec,
      () => o.latencyMs,
      (n) => (totals.down += n),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.listenPort ?? 0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as net.AddressInfo).port;
  return {
    port,
    url: `grpc://127.0.0.1:${port}`,
    stats: () => ({ ...totals }),
    set(next) {
      Object.assign(o, next);
    },
    cut() {
      for (const s of sockets) s.destroy();
      sockets.clear();
    },
    retarget(target) {
      o.target = target;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
