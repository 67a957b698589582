// The pixel cache (core/transport/pixel-cache.ts: a repeated image's encoder input kept as a
// read-only file in /dev/shm, handed on by hard link over SHM, read into pooled memory inline)
// over real processes:
//   cache/load-32        32 clients under load, repeated and new images, and a live change of
//                        the TokenSpeed workers' encoder dtype (float32 -> bfloat16 through the
//                        console's config.apply): every tensor must be a fresh preprocessing of
//                        its image in the dtype of the revision the request used, never a stale
//                        entry; hits and misses counted; no file left.
//   cache/tamper         a worker that writes into the file it is given (mmtc worker
//                        --tamper-shm): a hit handed to it, then a miss whose request file became
//                        the entry; the next request, served by a worker that does not tamper,
//                        must get the right bytes (the guard saw the mtime move and dropped the
//                        entry). Three probes beyond the guard's promise (a link held by an
//                        honest worker meanwhile, a write with its mtime put back, a write
//                        through a shared mapping) are recorded, not failed (docs/reliability.md,
//                        "Findings not fixed here").
//   cache/crash-restart  a router SIGKILLed with entries in /dev/shm: they stay; the next
//                        router's start-up sweep removes them (and a planted reused-pid entry)
//                        by the time it listens, keeps what it must; no file left. A probe
//                        (recorded): a router killed in a pid namespace of its own and started
//                        in a new one (a container restart).
import { execFileSync } from 'node:child_process';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
  openSync,
  readSync,
  writeSync,
  closeSync,
  constants,
} from 'node:fs';
import path from 'node:path';
import WebSocket from 'ws';
import { CACHE_NAME, ourPidNamespace } from '../../core/transport/shm-names.ts';
import { chatBody, replyId, requestLines } from '../lib/chat.ts';
import {
  compareTensors,
  describeImage,
  expectedTensors,
  makeCorpus,
  makeImage,
  parseWorkerReport,
  photoBytes,
  type CorpusImage,
  type ImageSpec,
  type ReportedTensor,
} from '../lib/images.ts';
import { consoleCall, get, metricsIfAnswered, metricSum, percentile, request, type Reply } from '../lib/http.ts';
import { canNamespace, sleep, spawnProc, startRouter, startServe, startWorker, until, type Serve, type Worker } from '../lib/procs.ts';
import { shmNamespace, TENSOR_FILE } from '../lib/shm.ts';
import { fmt, bytesText, MiB, type Suite, type T } from '../lib/suite.ts';
import { tempDir } from '../lib/tmp.ts';
import { configFile } from './faults-worker.ts';
import { startThreeWorkers } from './load.ts';

type Dtype = 'float32' | 'bfloat16';

/** Every entry of ours in a /dev/shm: tensor files, probes, cache files (in the run's own tmpfs, or a namespace's, all are ours). */
function shmEntries(dir = '/dev/shm'): string[] {
  return readdirSync(dir)
    .filter((n) => n.startsWith('smg-tokenspeed-'))
    .sort();
}

interface CacheFile {
  name: string;
  pid: number;
  ino: number;
  size: number;
  mtimeNs: bigint;
}

/** The pixel cache's entries in `dir`, of `pid` when given. */
function cacheFiles(dir = '/dev/shm', pid?: number): CacheFile[] {
  const out: CacheFile[] = [];
  for (const name of readdirSync(dir)) {
    const m = CACHE_NAME.exec(name);
    // Not the cache's heartbeat (seq 0): no entry, a live router's sign of life.
    if (!m || m[4] === '0' || (pid !== undefined && Number(m[2]) !== pid)) continue;
    try {
      const s = lstatSync(path.join(dir, name), { bigint: true });
      out.push({ name, pid: Number(m[2]), ino: Number(s.ino), size: Number(s.size), mtimeNs: s.mtimeNs });
    } catch {
      /* dropped meanwhile */
    }
  }
  return out;
}

/** The cache's counters from /metrics (smg_mm_pixel_cache_*), when the router exports them; undefined otherwise. */
async function cacheMetrics(base: string): Promise<Record<'hits' | 'misses' | 'evictions' | 'tampered' | 'entries' | 'bytes', number> | undefined> {
  const m = await metricsIfAnswered(base);
  if (!m || ![...m.keys()].some((k) => k.startsWith('smg_mm_pixel_cache_hits_total'))) return undefined;
  const v = (name: string) => metricSum(m, name);
  return {
    hits: v('smg_mm_pixel_cache_hits_total'),
    misses: v('smg_mm_pixel_cache_misses_total'),
    evictions: v('smg_mm_pixel_cache_evictions_total'),
    tampered: v('smg_mm_pixel_cache_tampered_total'),
    entries: v('smg_mm_pixel_cache_entries'),
    bytes: v('smg_mm_pixel_cache_bytes'),
  };
}

interface Checked {
  ok: boolean;
  /** A tensor whose bytes are not the image's fresh preprocessing in the dtype it came in: a wrong tensor. */
  wrong: string[];
  runtime?: 'tokenspeed' | 'vllm';
  dtype?: string;
  tensors: ReportedTensor[];
  other: string[];
}

/** The worker's report against a fresh preprocessing of the images, in the encoder dtype it says it received. */
function checkReply(reply: Reply, images: readonly CorpusImage[], stream = false): Checked {
  if (reply.status !== 200) return { ok: false, wrong: [], tensors: [], other: [`HTTP ${reply.status || reply.neterr}: ${reply.body.slice(0, 300)}`] };
  const other: string[] = [];
  if (stream && (!reply.done || reply.streamError)) other.push(`stream ${reply.streamError ? `error: ${reply.streamError}` : 'did not end with [DONE]'}`);
  const report = reply.content === undefined ? undefined : parseWorkerReport(reply.content);
  if (!report) return { ok: false, wrong: [], tensors: [], other: [...other, `no worker report: ${String(reply.content).slice(0, 200)}`] };
  const runtime = report.tensors.some((t) => t.name === 'pixel_values') ? 'vllm' : 'tokenspeed';
  const dtype = report.tensors.find((t) => t.name.startsWith('encoder_input') || t.name === 'pixel_values')?.dtype;
  if (report.images !== images.length) other.push(`the worker saw ${report.images} images, ${images.length} were sent`);
  const wrong =
    dtype === 'float32' || dtype === 'bfloat16' ? compareTensors(expectedTensors(runtime, images, dtype), report.tensors) : [`encoder input dtype ${dtype}`];
  return { ok: wrong.length === 0 && other.length === 0, wrong, runtime, ...(dtype ? { dtype } : {}), tensors: report.tensors, other };
}

interface TapEvent {
  requestId: string;
  tensor: string;
  cache?: 'hit' | 'miss';
  path: string;
  dtype: string;
  revision: number;
  runtime: string;
}

