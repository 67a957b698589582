// What anything else on the host can do to what mmtc runs (issue 32): bytes to every port the
// router, the console and the reference workers open (the workers' bootstrap ports included),
// a worker whose replies are hundreds of MB, 200,000 files in /dev/shm named like another
// router's, a heartbeat file made under a dead router's name by another user, and 1,000 idle
// fetches at an encode worker's bootstrap server. Each scenario states the figure it must hold:
//
//   host/raw-http-every-port   0 process exits (router, console, every reference worker), 0
//                              errors caught by a process guard, `GET //[` and `GET http://[`
//                              a 400 on every HTTP port, an EPD request answered after
//   host/oversized-replies     router RSS within warm idle + concurrent calls × 2 × 16 MiB
//                              (WORKER_REPLY_MAX_BYTES: a reply is refused from its length
//                              prefix; at most one message of that size is joined, then decoded,
//                              per call) + 32 MiB, for Generate and Encode replies of 300 MB
//   host/shm-foreign-files     /health p99 < 100 ms while /dev/shm holds 200,000 foreign files,
//                              across two periodic sweep intervals (a minute; 5 s in the short
//                              mode, by MMTC_ORPHAN_SWEEP_SECS) and the console's Overview every 2 s
//   host/foreign-heartbeat     0 entries kept alive by a heartbeat of another owner
//   host/bootstrap-waiters     every EPD request 200 while 1,000 idle fetches fill the encode
//                              worker's bootstrap server
//
// Files are made only in a /dev/shm of the scenario's own (a tmpfs in a mount namespace, gone
// with it) and under names it removes; traffic goes to loopback only; every loop is bounded.
import { chownSync, closeSync, existsSync, openSync, readdirSync, unlinkSync, utimesSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { WORKER_REPLY_MAX_BYTES } from '../../core/engines/grpc.ts';
import { startBootstrapServer } from '../../core/refworker/bootstrap.ts';
import { rawRequest } from '../../core/test/raw-wire.ts';
import { CACHE_PREFIX } from '../../core/transport/shm-names.ts';
import { chatBody } from '../lib/chat.ts';
import { makeCorpus, type CorpusImage } from '../lib/images.ts';
import { startOversizedWorkerProcess } from '../lib/oversized-worker.ts';
import { consoleCall, get, metricSum, metrics, percentile, request } from '../lib/http.ts';
import { canNamespace, runMmtcSync, sleep, startRouter, startServe, type Proc } from '../lib/procs.ts';
import { shmNamespace } from '../lib/shm.ts';
import { fmt, bytesText, MiB, type Suite, type T } from '../lib/suite.ts';
import { tempDir } from '../lib/tmp.ts';
import { rawHttpCase } from '../fuzz/wire-inputs.ts';
import { roleWorker, type RoleWorker } from './epd.ts';
import { configFile } from './faults-worker.ts';
import { healthKeptFast, healthProber } from './fuzz-wire.ts';

/** The request lines of issue 32 that stopped a worker's bootstrap server. */
const ISSUE_32_LINES = ['GET //[ HTTP/1.1', 'GET http://[ HTTP/1.1'];
/** A pid no process can have (above pid_max): a dead router's. */
const DEAD_PID = 4_194_304 + 4321;

export async function hostGroup(suite: Suite): Promise<void> {
  const names = ['raw-http-every-port', 'oversized-replies', 'shm-foreign-files', 'foreign-heartbeat', 'bootstrap-waiters'];
  const n = (short: number, full: number) => (suite.short ? short : full);
  const needsRoot = canNamespace() ? {} : { skip: 'needs root (unshare --mount) for a /dev/shm of its own' };
  await suite.group('host', names, async () => {
    await suite.run('host/raw-http-every-port', (t) => rawHttpEveryPort(t, n(500, 5000), n(45, 240)), { seeded: true, maxSeconds: n(45, 240) + 90 });
    await suite.run('host/oversized-replies', (t) => oversizedReplies(t, 2, n(2, 8)), { maxSeconds: n(90, 240) });
    await suite.run('host/shm-foreign-files', (t) => shmForeignFiles(t, 200_000, 2, n(5, 60)), { maxSeconds: n(90, 240), ...needsRoot });
    await suite.run('host/foreign-heartbeat', (t) => foreignHeartbeat(t), { maxSeconds: 60, ...needsRoot });
    await suite.run('host/bootstrap-waiters', (t) => bootstrapWaiters(t, n(6, 30)), { maxSeconds: n(90, 240) });
  });
}

/** A worker's output holds a line of its process guard: an error nothing else caught. */
const guardLine = (p: Proc) => /\{"time":[^\n]*"event":"(?:uncaught_exception|unhandled_rejection)"[^\n]*/.exec(p.output())?.[0];

type WorkerEntry = Pick<RoleWorker, 'url' | 'bootstrapPort'>;

function epdYaml(encode: WorkerEntry, prefill: WorkerEntry, decode: WorkerEntry, extra = ''): string {
  const entry = (w: WorkerEntry, type: string) =>
    `  - url: ${w.url}\n    worker_type: ${type}\n${w.bootstrapPort ? `    bootstrap_port: ${w.bootstrapPort}\n` : ''}`;
  return `disaggregation: epd\nrequest_timeout_secs: 60\nhealth_check_interval_secs: 1\n${extra}workers:\n${entry(encode, 'encode')}${entry(prefill, 'prefill')}${entry(decode, 'decode')}`;
}

/** The decode worker's sentence names this encode worker for item 0. */
const epdAnswered = (content: string | undefined, encode: RoleWorker) =>
  new RegExp(`item 0 from encode worker ${encode.url.replace(/[.]/g, '\\.')}, room \\d+: encoder_input`).test(content ?? '');

async function rawHttpEveryPort(t: T, cases: number, seconds: number): Promise<void> {
  const [thumb] = await makeCorpus(['thumb.png']);
  const cwd = tempDir('cwd');
  const [encode, prefill, decode, vllmPrefill, vllmDecode] = await Promise.all([
    roleWorker('encode'),
    roleWorker('prefill'),
    roleWorker('decode'),
    roleWorker('prefill', [], [], 'vllm'),
    roleWorker('decode', [], [], 'vllm'),
  ]);
  const dir = tempDir('host-raw');
  const file = path.join(dir, 'router.yaml');
  writeFileSync(file, epdYaml(encode, prefill, decode));
  const serve = await startServe(['--config', file], { cwd, env: { XDG_CONFIG_HOME: dir }, name: 'serve (epd, raw http)' });
  const workers: Array<[string, RoleWorker]> = [
    ['tokenspeed encode', encode],
    ['tokenspeed prefill', prefill],
    ['tokenspeed decode', decode],
    ['vllm prefill', vllmPrefill],
    ['vllm decode', vllmDecode],
  ];
  const ports: Array<{ label: string; base: string; http: boolean; token?: string }> = [
    { label: 'router', base: serve.routerUrl, http: true },
    { label: 'console', base: serve.consoleUrl, http: true, token: serve.token },
    ...workers.flatMap(([label, w]) => [
      { label: `${label} gRPC`, base: w.url.replace('grpc://', 'http://'), http: false },
      ...(w.bootstrapPort ? [{ label: `${label} bootstrap`, base: `http://127.0.0.1:${w.bootstrapPort}`, http: true }] : []),
    ]),
  ];
  const probe = healthProber(serve.routerUrl);
  const tally: Record<string, number> = {};
  const bad: string[] = [];
  const deadline = performance.now() + seconds * 1000;
  let tried = 0;
  let stats: { ms: number[]; unanswered: number };
  try {
    // The issue's lines first, to every port: a 400 from every HTTP server (a gRPC port closes).
    for (const p of ports) {
      for (const line of ISSUE_32_LINES) {
        const r = await rawRequest(p.base, `${line}\r\nHost: {host}\r\n\r\n`, 5000);
        tried += 1;
        const outcome = r.status ? String(r.status) : r.closed ? 'closed' : 'no answer';
        tally[`${p.label} issue 32 → ${outcome}`] = (tally[`${p.label} issue 32 → ${outcome}`] ?? 0) + 1;
        if (p.http && r.status !== 400) bad.push(`${p.label}: ${line} → ${outcome}, not 400`);
        if (!p.http && !r.closed && r.status === 0) bad.push(`${p.label}: ${line} left the connection open without an answer`);
      }
    }
    for (let i = 0; i < cases && performance.now() < deadline; i++) {
      const p = ports[i % ports.length]!;
      const c = rawHttpCase(t.rng.fork(i), ports.length * 100 + i, new URL(p.base).host, p.token);
      const r = await rawRequest(p.base, c.bytes, c.bodyWithheld ? 1500 : 5000);
      tried += 1;
      const outcome = r.status ? String(r.status) : r.closed ? 'closed' : 'no answer';
      tally[`${p.label} → ${outcome}`] = (tally[`${p.label} → ${outcome}`] ?? 0) + 1;
      const where = `case ${i} (${p.label}, ${c.label}): ${JSON.stringify(c.bytes.toString('utf8').slice(0, 120))}`;
      if (r.status >= 500 && r.status !== 505 && !(p.label.endsWith('bootstrap') && r.status === 503))
        bad.push(`${where}: ${r.status} ${r.body.slice(0, 160)}`);
      else if (r.status === 0 && !r.closed && !c.bodyWithheld) bad.push(`${where}: no answer within 5 s and the connection left open`);
    }
  } finally {
    stats = await probe.stop();
  }
  // Still serving: an EPD request through every leg.
  const after = await request(serve.routerUrl, chatBody([thumb!]), { timeoutMs: 60_000 });
  const m = await metrics(serve.routerUrl);
  const uncaught = metricSum(m, 'mmtc_uncaught_errors_total');
  const exits = [['serve', serve.proc] as const, ...workers.map(([label, w]) => [label, w.proc] as const)]
    .filter(([, p]) => !p.alive())
    .map(([label]) => label);
  const guarded = workers.map(([label, w]) => [label, guardLine(w.proc)] as const).filter(([, line]) => line);
  for (const b of bad.slice(0, 10)) t.check(false, b);
  t.check(exits.length === 0, `processes exited: ${exits.join(', ')}`);
  t.check(uncaught === 0, `serve's process guard caught ${uncaught} errors`);
  t.check(guarded.length === 0, `a worker's process guard caught an error: ${guarded.map(([l, x]) => `${l}: ${x!.slice(0, 300)}`).join('; ')}`);
  t.check(
    after.status === 200 && epdAnswered(after.content, encode),
    `an EPD request after the fuzz: ${after.status} ${(after.content ?? after.body).slice(0, 200)}`,
  );
  t.check(stats.unanswered === 0, `/health went unanswered ${stats.unanswered} times`);
  const health = healthKeptFast(stats.ms);
  t.check(health.ok, health.says);
  t.note(
    'ports',
    ports.map((p) => p.label),
  );
  t.note('tried', tried);
  t.note('by_port_and_outcome', tally);
  t.note('process_exits', exits.length);
  t.note('guard_caught', uncaught + guarded.length);
  t.note('health_p99_ms', Math.round(percentile(stats.ms, 99) * 10) / 10);
  t.summary(
    `${tried} raw requests over ${ports.length} ports (router, console, 5 reference workers' gRPC and 3 bootstrap ports; the issue's \`GET //[\` and \`GET http://[\` to each first: 400 on every HTTP port); process exits ${exits.length}, guard catches ${uncaught + guarded.length}; /health p99 ${fmt(percentile(stats.ms, 99))} ms over ${stats.ms.length} polls; EPD request after: ${after.status}; ${bad.length} wrong answers`,
  );
  await serve.proc.stop();
}

/** RSS of `p` sampled every 50 ms while `work` runs: its peak. */
async function rssPeakDuring<X>(p: Proc, work: Promise<X>): Promise<{ result: X; peak: number }> {
  let peak = p.rss() ?? 0;
  let on = true;
  const sampler = (async () => {
    for (let i = 0; on && i < 20 * 600; i++) {
      peak = Math.max(peak, p.rss() ?? 0);
      await sleep(50);
    }
  })();
  const result = await work;
  on = false;
  await sampler;
  return { result, peak: Math.max(peak, p.rss() ?? 0) };
}

async function oversizedReplies(t: T, concurrency: number, rounds: number): Promise<void> {
  const [thumb] = await makeCorpus(['thumb.png']);
  const body = chatBody([thumb!]);
  const padBytes = 300 * 1000 * 1000;
  // In a process of its own: sending 300 MB replies holds its event loop for seconds.
  const big = await startOversizedWorkerProcess(padBytes);
  const rows: string[] = [];
  const figures: Record<string, unknown> = {};
  try {
    // A regular worker whose Generate replies are 300 MB; then an encode worker whose Encode replies are (real prefill and decode workers).
    const regular = await startRouter(['--config', configFile(`request_timeout_secs: 60\nhealth_check_interval_secs: 1\nworkers:\n  - url: ${big.url}\n`)], {
      name: 'router (oversized Generate)',
    });
    await check(
      t,
      'Generate',
      regular.proc,
      regular.url,
      new RegExp(
        `^worker ${big.url} failed: RESOURCE_EXHAUSTED: its reply message of \\d+ bytes is above the ${WORKER_REPLY_MAX_BYTES} bytes the router takes from a worker$`,
      ),
    );
    await regular.proc.stop();
    const fakeBootstrap = await startBootstrapServer('127.0.0.1', 0); // where its prefill worker waits, in vain
    try {
      const prefill = await roleWorker('prefill', ['--embedding-timeout-ms', '30000']);
      const decode = await roleWorker('decode', ['--kv-timeout-ms', '30000']);
      const epd = await startRouter(['--config', configFile(epdYaml({ url: big.url, bootstrapPort: fakeBootstrap.port }, prefill, decode))], {
        name: 'router (oversized Encode)',
      });
      await check(
        t,
        'Encode',
        epd.proc,
        epd.url,
        new RegExp(
          `^encode worker ${big.url} \\(image 0\\) failed: RESOURCE_EXHAUSTED: its reply message of \\d+ bytes is above the ${WORKER_REPLY_MAX_BYTES} bytes the router takes from a worker$`,
        ),
      );
      await epd.proc.stop();
      await prefill.proc.stop();
      await decode.proc.stop();
    } finally {
      await fakeBootstrap.close();
    }
  } finally {
    await big.proc.stop();
  }
  t.note('pad_bytes', padBytes);
  t.note('limit_bytes', WORKER_REPLY_MAX_BYTES);
  t.note('figures', figures);
  t.summary(`replies of ${fmt(padBytes / 1e6, 0)} MB, ${concurrency} at a time, ${rounds} rounds: ${rows.join('; ')}`);

  async function check(t: T, call: string, proc: Proc, url: string, words: RegExp): Promise<void> {
    // Warm: one refused reply, then idle.
    await request(url, body, { timeoutMs: 60_000 });
    await sleep(2000);
    const idle = proc.rss() ?? 0;
    const statuses: Record<string, number> = {};
    const wrong: string[] = [];
    const { peak } = await rssPeakDuring(
      proc,
      (async () => {
        for (let r = 0; r < rounds; r++) {
          const replies = await Promise.all(Array.from({ length: concurrency }, () => request(url, body, { timeoutMs: 60_000 })));
          for (const x of replies) {
            statuses[String(x.status || x.neterr)] = (statuses[String(x.status || x.neterr)] ?? 0) + 1;
            if (x.status !== 502 || !words.test(x.json?.error?.message ?? '')) wrong.push(`${x.status}: ${(x.json?.error?.message ?? x.body).slice(0, 200)}`);
          }
        }
      })(),
    );
    await sleep(3000);
    const end = proc.rss() ?? 0;
    const bound = idle + concurrency * 2 * WORKER_REPLY_MAX_BYTES + 32 * MiB;
    t.check(wrong.length === 0, `${call}: ${wrong.length} answers not a 502 naming the reply's size and the limit: ${wrong.slice(0, 2).join(' | ')}`);
    t.check(
      peak <= bound,
      `${call}: router RSS peaked at ${bytesText(peak)}, above warm idle ${bytesText(idle)} + ${concurrency} × 2 × ${bytesText(WORKER_REPLY_MAX_BYTES)} + 32 MiB = ${bytesText(bound)}`,
    );
    t.check(proc.alive(), `${call}: the router exited`);
    figures[call] = {
      statuses,
      rss_idle_mib: Math.round(idle / MiB),
      rss_peak_mib: Math.round(peak / MiB),
      rss_end_mib: Math.round(end / MiB),
      bound_mib: Math.round(bound / MiB),
    };
    rows.push(
      `${call}: ${Object.entries(statuses)
        .map(([s, k]) => `${k}× ${s}`)
        .join(', ')}, router RSS ${bytesText(idle)} → peak ${bytesText(peak)} → ${bytesText(end)} 3 s later (bound ${bytesText(bound)})`,
    );
  }
}

/** `n` empty files named like another router's tensor files (stamped now or a day ahead), made fast through one directory path. */
function plantForeign(dir: string, n: number): number {
  const now = BigInt(Date.now()) * 1_000_000n;
  const ahead = now + 86_400_000n * 1_000_000n;
  let made = 0;
  for (let i = 0; i < n; i++) {
    closeSync(openSync(path.join(dir, `smg-tokenspeed-${DEAD_PID + 1 + (i % 1000)}-${i % 2 ? ahead : now}-${i + 1}`), 'wx', 0o600));
    made += 1;
  }
  return made;
}

async function shmForeignFiles(t: T, files: number, sweeps: number, sweepSecs: number): Promise<void> {
  const ns = await shmNamespace({ sizeBytes: 64 * MiB, name: 'foreign files' });
  try {
    const t0 = performance.now();
    const made = plantForeign(ns.dir, files);
    const plantS = (performance.now() - t0) / 1000;
    const dir = tempDir('host-shm');
    const spawnedAt = performance.now();
    const serve = await startServe([], {
      prefix: ns.prefix,
      env: { XDG_CONFIG_HOME: dir, MMTC_ORPHAN_SWEEP_SECS: String(sweepSecs) },
      name: 'serve (200,000 foreign files)',
    });
    const listeningS = (performance.now() - spawnedAt) / 1000;
    const probe = healthProber(serve.routerUrl);
    const overviewMs: number[] = [];
    const counts: number[] = [];
    let polling = true;
    const poller = (async () => {
      for (let i = 0; polling && i < 400; i++) {
        const r = await consoleCall(serve.consoleUrl, serve.token, 'overview', {});
        overviewMs.push(r.ms);
        // Another router's files: counted apart from this router's own (Overview's "Not ours").
        if (r.status === 200) counts.push(r.json.files.otherFiles);
        await sleep(2000);
      }
    })();
    // One genuine orphan (a dead pid's, two hours old): the first periodic sweep's line says it ran.
    const old = Date.now() - 2 * 3600_000;
    const orphan = path.join(ns.dir, `smg-tokenspeed-${DEAD_PID}-${BigInt(old) * 1_000_000n}-1`);
    writeFileSync(orphan, 'orphan', { flag: 'wx' });
    utimesSync(orphan, new Date(old), new Date(old));
    const lines: string[] = [];
    for (let s = 0; s < sweeps; s++) {
      // The sweep runs sweepSecs after the start, then every sweepSecs; the orphan goes at the first.
      if (s === 0) {
        // No such line within sweepSecs + 20 s is recorded as NO SWEEP LINE, which the check below fails.
        const m = await serve.proc.waitFor(/orphan sweep: removed 1 orphaned tensor file [^\n]*/, (sweepSecs + 20) * 1000).catch(() => undefined);
        lines.push(m?.[0] ?? 'NO SWEEP LINE');
      } else {
        await sleep((sweepSecs + 2) * 1000);
        lines.push('a silent sweep');
      }
    }
    await sleep(3000);
    polling = false;
    await poller;
    const stats = await probe.stop();
    const m = await metrics(serve.routerUrl);
    const uncaught = metricSum(m, 'mmtc_uncaught_errors_total');
    const p99 = percentile(stats.ms, 99);
    t.check(made === files, `planted ${made} of ${files} files`);
    t.check(
      lines[0] !== 'NO SWEEP LINE' && !existsSync(orphan),
      `the sweep every ${sweepSecs} s must run (and remove the planted orphan) while /health is probed`,
    );
    const health = healthKeptFast(stats.ms);
    t.check(health.ok, `${health.says} while /dev/shm holds ${files} foreign files`);
    t.check(stats.unanswered === 0, `/health went unanswered ${stats.unanswered} times`);
    t.check(counts.length > 0 && counts.every((c) => c >= files), `the Overview must answer and count the files as another router's: ${counts.slice(0, 5)}`);
    t.check(serve.proc.alive() && uncaught === 0, `serve alive ${serve.proc.alive()}, guard count ${uncaught}`);
    t.note('files', made);
    t.note('plant_s', fmt(plantS, 1));
    t.note('listening_after_s', fmt(listeningS, 1));
    t.note('sweep_lines', lines);
    t.note('health_polls', stats.ms.length);
    t.note('health_p50_ms', Math.round(percentile(stats.ms, 50) * 10) / 10);
    t.note('health_p99_ms', Math.round(p99 * 10) / 10);
    t.note('health_max_ms', Math.round(Math.max(0, ...stats.ms) * 10) / 10);
    t.note('overview_ms', { n: overviewMs.length, p50: Math.round(percentile(overviewMs, 50)), max: Math.round(Math.max(0, ...overviewMs)) });
    t.summary(
      `${made} empty files named like another router's (stamped now or a day ahead; planted in ${fmt(plantS, 1)} s in a /dev/shm of its own); serve listening ${fmt(listeningS, 1)} s after spawn (the start-up sweep, all at once); ${sweeps} periodic sweep intervals of ${sweepSecs} s (the first sweep removed the one planted orphan); /health p50 ${fmt(percentile(stats.ms, 50))} / p99 ${fmt(p99)} / max ${fmt(Math.max(0, ...stats.ms))} ms over ${stats.ms.length} polls, 0 unanswered; Overview every 2 s: ${overviewMs.length} answers, p50 ${fmt(percentile(overviewMs, 50), 0)} ms, max ${fmt(Math.max(0, ...overviewMs), 0)} ms`,
    );
    await serve.proc.stop();
  } finally {
    // The tmpfs goes with its namespace, and every file in it with it.
    await ns.stop();
  }
}

async function foreignHeartbeat(t: T): Promise<void> {
  const ns = await shmNamespace({ sizeBytes: 64 * MiB, name: 'foreign heartbeat' });
  try {
    const now = Date.now();
    const name = (pid: number, seq: number, ms: number) => `${CACHE_PREFIX}7-${pid}-${BigInt(ms) * 1_000_000n}-${seq}`;
    const put = (file: string, bytes: number, mtimeMs: number, uid = 0) => {
      writeFileSync(path.join(ns.dir, file), Buffer.alloc(bytes), { flag: 'wx', mode: 0o400 });
      if (uid !== 0) chownSync(path.join(ns.dir, file), uid, uid);
      utimesSync(path.join(ns.dir, file), new Date(mtimeMs), new Date(mtimeMs));
    };
    const tenMinAgo = now - 600_000;
    // Pid namespace 7's router DEAD_PID is gone (its heartbeat stopped an hour ago); another user made a heartbeat under its name and touches it.
    const dead = Array.from({ length: 8 }, (_, i) => name(DEAD_PID, i + 1, tenMinAgo));
    for (const f of dead) put(f, 64 * 1024, tenMinAgo);
    put(name(DEAD_PID, 0, now - 3 * 3600_000), 0, now - 3600_000);
    const forged = name(DEAD_PID, 0, now - 120_000);
    put(forged, 0, now - 10_000, 65534);
    // Pid namespace 7's router DEAD_PID + 1 lives: its own heartbeat, touched 10 s ago, keeps its entries.
    const alive = Array.from({ length: 4 }, (_, i) => name(DEAD_PID + 1, i + 1, tenMinAgo));
    for (const f of alive) put(f, 64 * 1024, tenMinAgo);
    const aliveBeat = name(DEAD_PID + 1, 0, now - 3600_000);
    put(aliveBeat, 0, now - 10_000);
    const doctorBefore = runMmtcSync(['doctor', '--json'], { prefix: ns.prefix });
    const router = await startRouter(['--multimodal-pixel-cache-mb', '0'], { prefix: ns.prefix, name: 'router (foreign heartbeat)' });
    const sweepLine = /\/dev\/shm orphan sweep: .*/.exec(router.proc.output())?.[0] ?? '';
    const left = new Set(readdirSync(ns.dir));
    const keptByForeign = dead.filter((f) => left.has(f)).length;
    const keptAlive = alive.filter((f) => left.has(f)).length;
    await router.proc.stop();
    let rows: Array<{ pid: number; pidNamespace: string | null; process: string; heartbeatAgeMs: number | null; cacheFiles: number }> = [];
    try {
      rows = JSON.parse(doctorBefore.stdout).router.tensor_files;
    } catch {
      /* checked below */
    }
    const deadRow = rows.find((r) => r.pid === DEAD_PID);
    const aliveRow = rows.find((r) => r.pid === DEAD_PID + 1);
    t.check(keptByForeign === 0, `${keptByForeign} of ${dead.length} entries kept alive by a heartbeat of another owner`);
    t.check(keptAlive === alive.length && left.has(aliveBeat), `a live router's entries (its own heartbeat) must stay: ${keptAlive} of ${alive.length}`);
    t.check(left.has(forged), "the other user's file is theirs: it must be left in place");
    t.check(
      sweepLine.includes(`of pid ${DEAD_PID} of pid namespace 7 (no heartbeat of its router for 5 minutes: 8)`) &&
        sweepLine.includes('removed 1 pixel-cache heartbeat'),
      `the start-up sweep's line: ${sweepLine}`,
    );
    t.check(
      deadRow?.process === 'other-namespace' &&
        deadRow.cacheFiles === 8 &&
        aliveRow?.process === 'other-namespace' &&
        aliveRow.cacheFiles === 4 &&
        (aliveRow.heartbeatAgeMs ?? Infinity) < 60_000,
      `doctor's rows before the sweep: ${JSON.stringify([deadRow, aliveRow])}`,
    );
    for (const f of [...alive, aliveBeat, forged]) if (left.has(f)) unlinkSync(path.join(ns.dir, f));
    t.note('kept_by_foreign_heartbeat', keptByForeign);
    t.note('kept_by_own_heartbeat', keptAlive);
    t.note('sweep_line', sweepLine);
    t.summary(
      `8 entries of a dead router of pid namespace 7 with a heartbeat another user (nobody) made and touches: ${dead.length - keptByForeign} removed at the next router's start, ${keptByForeign} kept; 4 entries of a live one (its own heartbeat): ${keptAlive} kept; the forged heartbeat left in place; "${sweepLine.replace(/^\/dev\/shm orphan sweep: /, '')}"`,
    );
  } finally {
    await ns.stop();
  }
}

async function bootstrapWaiters(t: T, requests: number): Promise<void> {
  const corpus: CorpusImage[] = await makeCorpus(['thumb.png', 'rgb.png']);
  // Held before it reads each image: the prefill worker's fetch comes first and must wait for the embedding.
  const encode = await roleWorker('encode', ['--delay-ms', '300']);
  const prefill = await roleWorker('prefill', ['--embedding-timeout-ms', '20000']);
  const decode = await roleWorker('decode', ['--kv-timeout-ms', '20000']);
  const router = await startRouter(['--config', configFile(epdYaml(encode, prefill, decode))], { name: 'router (epd, idle fetches)' });
  const idle: http.ClientRequest[] = [];
  const idleAnswers: Record<string, number> = {};
  try {
    for (let i = 0; i < 1000; i++) {
      const q = http.get({ host: '127.0.0.1', port: encode.bootstrapPort, path: `/embedding/${7_000_000 + i}?wait_ms=60000`, agent: false }, (res) => {
        res.resume();
        idleAnswers[String(res.statusCode)] = (idleAnswers[String(res.statusCode)] ?? 0) + 1;
      });
      q.on('error', (e: NodeJS.ErrnoException) => (idleAnswers[e.code ?? 'error'] = (idleAnswers[e.code ?? 'error'] ?? 0) + 1));
      idle.push(q);
    }
    for (let i = 0; i < 200 && !idle.every((q) => q.writableFinished); i++) await sleep(50);
    await sleep(500);
    const statuses: Record<string, number> = {};
    const wrong: string[] = [];
    const ms: number[] = [];
    for (let i = 0; i < requests; i += 2) {
      const replies = await Promise.all([0, 1].map((k) => request(router.url, chatBody([corpus[(i + k) % corpus.length]!]), { timeoutMs: 60_000 })));
      for (const r of replies) {
        statuses[String(r.status || r.neterr)] = (statuses[String(r.status || r.neterr)] ?? 0) + 1;
        ms.push(r.ms);
        if (r.status !== 200 || !epdAnswered(r.content, encode)) wrong.push(`${r.status}: ${(r.json?.error?.message ?? r.content ?? r.body).slice(0, 200)}`);
      }
    }
    const health = await get(router.url, '/health', { timeoutMs: 5000 });
    t.check(
      wrong.length === 0,
      `${wrong.length} of ${Object.values(statuses).reduce((a, b) => a + b, 0)} requests failed while 1,000 idle fetches waited: ${wrong.slice(0, 2).join(' | ')}`,
    );
    t.check(encode.proc.alive() && prefill.proc.alive() && health.status === 200, 'the workers and the router must be up');
    t.note('statuses', statuses);
    t.note('idle_fetch_answers', idleAnswers);
    t.note('p50_ms', Math.round(percentile(ms, 50)));
    t.summary(
      `1,000 idle fetches (wait_ms 60000) at the encode worker's bootstrap server, then ${Object.values(statuses).reduce((a, b) => a + b, 0)} EPD requests whose prefill had to wait (encode --delay-ms 300): ${Object.entries(
        statuses,
      )
        .map(([s, k]) => `${k}× ${s}`)
        .join(', ')}, p50 ${fmt(percentile(ms, 50), 0)} ms; the idle fetches answered meanwhile: ${JSON.stringify(idleAnswers)}`,
    );
  } finally {
    for (const q of idle) q.destroy();
    await router.proc.stop();
  }
}
