// Console stream benchmark: 20,000 tensor events a second for 10 s through the real console
// binding (bench/console-server.ts) to a deliberately slow WebSocket client, while chat
// requests go through the router. It reports what the slow client got (batches, their sizes,
// the dropped count the stream tells it) and the router's request latency with the client
// connected against the same run without it (phases interleaved); target: ≤ 10 % slower.
// Then the request records (docs/console.md, "Requests"): text-only chat offered at 5,000
// requests/s to the router (its embedded worker), the records on and off in alternating phases
// of the same run (the internal RouterContext.recordRequests); it reports the throughput each
// way and the ratio; target: records cost ≤ 5 % of the throughput.
//
// Usage: npm run bench:console [-- --quick]
import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import path from 'node:path';
import WebSocket from 'ws';
import { syntheticChat } from '../core/console/test-image.ts';
import { root, runBench, track } from './procs.ts';

const quick = process.argv.includes('--quick');
const OFFERED = 5_000;
const RECORD_PHASE_MS = quick ? 2_000 : 4_000;
const RECORD_ROUNDS = quick ? 3 : 6; // phases each way, alternating
/** Requests in flight at most: beyond it the offered load is not sent (counted). */
const MAX_IN_FLIGHT = 256;
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

const recordsAgent = new http.Agent({ keepAlive: true, maxSockets: MAX_IN_FLIGHT });

/** One text-only chat request; whether it answered 200. */
function textChat(url: URL, body: Buffer): Promise<boolean> {
  return new Promise((resolve) => {
    const req = http.request(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: 'POST',
        agent: recordsAgent,
        headers: { 'content-type': 'application/json', 'content-length': body.byteLength },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode === 200));
      },
    );
    req.on('error', () => resolve(false));
    req.end(body);
  });
}

/** OFFERED requests a second for `ms` (open loop, at most MAX_IN_FLIGHT in flight), then wait for those in flight: how many answered 200, failed, and were not sent. */
async function offer(router: string, body: Buffer, ms: number): Promise<{ ok: number; failed: number; notSent: number; seconds: number }> {
  const url = new URL(`${router}/v1/chat/completions`);
  const counts = { ok: 0, failed: 0, notSent: 0 };
  let inFlight = 0;
  let sent = 0;
  const started = performance.now();
  const pending = new Set<Promise<void>>();
  await new Promise<void>((resolve) => {
    const tick = setInterval(() => {
      const elapsed = performance.now() - started;
      const due = Math.floor((Math.min(elapsed, ms) / 1000) * OFFERED);
      for (; sent < due; sent++) {
        if (inFlight >= MAX_IN_FLIGHT) {
          counts.notSent += 1;
          continue;
        }
        inFlight += 1;
        const p = textChat(url, body).then((ok) => {
          inFlight -= 1;
          if (ok) counts.ok += 1;
          else counts.failed += 1;
          pending.delete(p);
        });
        pending.add(p);
      }
      if (elapsed >= ms) {
        clearInterval(tick);
        resolve();
      }
    }, 5);
  });
  await Promise.all(pending);
  return { ...counts, seconds: (performance.now() - started) / 1000 };
}

/** Send `line` to the console server and wait for its answer (the same line). */
function command(child: ChildProcess, lines: string[], line: string): Promise<void> {
  const seen = lines.length;
  child.stdin!.write(`${line}\n`);
  return new Promise((resolve, reject) => {
    const end = performance.now() + 10_000;
    const poll = setInterval(() => {
      if (lines.slice(seen).includes(line)) {
        clearInterval(poll);
        resolve();
      } else if (performance.now() > end) {
        clearInterval(poll);
        reject(new Error(`console-server did not answer '${line}'`));
      }
    }, 5);
  });
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
      stdio: ['pipe', 'pipe', 'inherit'],
    }),
  );
  let published = 0;
  const answered: string[] = [];
  const info = await new Promise<{ console: string; token: string; router: string }>((resolve, reject) => {
    let buf = '';
    child.stdout!.on('data', (d: Buffer) => {
      buf += d.toString();
      for (const line of buf.split('\n').slice(0, -1)) {
        if (line.startsWith('{')) resolve(JSON.parse(line));
        const m = /^published (\d+)/.exec(line);
        if (m) published = Number(m[1]);
        else answered.push(line);
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

    // The request records: the same router, no synthetic events, text-only chat at OFFERED/s.
    await command(child, answered, 'events off');
    const text = Buffer.from(JSON.stringify({ max_tokens: 1, messages: [{ role: 'user', content: 'hi' }] }));
    await offer(info.router, text, 1_000); // warm-up (records on: the log fills)
    const totals = { on: { ok: 0, failed: 0, notSent: 0, seconds: 0 }, off: { ok: 0, failed: 0, notSent: 0, seconds: 0 } };
    for (let round = 0; round < RECORD_ROUNDS * 2; round++) {
      // off, on, on, off, off, on, …: each way as often first as second.
      const way = round % 4 === 0 || round % 4 === 3 ? 'off' : 'on';
      await command(child, answered, `records ${way}`);
      const r = await offer(info.router, text, RECORD_PHASE_MS);
      for (const k of ['ok', 'failed', 'notSent', 'seconds'] as const) totals[way][k] += r[k];
    }
    await command(child, answered, 'records on');
    const rate = (t: typeof totals.on) => t.ok / t.seconds;
    const recordsRatio = rate(totals.on) / rate(totals.off);
    process.stdout.write(
      `\nrequest records: text-only chat offered at ${OFFERED}/s (at most ${MAX_IN_FLIGHT} in flight), ${RECORD_ROUNDS} x ${RECORD_PHASE_MS / 1000} s each way, alternating\n\n`,
    );
    process.stdout.write('| records | answered 200 | per second | failed | not sent (in-flight cap) |\n|---|---:|---:|---:|---:|\n');
    for (const way of ['off', 'on'] as const) {
      const t = totals[way];
      process.stdout.write(`| ${way} | ${t.ok} | ${rate(t).toFixed(0)} | ${t.failed} | ${t.notSent} |\n`);
    }
    const cost = 1 - recordsRatio;
    process.stdout.write(
      `\n${cost <= 0.05 ? 'PASS' : 'MISS'}  router throughput with records ${recordsRatio.toFixed(3)}× without (cost ${(cost * 100).toFixed(1)} %, target ≤ 5 %)\n`,
    );
  } finally {
    agent.destroy();
    recordsAgent.destroy();
  }
}

await runBench(main);