/** The console's traffic stream, read as fast as it comes: every tensor event, with the pixel cache's answer. */
async function trafficTap(serve: Serve): Promise<{ events: TapEvent[]; dropped(): number; close(): void }> {
  const events: TapEvent[] = [];
  let dropped = 0;
  const ws = new WebSocket(`${serve.consoleUrl.replace(/^http/, 'ws')}/api/events`, ['mmtc.v1', `mmtc.token.${serve.token}`]);
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  ws.on('message', (data) => {
    const msg = JSON.parse(String(data));
    if (msg.stream !== 'traffic') return;
    dropped = msg.payload.dropped;
    for (const e of msg.payload.events)
      if (events.length < 200_000)
        events.push({
          requestId: e.requestId,
          tensor: e.tensor,
          ...(e.cache ? { cache: e.cache } : {}),
          path: e.path,
          dtype: e.dtype,
          revision: e.revision,
          runtime: e.runtime,
        });
  });
  ws.send(JSON.stringify({ op: 'subscribe', stream: 'traffic' }));
  await sleep(300);
  return { events, dropped: () => dropped, close: () => ws.close() };
}

/** An apply through the console contract (as the operator's console does it): the new revision. */
async function apply(serve: Serve, draft: unknown, expectedRevision: number): Promise<number> {
  const r = await consoleCall(serve.consoleUrl, serve.token, 'config.apply', { draft, expectedRevision });
  if (r.status !== 200) throw new Error(`config.apply refused: ${r.status} ${r.body.slice(0, 300)}`);
  return r.json.revision as number;
}

export async function cacheGroup(suite: Suite): Promise<void> {
  await suite.group('cache', ['load-32', 'tamper', 'crash-restart'], async () => {
    await suite.run('cache/load-32', (t) => load32(t), { seeded: true, maxSeconds: 300 });
    await suite.run('cache/tamper', (t) => tamper(t), { maxSeconds: 240 });
    await suite.run('cache/crash-restart', (t) => crashRestart(t), { maxSeconds: 240, ...(canNamespace() ? {} : { skip: 'needs root (unshare --mount)' }) });
  });
}

// ---------------------------------------------------------------------------------------------
// cache/load-32

const NEW_FORMATS = ['png', 'jpeg', 'webp'] as const;
/** A quarter of the default budget: the set of eight alone is 93 MiB in float32 and 46 in bfloat16, so entries are evicted (some while requests hold them) under the load too. */
const LOAD_BUDGET_MB = 128;

