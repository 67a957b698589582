// Console stream benchmark: 20,000 tensor events a second for 10 s through the real console
// binding (bench/console-server.ts) to a deliberately slow WebSocket client, while chat
// requests go through the router. It reports what the slow client got (batches, their sizes,
// the dropped count the stream tells it) and the router's request latency with the client
// connected against the same run without it (phases interleaved); target: ≤ 10 % slower.
//
// Usage: npm run bench:console [-- --quick]
import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import path from 'node:path';
import WebSocket from 'ws';
import { syntheticChat } from '../core/console/test-image.ts';
import { root, runBench, track } from './procs.ts';

const quick = process.argv.includes('--quick');
const RATE = 20_000;
const PHASE_MS = quick ? 3_000 : 5_000;
const ROUNDS = quick ? 1 : 2; // with-client time per run: ROUNDS * PHASE_MS

const percentile = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? NaN;
};

const agent = new http.Agent({ keepAlive: true });
function chat(url: string, body: Buffer): Promise<number> {
  const u = new URL(`${url}/v1/chat/completions`);
  const t = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: u.hostname,
        port: u.port,
        path: u.pathname,
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': body.byteLength },
      },
      (res) => {
        let text = '';
        res.on('data', (d: Buffer) => {
          if (text.length < 500) text += d.toString();
        });
        res.on('end', () => (res.statusCode === 200 ? resolve(performance.now() - t) : reject(new Error(`HTTP ${res.statusCode}: ${text.slice(0, 500)}`))));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

async function requestsFor(ms: number, url: string, body: Buffer): Promise<number[]> {
  const out: number[] = [];
  const end = performance.now() + ms;
  while (performance.now() < end) out.push(await chat(url, body));
  return out;
}

/** A client that reads its socket for 100 ms out of every 3 s: far behind by design (loopback socket buffers hold megabytes, so a mildly slow reader never makes the server wait). */
function slowClient(consoleUrl: string, token: string) {
  const stats = { batches: 0, events: 0, maxBatch: 0, dropped: 0 };
  const ws = new WebSocket(`${consoleUrl.replace('http', 'ws')}api/events`, ['mmtc.v1', `mmtc.token.${token}`]);
  let toggle: NodeJS.Timeout | undefined;
  const opened = new Promise<void>((resolve, reject) => {
    ws.on('open', () => {
      ws.send(JSON.stringify({ op: 'subscribe', stream: 'traffic' }));
      const socket = (ws as unknown as { _socket: import('node:net').Socket })._socket;
      let tick = 0;
      toggle = setInterval(() => {
        tick = (tick + 1) % 30;
        if (tick === 0) socket.resume();
        else socket.pause();
      }, 100);
      resolve();
    });
    ws.on('error', reject);
  });
  ws.on('message', (data) => {
    const msg = JSON.parse(String(data)) as { stream: string; payload: { events: unknown[]; dropped: number } };
    if (msg.stream !== 'traffic') return;
    stats.batches += 1;
    stats.events += msg.payload.events.length;
    stats.maxBatch = Math.max(stats.maxBatch, msg.payload.events.length);
    stats.dropped = msg.payload.dropped;
  });
  return {
    stats,
    opened,
    close: () => {
      if (toggle) clearInterval(toggle);
      ws.terminate();
    },
  };
}

async function main() {
  // Tracked: runBench stops it and waits for its exit (it stops its router's embedded worker first).
  const child: ChildProcess = track(
    spawn(process.execPath, ['--import', 'tsx', path.join(root, 'bench', 'console-server.ts'), '--events-per-second', String(RATE)], {
      cwd: root,
      stdio: ['ignore', 'pipe', 'inherit'],
    }),
  );
  let published = 0;
  const info = await new Promise<{ console: string; token: string; router: string }>((resolve, reject) => {
    let buf = '';
    child.stdout!.on('data', (d: Buffer) => {
      buf += d.toString();
      for (const line of buf.split('\n').slice(0, -1)) {
        if (line.startsWith('{')) resolve(JSON.parse(line));
        const m = /^published (\d+)/.exec(line);
        if (m) published = Number(m[1]);
      }
      buf = buf.slice(buf.lastIndexOf('\n') + 1);
    });
    child.on('exit', (code) => reject(new Error(`console-server exited ${code}`)));
  });
  try {
    const body = Buffer.from(JSON.stringify(await syntheticChat(640, 480, 'jpeg')));
    for (let i = 0; i < 5; i++) await chat(info.router, body); // warm-up
    const without: number[] = [];
    const withClient: number[] = [];
    const client = { stats: { batches: 0, events: 0, maxBatch: 0, dropped: 0 } };
    const startPublished = published;
    for (let round = 0; round < ROUNDS; round++) {
      without.push(...(await requestsFor(PHASE_MS, info.router, body)));
      const slow = slowClient(info.console, info.token);
      await slow.opened;
      withClient.push(...(await requestsFor(PHASE_MS, info.router, body)));
      slow.close();
      client.stats.batches += slow.stats.batches;
      client.stats.events += slow.stats.events;
      client.stats.maxBatch = Math.max(client.stats.maxBatch, slow.stats.maxBatch);
      client.stats.dropped += slow.stats.dropped;
    }
    const seconds = (ROUNDS * PHASE_MS * 2) / 1000;
    const ratio = percentile(withClient, 50) / percentile(without, 50);
    process.stdout.write(
      `console stream benchmark: ${RATE} events/s published by the router's own bus for ${seconds} s (${published - startPublished} events), ${ROUNDS} x ${PHASE_MS / 1000} s with a slow WebSocket client\n\n`,
    );
    process.stdout.write('| phase | requests | p50 ms | p99 ms |\n|---|---:|---:|---:|\n');
    process.stdout.write(`| no console client | ${without.length} | ${percentile(without, 50).toFixed(1)} | ${percentile(without, 99).toFixed(1)} |\n`);
    process.stdout.write(
      `| slow console client connected | ${withClient.length} | ${percentile(withClient, 50).toFixed(1)} | ${percentile(withClient, 99).toFixed(1)} |\n\n`,
    );
    process.stdout.write(
      `slow client: ${client.stats.batches} batches (${(client.stats.batches / ((ROUNDS * PHASE_MS) / 1000)).toFixed(1)}/s), ${client.stats.events} events received, largest batch ${client.stats.maxBatch} events, ${client.stats.dropped} reported dropped\n`,
    );
    const bounded = client.stats.maxBatch <= 5_000;
    process.stdout.write(
      `${bounded ? 'PASS' : 'MISS'}  batches bounded (largest ${client.stats.maxBatch} ≤ 5000 events) and drops reported (${client.stats.dropped})\n`,
    );
    process.stdout.write(`${ratio <= 1.1 ? 'PASS' : 'MISS'}  router p50 with the slow client ${ratio.toFixed(3)}× without (target ≤ 1.10×)\n`);
  } finally {
    agent.destroy();
  }
}

await runBench(main);