async function load32(t: T): Promise<void> {
  const seconds = t.short ? 8 : 60;
  const clients = 32;
  const set = await makeCorpus();
  const w = await startThreeWorkers();
  const tokenSpeed = new Set([w.ts.url, w.mismatched.url]);
  const dir = tempDir('cache-load');
  const file = path.join(dir, 'router.yaml');
  const workersYaml = (dtype: Dtype) =>
    w.all.map((x) => `  - url: ${x.url}\n${tokenSpeed.has(x.url) ? `    labels:\n      multimodal_encoder_dtype: ${dtype}\n` : ''}`).join('');
  writeFileSync(
    file,
    `# reliability: the pixel cache under load\nmultimodal_tensor_transport: auto\nmultimodal_pixel_cache_mb: ${LOAD_BUDGET_MB}\nhealth_check_interval_secs: 1\nrequest_timeout_secs: 300\nworkers:\n${workersYaml('float32')}`,
  );
  const serve = await startServe(['--config', file], { name: 'serve (pixel cache)', env: { XDG_CONFIG_HOME: dir } });
  const tap = await trafficTap(serve);
  try {
    const view = (await consoleCall(serve.consoleUrl, serve.token, 'config.get', {})).json;
    const base = view.config as Record<string, unknown> & { workers: Array<Record<string, unknown> & { url: string }> };
    const dtypeOf = new Map<number, Dtype>([[view.revision as number, 'float32']]);
    const before = await cacheMetrics(serve.routerUrl);
    const from = serve.proc.output().length;

    // A new image is made (encoded) when a client sends it; what the worker must have received for it is computed after the load, so the suite's own preprocessing does not compete with the router's.
    interface Pending {
      spec: ImageSpec;
      bytes: Buffer;
      dataUrl: string;
    }
    interface Done {
      images: Array<CorpusImage | Pending>;
      stream: boolean;
      reply: Reply;
      kind: 'repeat' | 'mixed' | 'new';
    }
    const done: Done[] = [];
    let newImages = 0;
    let startedAfterChange = 0;
    const rng = t.rng;
    const t0 = performance.now();
    const end = t0 + seconds * 1000;
    // Past `end`, clients go on (up to 120 s more) until 8 requests have started on the new dtype: the check needs both.
    const hardEnd = end + 120_000;
    // Midway, the TokenSpeed workers' encoder dtype goes from float32 to bfloat16, live.
    let change: { revision: number; atS: number; ms: number } | undefined;
    let changeError: string | undefined;
    const changer = (async () => {
      await sleep((seconds * 1000) / 2);
      const t1 = performance.now();
      try {
        const draft = {
          ...base,
          workers: base.workers.map((x) => (tokenSpeed.has(x.url) ? { ...x, labels: { ...(x.labels as object), multimodal_encoder_dtype: 'bfloat16' } } : x)),
        };
        const revision = await apply(serve, draft, view.revision as number);
        dtypeOf.set(revision, 'bfloat16');
        change = { revision, atS: (t1 - t0) / 1000, ms: performance.now() - t1 };
      } catch (err) {
        changeError = (err as Error).message;
      }
    })();
    // The cache's size and the router's other /dev/shm bytes while the clients run (every 500 ms, at most 2000 samples).
    const samples: Array<{ t: number; entries: number; bytes: number; evictions: number; outstanding: number }> = [];
    let sampling = true;
    const sampler = (async () => {
      for (let i = 0; sampling && i < 2000; i++) {
        const m = await metricsIfAnswered(serve.routerUrl);
        if (m && [...m.keys()].some((k) => k.startsWith('smg_mm_pixel_cache_entries')))
          samples.push({
            t: Math.round((performance.now() - t0) / 100) / 10,
            entries: metricSum(m, 'smg_mm_pixel_cache_entries'),
            bytes: metricSum(m, 'smg_mm_pixel_cache_bytes'),
            evictions: metricSum(m, 'smg_mm_pixel_cache_evictions_total'),
            outstanding: metricSum(m, 'smg_mm_shm_outstanding_bytes'),
          });
        await sleep(500);
      }
    })();
    await Promise.all(
      Array.from({ length: clients }, async (_, c) => {
        const r = rng.fork(c);
        // Half the clients resend images of the set of eight, a quarter mix one of them with a new one, a quarter send only new ones.
        const kind: Done['kind'] = c < 16 ? 'repeat' : c < 24 ? 'mixed' : 'new';
        let made = 0;
        const fresh = async (): Promise<Pending> => {
          made += 1;
          newImages += 1;
          const format = r.pick(NEW_FORMATS);
          const spec = { name: `new-${c}-${made}.${format}`, format, width: r.int(160, 640), height: r.int(120, 480) };
          const bytes = await photoBytes(spec, 100_000 + c * 10_000 + made);
          return { spec, bytes, dataUrl: `data:image/${format};base64,${bytes.toString('base64')}` };
        };
        await sleep(r.int(0, 800));
        for (let i = 0; i < 10_000 && (performance.now() < end || (startedAfterChange < 8 && performance.now() < hardEnd)); i++) {
          const images: Done['images'] =
            kind === 'repeat'
              ? Array.from({ length: r.pick([1, 1, 2, 3]) }, () => r.pick(set))
              : kind === 'mixed'
                ? r.chance(0.5)
                  ? [r.pick(set), await fresh()]
                  : [await fresh(), r.pick(set)]
                : [await fresh()];
          const stream = r.chance(0.5);
          if (change) startedAfterChange += 1;
          const reply = await request(serve.routerUrl, chatBody(images, { stream }), { timeoutMs: 300_000 });
          done.push({ images, stream, reply, kind });
        }
      }),
    );
    const wall = (performance.now() - t0) / 1000;
    sampling = false;
    await sampler;
    await changer;
    t.check(changeError === undefined && change !== undefined, `the live dtype change failed: ${changeError}`);
    // Every request is over: give the stream a moment to deliver their last events.
    await sleep(600);
    const after = await cacheMetrics(serve.routerUrl);
    const held = cacheFiles('/dev/shm', serve.proc.pid);

    // The checks, request by request, against the dtype of the revision each one used.
    let wrongTensors = 0;
    let wrongRequests = 0;
    let dtypeOff = 0;
    let failed = 0;
    const problems: string[] = [];
    const byRevision: Record<string, number> = {};
    const statuses: Record<string, number> = {};
    const latencies: number[] = [];
    const lines = new Map(requestLines(serve.proc.output().slice(from)).map((l) => [l.id, l]));
    let logMismatch = 0;
    const described = new Map<string, CorpusImage>();
    const imagesOf = async (d: Done) => {
      const out: CorpusImage[] = [];
      for (const im of d.images) {
        if (!('spec' in im)) out.push(im);
        else out.push(described.get(im.spec.name) ?? described.set(im.spec.name, await describeImage(im.spec, im.bytes)).get(im.spec.name)!);
      }
      return out;
    };
    for (const d of done) {
      const status = String(d.reply.status || d.reply.neterr);
      statuses[status] = (statuses[status] ?? 0) + 1;
      latencies.push(d.reply.ms);
      const images = await imagesOf(d);
      const c = checkReply(d.reply, images, d.stream);
      if (c.wrong.length) {
        wrongRequests += 1;
        wrongTensors += new Set(c.wrong.map((p) => p.split(' ')[0])).size;
        if (problems.length < 12) problems.push(`wrong tensor: ${c.wrong.join('; ')} (${images.map((i) => i.name).join(', ')})`.slice(0, 400));
      }
      if (!c.ok) failed += 1;
      if (c.other.length && problems.length < 12) problems.push(c.other.join('; ').slice(0, 300));
      const revision = Number(d.reply.headers['x-mmtc-config-revision']);
      byRevision[revision] = (byRevision[revision] ?? 0) + 1;
      const want = c.runtime === 'tokenspeed' ? dtypeOf.get(revision) : 'float32';
      if (d.reply.status === 200 && c.dtype !== undefined && c.dtype !== want) {
        dtypeOff += 1;
        if (problems.length < 12)
          problems.push(`request ${replyId(d.reply)} on revision ${revision} (${want ?? 'unknown revision'}) got ${c.dtype} encoder inputs`);
      }
      const line = lines.get(replyId(d.reply));
      if (d.reply.status === 200 && (!line || line.revision !== revision)) logMismatch += 1;
    }
    // The cache's answers as the traffic stream tells them (one per image tensor that is one image's own).
    const answers: Record<string, number> = {};
    const ids = new Set(done.map((d) => replyId(d.reply)).filter(Boolean));
    for (const e of tap.events) {
      if (!e.cache || !ids.has(e.requestId)) continue;
      const k = `${e.cache} ${e.path}`;
      answers[k] = (answers[k] ?? 0) + 1;
    }
    const hitsSeen = (answers['hit shm'] ?? 0) + (answers['hit inline'] ?? 0);
    const missesSeen = (answers['miss shm'] ?? 0) + (answers['miss inline'] ?? 0);
    const stats =
      after && before
        ? {
            hits: after.hits - before.hits,
            misses: after.misses - before.misses,
            evictions: after.evictions - before.evictions,
            tampered: after.tampered - before.tampered,
            entries: after.entries,
            bytes: after.bytes,
          }
        : undefined;
    // Stop serve: its entries go with it.
    await serve.proc.stop();
    const left = (await until(() => (shmEntries().length === 0 ? [] : undefined), 3000, 50)) ?? shmEntries();

    const requests = done.length;
    const phases = change
      ? {
          float32: Object.entries(byRevision)
            .filter(([r]) => Number(r) < change!.revision)
            .reduce((n, [, v]) => n + v, 0),
          bfloat16: byRevision[change.revision] ?? 0,
        }
      : { float32: requests, bfloat16: 0 };
    t.check(requests > 0, 'no request was sent');
    t.check(
      wrongTensors === 0,
      `${wrongTensors} wrong tensors in ${wrongRequests} of ${requests} answers: ${problems
        .filter((p) => p.startsWith('wrong'))
        .slice(0, 3)
        .join(' | ')}`,
    );
    t.check(
      dtypeOff === 0,
      `${dtypeOff} answers whose encoder dtype is not their revision's (a half-applied label): ${problems
        .filter((p) => p.startsWith('request'))
        .slice(0, 3)
        .join(' | ')}`,
    );
    t.check(failed === 0, `${failed} of ${requests} requests failed: ${problems.slice(0, 3).join(' | ')}`);
    t.check(logMismatch === 0, `${logMismatch} answers whose log line names another revision (or has none)`);
    t.check(phases.float32 > 0 && phases.bfloat16 > 0, `requests in each dtype: float32 ${phases.float32}, bfloat16 ${phases.bfloat16}`);
    t.check(hitsSeen > 0 && missesSeen > 0, `the cache must both hit and miss: ${JSON.stringify(answers)}`);
    if (stats) {
      t.check(stats.tampered === 0, `entries dropped as tampered with no tampering worker: ${stats.tampered}`);
      const heldBytes = held.reduce((n, f) => n + f.size, 0);
      t.check(
        stats.entries === held.length && stats.bytes === heldBytes && stats.bytes <= LOAD_BUDGET_MB * MiB,
        `at rest the cache's count must be its files: ${stats.entries} entries / ${stats.bytes} bytes counted, ${held.length} files / ${heldBytes} bytes in /dev/shm (budget ${LOAD_BUDGET_MB} MiB)`,
      );
    }
    t.check(left.length === 0, `files left in /dev/shm after serve stopped: ${left.slice(0, 5).join(', ')}`);
    t.note('requests', requests);
    t.note('requests_by_kind', Object.fromEntries((['repeat', 'mixed', 'new'] as const).map((k) => [k, done.filter((d) => d.kind === k).length])));
    t.note('new_images', newImages);
    t.note('statuses', statuses);
    t.note('requests_by_revision', byRevision);
    t.note('dtype_change', change ?? null);
    t.note('wrong_tensors', wrongTensors);
    t.note('dtype_off_revision', dtypeOff);
    t.note('cache_answers_by_path', answers);
    t.note('cache_stats', stats ?? 'not exported by this router (/metrics has no smg_mm_pixel_cache_*)');
    t.note('entries_at_end', { files: held.length, bytes: held.reduce((n, f) => n + f.size, 0) });
    if (samples.length) {
      t.note('cache_peak', {
        entries: Math.max(...samples.map((x) => x.entries)),
        bytes: Math.max(...samples.map((x) => x.bytes)),
        outstanding_bytes: Math.max(...samples.map((x) => x.outstanding)),
      });
      const every = Math.max(1, Math.ceil(samples.length / 60));
      t.note(
        'cache_samples',
        samples.filter((_, i) => i % every === 0).map((x) => [x.t, x.entries, Math.round(x.bytes / MiB), x.evictions, Math.round(x.outstanding / MiB)]),
      );
    }
    t.note('events_dropped', tap.dropped());
    t.note('p50_ms', Math.round(percentile(latencies, 50)));
    t.note('p99_ms', Math.round(percentile(latencies, 99)));
    t.note('files_left', left.length);
    if (problems.length) t.note('problems', problems);
    // What the cache held at its fullest: its entries, and entries evicted while requests still held them (counted until those end).
    const peakBytes = samples.length ? Math.max(...samples.map((x) => x.bytes)) : undefined;
    const peak =
      peakBytes === undefined
        ? ''
        : `, at most ${bytesText(peakBytes)} held (${peakBytes > LOAD_BUDGET_MB * MiB ? 'ABOVE' : 'within'} the budget) with ${Math.max(...samples.map((x) => x.entries))} entries at most`;
    if (peakBytes !== undefined) t.note('budget_exceeded_by', Math.max(0, peakBytes - LOAD_BUDGET_MB * MiB));
    const counted = stats
      ? `; the cache counted ${stats.hits} hits / ${stats.misses} misses, ${stats.evictions} evictions, ${stats.tampered} tampered${peak}, ${stats.entries} entries (${bytesText(stats.bytes)}) at the end`
      : '';
    t.summary(
      `budget ${LOAD_BUDGET_MB} MiB; ${requests} requests from ${clients} clients in ${fmt(wall, 0)} s (${fmt(requests / wall, 2)} req/s, p50 ${fmt(percentile(latencies, 50), 0)} ms), ${newImages} new images and the set of 8; float32 → bfloat16 applied ${change ? `${fmt(change.atS)} s in (revision ${change.revision}, ${fmt(change.ms, 0)} ms)` : 'NOT'}: ${phases.float32} requests float32, ${phases.bfloat16} bfloat16; wrong tensors ${wrongTensors}, dtype off its revision ${dtypeOff}; image tensors hit ${hitsSeen} (${answers['hit shm'] ?? 0} by link, ${answers['hit inline'] ?? 0} inline), missed ${missesSeen}${counted}; ${held.length} cache files (${bytesText(held.reduce((n, f) => n + f.size, 0))}) before stop, files left ${left.length}`,
    );
  } finally {
    tap.close();
    await serve.proc.stop();
  }
}

// ---------------------------------------------------------------------------------------------
// cache/tamper

/** python3 FILE: read the first byte through a MAP_SHARED read-write mapping, then write it back inverted (no msync). */
const MMAP_WRITE =
  'import mmap, os, sys\nfd = os.open(sys.argv[1], os.O_RDWR)\nm = mmap.mmap(fd, 0, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)\nb = m[0]\nm[0] = b ^ 0xff\nm.close()\nos.close(fd)\n';

interface Asked {
  reply: Reply;
  check: Checked;
  id?: string;
  /** The pixel cache's answer and path for the image's encoder tensor (traffic.snapshot). */
  cache?: string;
  path?: string;
}

async function tamper(t: T): Promise<void> {
  // vLLM reads its files: a hit is a link to the entry until its worker is caught writing. TokenSpeed
  // attaches its bfloat16 encoder input read-write: its hits are copies from the first.
  const runtimes: Array<'tokenspeed' | 'vllm'> = t.short ? ['vllm'] : ['vllm', 'tokenspeed'];
  const rounds = t.short ? 1 : 2;
  // An image of its own for every step (a hit and a miss per round, the held-link probe per runtime, the mtime and mmap probes).
  const sizes: Array<[number, number, CorpusImage['format']]> = [
    [640, 480, 'jpeg'],
    [800, 600, 'webp'],
    [1024, 768, 'png'],
    [500, 500, 'png'],
    [1280, 720, 'jpeg'],
    [1600, 200, 'png'],
    [320, 240, 'webp'],
    [960, 540, 'jpeg'],
  ];
  const count = runtimes.length * (rounds * 2 + 1) + 2;
  const corpus = await Promise.all(
    Array.from({ length: count }, (_, i) => {
      const [width, height, format] = sizes[i % sizes.length]!;
      return makeImage({ name: `tamper-${i}-${width}x${height}.${format}`, format, width, height }, 7000 + i);
    }),
  );
  const workers: Record<string, { normal: Worker; tampering: Worker; slow: Worker }> = {};
  for (const rt of runtimes) {
    const [normal, tampering, slow] = await Promise.all([
      startWorker(rt, [], { name: 'normal' }),
      startWorker(rt, ['--tamper-shm'], { name: 'tamper-shm' }),
      startWorker(rt, ['--delay-ms', '6000'], { name: 'slow (6 s)' }),
    ]);
    workers[rt] = { normal, tampering, slow };
  }
  const first = workers[runtimes[0]!]!.normal;
  const dir = tempDir('cache-tamper');
  const file = path.join(dir, 'router.yaml');
  writeFileSync(
    file,
    `# reliability: a worker that writes into its files\nmultimodal_tensor_transport: auto\nhealth_check_interval_secs: 0.5\nrequest_timeout_secs: 60\nworkers:\n  - url: ${first.url}\n`,
  );
  const serve = await startServe(['--config', file], { name: 'serve (tamper)', env: { XDG_CONFIG_HOME: dir } });
  let revision = (await consoleCall(serve.consoleUrl, serve.token, 'config.get', {})).json.revision as number;
  const base = (await consoleCall(serve.consoleUrl, serve.token, 'config.get', {})).json.config as Record<string, unknown>;
  const notes: string[] = [];
  const findings: Record<string, unknown> = {};
  try {
    /** Route every request to `w` alone, live; ready once /health lists it alone and healthy. */
    let current = first.url;
    const use = async (w: Worker) => {
      if (current === w.url) return;
      current = w.url;
      revision = await apply(serve, { ...base, workers: [{ url: w.url }] }, revision);
      const ok = await until(
        async () => {
          const h = (await get(serve.routerUrl, '/health', { timeoutMs: 5000 })).json;
          return h?.workers?.length === 1 && h.workers[0].url === w.url && h.workers[0].healthy === true;
        },
        10_000,
        50,
      );
      if (!ok) throw new Error(`${w.proc.name} ${w.url} not the only healthy worker 10 s after the apply`);
    };
    const ask = async (im: CorpusImage): Promise<Asked> => {
      const reply = await request(serve.routerUrl, chatBody([im]), { timeoutMs: 60_000 });
      const id = replyId(reply);
      const events = (await consoleCall(serve.consoleUrl, serve.token, 'traffic.snapshot', { limit: 50 })).json?.events ?? [];
      const enc = events.find((e: any) => e.requestId === id && /^(encoder_input|pixel_values)/.test(e.tensor));
      return { reply, check: checkReply(reply, [im]), ...(id ? { id } : {}), ...(enc?.cache ? { cache: enc.cache } : {}), ...(enc ? { path: enc.path } : {}) };
    };
    const say = (a: Asked) =>
      `${a.reply.status} ${a.check.ok ? 'right' : a.check.wrong.length ? 'WRONG' : 'failed'} (${a.cache ?? 'no cache answer'}${a.path ? ` via ${a.path}` : ''})`;
    const newEntry = (beforeNames: Set<string>) => cacheFiles('/dev/shm', serve.proc.pid).find((f) => !beforeNames.has(f.name));
    const names = () => new Set(cacheFiles('/dev/shm', serve.proc.pid).map((f) => f.name));
    const tamperedIno = (w: Worker, from: number) =>
      [
        ...w.proc
          .output()
          .slice(from)
          .matchAll(/tamper-shm: changed byte \d+ of (\S+) \(inode (\d+)\)/g),
      ].map((m) => Number(m[2]));
    const stats0 = await cacheMetrics(serve.routerUrl);
    let tamperings = 0;
    const images = [...corpus];
    const next = () => images.shift()!;

    for (const rt of runtimes) {
      const { normal, tampering, slow } = workers[rt]!;
      // Once caught writing into a link, the tampering worker gets copies of its own (docs/performance.md);
      // a worker that attaches read-write (TokenSpeed) gets copies from the first.
      const attaches = rt === 'tokenspeed';
      let caught = attaches;
      for (let round = 0; round < rounds; round++) {
        // 1. A hit handed to the tampering worker.
        {
          const a = next();
          await use(normal);
          const known = names();
          const miss = await ask(a);
          const entry = newEntry(known);
          await use(tampering);
          const from = tampering.proc.output().length;
          const hit = await ask(a);
          const inodes = tamperedIno(tampering, from);
          const dropped = await until(() => !existsSync(path.join('/dev/shm', entry?.name ?? '-')), 3000, 20);
          await use(normal);
          const after = await ask(a);
          const again = await ask(a);
          const label = `${rt} ${a.name}, a hit to the tampering worker${caught ? (attaches ? ' (it attaches read-write)' : ' (caught before)') : ''}`;
          t.check(
            miss.check.ok && miss.cache === 'miss' && miss.path === 'shm' && entry !== undefined,
            `${label}: the first request must be a correct miss over SHM that leaves an entry: ${say(miss)}, entry ${entry?.name}`,
          );
          if (!caught) {
            t.check(
              hit.cache === 'hit' && hit.path === 'shm' && hit.check.wrong.length > 0 && entry !== undefined && inodes.includes(entry.ino),
              `${label}: the tampering worker must get a link to the entry (inode ${entry?.ino}) and report the bytes it changed: ${say(hit)}, it wrote into inodes ${inodes}`,
            );
            t.check(dropped === true, `${label}: the entry's file must be dropped once the request is over (its mtime moved): ${entry?.name} still there`);
            t.check(
              after.check.ok && after.cache === 'miss',
              `${label}: the next request (a normal worker) must get a fresh preprocessing, computed again: ${say(after)} ${after.check.wrong.join('; ')}`,
            );
          } else {
            // A copy of its own: it changes only that; the entry stays, and stays right.
            t.check(
              hit.cache === 'hit' &&
                hit.path === 'shm' &&
                hit.check.wrong.length > 0 &&
                entry !== undefined &&
                inodes.length > 0 &&
                !inodes.includes(entry.ino),
              `${label}: the tampering worker must get a copy of its own (not the entry's inode ${entry?.ino}) and report the bytes it changed: ${say(hit)}, it wrote into inodes ${inodes}`,
            );
            t.check(dropped === false, `${label}: the entry must stay (its file was not written into): ${entry?.name}`);
            t.check(
              after.check.ok && after.cache === 'hit',
              `${label}: the next request (a normal worker) must get a correct hit: ${say(after)} ${after.check.wrong.join('; ')}`,
            );
          }
          t.check(again.check.ok && again.cache === 'hit', `${label}: and the one after that a correct hit: ${say(again)} ${again.check.wrong.join('; ')}`);
          caught = true;
          tamperings += inodes.length;
          notes.push(
            `${rt} ${a.name}: miss ${say(miss)}; to the tampering worker ${say(hit)}, entry ${dropped ? 'dropped' : 'KEPT'}; then ${say(after)}, ${say(again)}`,
          );
        }
        // 2. A miss whose request file became the entry, read by the tampering worker.
        {
          const b = next();
          await use(tampering);
          const known = names();
          const from = tampering.proc.output().length;
          const miss = await ask(b);
          const entry = newEntry(known);
          const inodes = tamperedIno(tampering, from);
          await use(normal);
          const after = await ask(b);
          const again = await ask(b);
          // Caught already (the hit above): its misses are kept as files of their own, written
          // from memory, so its write changes only the request's file.
          const label = `${rt} ${b.name}, a miss to the tampering worker (${attaches ? 'it attaches read-write' : 'caught before'})`;
          t.check(
            miss.cache === 'miss' && miss.path === 'shm' && miss.check.wrong.length > 0,
            `${label}: the tampering worker must report the bytes it changed: ${say(miss)}`,
          );
          t.check(
            entry !== undefined && inodes.length > 0 && !inodes.includes(entry.ino),
            `${label}: the entry must be a file of its own, not the inode it wrote into: entry ${entry?.ino}, wrote ${inodes}`,
          );
          t.check(
            after.check.ok && after.cache === 'hit',
            `${label}: the next request (a normal worker) must get a correct hit: ${say(after)} ${after.check.wrong.join('; ')}`,
          );
          t.check(again.check.ok && again.cache === 'hit', `${label}: and the one after that a correct hit: ${say(again)}`);
          tamperings += inodes.length;
          notes.push(
            `${rt} ${b.name}: a miss to the tampering worker ${say(miss)} (${entry ? 'it became the entry' : 'no entry'}); then ${say(after)}, ${say(again)}`,
          );
        }
      }
      // 3. Probe (recorded, not failed): a link held by a slow, honest worker while the tampering worker writes into the same inode.
      {
        const c = next();
        await use(normal);
        const known = names();
        await ask(c);
        const entry = newEntry(known);
        await use(slow);
        const held = ask(c);
        // The slow worker holds its request 6 s before reading: wait for its link (a tensor name on the entry's inode).
        const linked = await until(
          () =>
            readdirSync('/dev/shm').some(
              (n) => TENSOR_FILE.test(n) && entry !== undefined && statSync(path.join('/dev/shm', n), { throwIfNoEntry: false })?.ino === entry.ino,
            ),
          3000,
          10,
        );
        await use(tampering);
        const from = tampering.proc.output().length;
        await ask(c); // the tampering worker's request: what matters is what the others read after it
        const heldReply = await held;
        const inodes = tamperedIno(tampering, from);
        await use(normal);
        const after = await ask(c);
        tamperings += inodes.length;
        const label = `${rt} ${c.name}, a link held while another worker tampers`;
        t.check(after.check.ok, `${label}: the request after must get the right bytes: ${say(after)} ${after.check.wrong.join('; ')}`);
        findings[`${rt}_held_link`] = {
          image: c.name,
          link_held: linked === true,
          tampering_worker_wrote: inodes.length > 0 && inodes.includes(entry?.ino ?? -1),
          honest_worker_read: heldReply.check.ok
            ? 'the right bytes'
            : heldReply.check.wrong.length
              ? 'the TAMPERED bytes (a wrong tensor)'
              : `failed: ${heldReply.check.other.join('; ')}`,
          honest_cache: heldReply.cache ?? null,
        };
        notes.push(
          `probe, ${rt} ${c.name}: an honest slow worker holding a link to the entry while the tampering worker wrote into it read ${heldReply.check.ok ? 'the right bytes' : heldReply.check.wrong.length ? 'the TAMPERED bytes' : 'nothing (failed)'}; then ${say(after)}`,
        );
      }
    }
    // 4. Probe (recorded, not failed): a write that puts the mtime back (what root can do with futimens); the guard looks at inode, size, mode and mtime.
    {
      const d = next();
      const { normal } = workers[runtimes[0]!]!;
      await use(normal);
      const known = names();
      await ask(d);
      const entry = newEntry(known);
      let restored = false;
      if (entry) {
        const p = path.join('/dev/shm', entry.name);
        const fd = openSync(p, constants.O_RDWR | constants.O_NOFOLLOW);
        const byte = Buffer.alloc(1);
        readSync(fd, byte, 0, 1, 0);
        byte[0] = byte[0]! ^ 0xff;
        writeSync(fd, byte, 0, 1, 0);
        closeSync(fd);
        const sec = entry.mtimeNs / 1_000_000_000n;
        const ns = entry.mtimeNs % 1_000_000_000n;
        execFileSync('touch', ['-m', '-d', `@${sec}.${String(ns).padStart(9, '0')}`, p]);
        restored = lstatSync(p, { bigint: true }).mtimeNs === entry.mtimeNs;
      }
      const after = await ask(d);
      findings.mtime_put_back = {
        image: d.name,
        mtime_restored_exactly: restored,
        next_request: after.check.ok ? 'the right bytes (caught)' : after.check.wrong.length ? `the TAMPERED bytes (${after.cache})` : 'failed',
      };
      notes.push(
        `probe: a write into ${d.name}'s entry with its mtime put back (${restored ? 'exactly' : 'NOT exactly'}): the next request got ${after.check.ok ? 'the right bytes' : after.check.wrong.length ? `the TAMPERED bytes (a ${after.cache})` : 'an error'}`,
      );
    }
    // 5. Probe (recorded, not failed): a write through a shared mapping after a read (what an in-place
    //    operation on a memory-mapped input does); on tmpfs such a write need not move the mtime.
    {
      const e = next();
      const { normal } = workers[runtimes[0]!]!;
      await use(normal);
      const known = names();
      await ask(e);
      const entry = newEntry(known);
      let staged: string;
      let mtimeMoved: boolean | undefined;
      try {
        if (!entry) throw new Error('no entry');
        const p = path.join('/dev/shm', entry.name);
        execFileSync('python3', ['-c', MMAP_WRITE, p], { timeout: 10_000, stdio: ['ignore', 'pipe', 'pipe'] });
        mtimeMoved = lstatSync(p, { bigint: true }).mtimeNs !== entry.mtimeNs;
        staged = `written through a shared mapping, mtime ${mtimeMoved ? 'moved' : 'unchanged'}`;
      } catch (err) {
        staged = `not staged (${String((err as Error).message).split('\n')[0]})`;
      }
      const after = await ask(e);
      findings.mmap_write = {
        image: e.name,
        staged,
        next_request: after.check.ok ? `the right bytes (${after.cache})` : after.check.wrong.length ? `the TAMPERED bytes (${after.cache})` : 'failed',
      };
      notes.push(
        `probe: ${e.name}'s entry ${staged}: the next request got ${after.check.ok ? 'the right bytes' : after.check.wrong.length ? `the TAMPERED bytes (a ${after.cache})` : 'an error'}`,
      );
    }
    const stats1 = await cacheMetrics(serve.routerUrl);
    const tamperedCount = stats0 && stats1 ? stats1.tampered - stats0.tampered : undefined;
    if (tamperedCount !== undefined)
      t.check(
        tamperedCount >= runtimes.length,
        `smg_mm_pixel_cache_tampered_total must count the entry the tampering worker wrote into through its first link (then it gets files of its own): ${tamperedCount}`,
      );
    await serve.proc.stop();
    const left = (await until(() => (shmEntries().length === 0 ? [] : undefined), 3000, 50)) ?? shmEntries();
    t.check(left.length === 0, `files left in /dev/shm: ${left.slice(0, 5).join(', ')}`);
    t.note('steps', notes);
    t.note('files_written_into', tamperings);
    t.note('tampered_counted', tamperedCount ?? 'not exported by this router');
    t.note('findings', findings);
    t.note('files_left', left.length);
    const held = Object.entries(findings)
      .filter(([k]) => k.endsWith('_held_link'))
      .map(([k, v]) => `${k.replace('_held_link', '')}: ${(v as any).honest_worker_read}`);
    t.summary(
      `${runtimes.join(' and ')}: ${tamperings} files written into by the tampering worker (${t.short ? 'a hit and a miss' : 'two hits and two misses each'}); after its first write into a link the entry dropped and the next request computed again, after that the worker got files of its own for hits and misses (the entry kept, the next hit right); tampered counted ${tamperedCount ?? 'n/a'}; probes: a link held by an honest worker meanwhile read ${held.join(', ')}; a write with its mtime put back: the next request got ${(findings.mtime_put_back as any)?.next_request}; a write through a shared mapping (${(findings.mmap_write as any)?.staged}): the next request got ${(findings.mmap_write as any)?.next_request}; files left ${left.length}`,
    );
  } finally {
    await serve.proc.stop();
  }
}

// ---------------------------------------------------------------------------------------------
// cache/crash-restart

async function crashRestart(t: T): Promise<void> {
  const corpus = await makeCorpus(
    t.short ? ['thumb.png', 'vga.jpg', 'svga.webp'] : ['thumb.png', 'vga.jpg', 'svga.webp', 'square.gif', 'hd.jpg', 'xga.png', 'strip.png', 'fullhd.jpg'],
  );
  const cycles = t.short ? 1 : 3;
  const ns = await shmNamespace({ sizeBytes: 512 * MiB, name: 'cache crash-restart' });
  const victimDir = path.join(tempDir('cache-crash'), 'victim');
  mkdirSync(victimDir, { recursive: true });
  const victim = path.join(victimDir, 'precious.txt');
  writeFileSync(victim, 'do not touch\n');
  const sleeper = { proc: undefined as ReturnType<typeof spawnProc> | undefined };
  try {
    const worker = await startWorker('tokenspeed', [], { prefix: ns.prefix });
    const cfg = configFile(`multimodal_tensor_transport: auto\nrequest_timeout_secs: 30\nhealth_check_interval_secs: 0.5\nworkers:\n  - url: ${worker.url}\n`);
    let router = await startRouter(['--config', cfg], { prefix: ns.prefix, name: 'router 1' });
    const rows: string[] = [];
    const figures: Array<Record<string, unknown>> = [];
    let wrong = 0;
    let served = 0;
    for (let cycle = 0; cycle < cycles; cycle++) {
      // Serve every image twice (a miss, then a hit) until the router holds an entry for each.
      for (const round of [0, 1]) {
        for (const im of corpus) {
          const reply = await request(router.url, chatBody([im]), { timeoutMs: 60_000 });
          const c = checkReply(reply, [im]);
          served += 1;
          if (!c.ok) {
            wrong += 1;
            t.check(false, `cycle ${cycle} round ${round} ${im.name}: ${reply.status} ${[...c.wrong, ...c.other].join('; ').slice(0, 300)}`);
          }
        }
      }
      const held = await until(
        () => {
          const f = cacheFiles(ns.dir, router.proc.pid);
          return f.length >= corpus.length ? f : undefined;
        },
        5000,
        50,
      );
      t.check(held !== undefined, `cycle ${cycle}: the router must hold an entry per image: ${cacheFiles(ns.dir, router.proc.pid).length} of ${corpus.length}`);
      // The first time, entries planted beside the router's: a reused pid (removed), a live older owner, another pid namespace, a symlink (all kept).
      const planted: Record<string, string> = {};
      if (cycle === 0) {
        const now = Date.now();
        const pidNs = ourPidNamespace();
        const name = (nsId: string, pid: number, atMs: number, seq: number) => `smg-tokenspeed-cache-${nsId}-${pid}-${BigInt(atMs) * 1_000_000n}-${seq}`;
        sleeper.proc = spawnProc(['sleep', '600'], { name: 'sleeper (a pid younger than its cache file)' });
        await until(() => existsSync(`/proc/${sleeper.proc!.pid}/stat`), 2000, 10);
        const plant = (key: string, n: string, bytes = 4096) => {
          writeFileSync(path.join(ns.dir, n), Buffer.alloc(bytes, 9), { flag: 'wx', mode: 0o400 });
          planted[key] = n;
        };
        plant('reused', name(pidNs, sleeper.proc.pid, now - 60_000, 1));
        plant('liveOwner', name(pidNs, worker.proc.pid, now, 2));
        plant('otherNamespace', name(String(Number(pidNs) + 1), 4_194_304 + 4242, now, 3));
        planted.symlink = name(pidNs, 4_194_304 + 4343, now - 3_600_000, 4);
        symlinkSync(victim, path.join(ns.dir, planted.symlink));
      }
      const dead = router.proc.pid;
      const before = cacheFiles(ns.dir, dead);
      await router.proc.stop('SIGKILL');
      const left = cacheFiles(ns.dir, dead);
      const strayTensors = ns.entries().filter((n) => TENSOR_FILE.test(n));
      // The next router: how soon after its spawn and its readiness are the dead one's entries gone?
      const spawnedAt = performance.now();
      let goneAt: number | undefined;
      let polling = true;
      const poller = (async () => {
        for (let i = 0; polling && i < 6000; i++) {
          if (cacheFiles(ns.dir, dead).length === 0) {
            goneAt = performance.now();
            return;
          }
          await sleep(10);
        }
      })();
      const next = await startRouter(['--config', cfg], { prefix: ns.prefix, name: `router ${cycle + 2}` });
      const readyAt = performance.now();
      await until(() => goneAt !== undefined, 1000, 10);
      polling = false;
      await poller;
      const sweepLine = /\/dev\/shm orphan sweep: .*/.exec(next.proc.output())?.[0] ?? '';
      const entries = ns.entries();
      const afterMs = goneAt === undefined ? undefined : goneAt - readyAt;
      t.check(
        left.length === before.length && left.length >= corpus.length,
        `cycle ${cycle}: the killed router's ${before.length} cache files must stay until the next start: ${left.length} left`,
      );
      t.check(strayTensors.length === 0, `cycle ${cycle}: no request was in flight, so no tensor file may be left: ${strayTensors}`);
      t.check(
        goneAt !== undefined && afterMs! <= 1000,
        `cycle ${cycle}: the dead router's cache files must be gone within 1 s of the next router's start: ${goneAt === undefined ? 'still there' : `${fmt(afterMs! / 1000, 2)} s after it was ready`}`,
      );
      const removed = before.length + (planted.reused ? 1 : 0);
      // The dead router's heartbeat (seq 0) goes with its entries, counted apart (it is neither a tensor file nor an entry).
      t.check(
        new RegExp(`removed ${removed} orphaned tensor files \\([\\d.]+ (?:B|KiB|MiB|GiB), all pixel-cache entries\\) of `).test(sweepLine) &&
          sweepLine.includes(`pid ${dead} (gone: ${before.length})`) &&
          sweepLine.includes('removed 1 pixel-cache heartbeat of a router gone'),
        `cycle ${cycle}: the start-up sweep must say it removed them: ${sweepLine}`,
      );
      if (cycle === 0) {
        t.check(
          !entries.includes(planted.reused!) && sweepLine.includes(`pid ${sleeper.proc!.pid} (pid reused by a newer process: 1)`),
          `an entry whose pid is a younger process must be removed: ${entries.includes(planted.reused!) ? 'still there' : 'gone'}; ${sweepLine}`,
        );
        t.check(
          entries.includes(planted.liveOwner!) && entries.includes(planted.otherNamespace!) && entries.includes(planted.symlink!),
          `kept: a live older owner's ${entries.includes(planted.liveOwner!)}, another pid namespace's ${entries.includes(planted.otherNamespace!)}, a symlink ${entries.includes(planted.symlink!)}`,
        );
        t.check(sweepLine.includes(`${planted.symlink} (symlink)`), `the sweep must report the symlink: ${sweepLine}`);
        t.check(readFileSync(victim, 'utf8') === 'do not touch\n', "the symlink's target was touched");
        for (const k of ['liveOwner', 'otherNamespace', 'symlink']) unlinkSync(path.join(ns.dir, planted[k]!));
        await sleeper.proc!.stop('SIGKILL');
      }
      figures.push({
        cycle,
        killed_pid: dead,
        cache_files_left_by_kill: left.length,
        cache_bytes_left: left.reduce((n, f) => n + f.size, 0),
        next_ready_s: fmt((readyAt - spawnedAt) / 1000, 2),
        gone_s_after_spawn: goneAt === undefined ? null : fmt((goneAt - spawnedAt) / 1000, 2),
        gone_s_after_ready: afterMs === undefined ? null : fmt(afterMs / 1000, 2),
        sweep: sweepLine.replace(/^\/dev\/shm orphan sweep: /, ''),
      });
      rows.push(
        `kill ${cycle + 1}: ${left.length} cache files (${bytesText(left.reduce((n, f) => n + f.size, 0))}) left, gone ${goneAt === undefined ? 'NEVER' : `${fmt((goneAt - spawnedAt) / 1000, 2)} s after the next spawn (${afterMs! <= 0 ? `${fmt(-afterMs! / 1000, 2)} s before` : `${fmt(afterMs! / 1000, 2)} s after`} it listened)`}`,
      );
      router = next;
    }
    // The last router serves on, computing afresh, then stops: its entries go with it.
    for (const im of corpus.slice(0, 2)) {
      const c = checkReply(await request(router.url, chatBody([im]), { timeoutMs: 60_000 }), [im]);
      served += 1;
      if (!c.ok) wrong += 1;
      t.check(c.ok, `after the restart ${im.name}: ${[...c.wrong, ...c.other].join('; ')}`);
    }
    await router.proc.stop();
    t.check(
      cacheFiles(ns.dir).length === 0,
      `a router stopped with SIGTERM must remove its entries: ${cacheFiles(ns.dir)
        .map((f) => f.name)
        .slice(0, 3)}`,
    );
    // Probe (recorded, not failed): the restart of a container, a router in a pid namespace of its own killed and started again in a new one.
    const containers = await containerRestart(t, ns.dir, ns.prefix, cfg, corpus);
    await worker.proc.stop();
    const left = (await until(() => (ns.entries().length === 0 ? [] : undefined), 3000, 50)) ?? ns.entries();
    t.check(left.length === 0, `left at the end: ${left.slice(0, 5).join(', ')}`);
    t.note('cycles', figures);
    t.note('container_restart', containers.figures);
    t.note('requests', served);
    t.note('wrong', wrong);
    t.note('files_left', left.length);
    t.summary(
      `${corpus.length} images, ${served} requests (${wrong} wrong); ${rows.join('; ')}; first restart also removed a planted entry of a reused pid and kept a live older owner's, another pid namespace's and a symlink; probe, a router in its own pid namespace killed and started in a new one: ${containers.summary}; files left ${left.length}`,
    );
  } finally {
    await sleeper.proc?.stop('SIGKILL');
    await ns.stop();
  }
}

const PID_NS = ['unshare', '--pid', '--fork', '--kill-child=SIGTERM', '--mount-proc'];

/**
 * A router as PID 1 of a pid namespace of its own (a container), SIGKILLed with entries, then
 * started again in a new pid namespace (the container restarted): whether the new one's sweep
 * removes its predecessor's entries (the rule for another namespace keeps them for
 * liveOwnerMaxAgeMs, 24 h), how many and how many bytes stay. The suite removes what stays.
 */
async function containerRestart(
  t: T,
  dir: string,
  prefix: string[],
  cfg: string,
  corpus: readonly CorpusImage[],
): Promise<{ summary: string; figures: Record<string, unknown> }> {
  const start = (n: number) => startRouter(['--config', cfg], { prefix: [...prefix, ...PID_NS], exitWithSuite: false, name: `router (pid namespace ${n})` });
  const nsOf = (names: string[]) => [...new Set(names.map((n) => CACHE_NAME.exec(n)?.[1]).filter(Boolean))];
  const a = await start(1);
  for (const im of corpus) {
    const c = checkReply(await request(a.url, chatBody([im]), { timeoutMs: 60_000 }), [im]);
    t.check(c.ok, `router in its own pid namespace, ${im.name}: ${[...c.wrong, ...c.other].join('; ')}`);
  }
  const mine =
    (await until(
      () => {
        const f = cacheFiles(dir);
        return f.length >= corpus.length ? f : undefined;
      },
      5000,
      50,
    )) ?? cacheFiles(dir);
  await a.proc.stop('SIGKILL');
  const b = await start(2);
  await sleep(1000);
  const sweepLine = /\/dev\/shm orphan sweep: .*/.exec(b.proc.output())?.[0] ?? '';
  const stayed = cacheFiles(dir).filter((f) => mine.some((m) => m.name === f.name));
  // One request to the new router names its own pid namespace in its entry.
  await request(b.url, chatBody([corpus[0]!]), { timeoutMs: 60_000 });
  const bNs = nsOf(
    cacheFiles(dir)
      .filter((f) => !mine.some((m) => m.name === f.name))
      .map((f) => f.name),
  );
  await b.proc.stop();
  for (const f of stayed) unlinkSync(path.join(dir, f.name));
  // And the killed router's heartbeat, which stayed with them.
  for (const n of readdirSync(dir)) {
    const m = CACHE_NAME.exec(n);
    if (m && m[4] === '0' && mine.some((f) => f.name.startsWith(`smg-tokenspeed-cache-${m[1]}-${m[2]}-`))) unlinkSync(path.join(dir, n));
  }
  const aNs = nsOf(mine.map((f) => f.name));
  const figures = {
    entries_at_kill: mine.length,
    bytes_at_kill: mine.reduce((n, f) => n + f.size, 0),
    killed_pid_namespace: aNs,
    next_pid_namespace: bNs,
    namespace_inode_reused: aNs.length === 1 && bNs.length === 1 && aNs[0] === bNs[0],
    stayed_after_next_start: stayed.length,
    stayed_bytes: stayed.reduce((n, f) => n + f.size, 0),
    removed_by_the_suite: stayed.length,
    sweep: sweepLine.replace(/^\/dev\/shm orphan sweep: /, '') || 'nothing said',
  };
  const summary =
    stayed.length === 0
      ? `its ${mine.length} entries were swept at the next start (${figures.namespace_inode_reused ? "the new namespace got the old one's inode number" : 'another namespace inode'})`
      : `${stayed.length} of its ${mine.length} entries (${bytesText(figures.stayed_bytes)}) STAYED after the next start (namespace ${aNs} then ${bNs}: kept as another namespace's while its heartbeat is under 5 minutes old), removed by the suite`;
  return { summary, figures };
}
