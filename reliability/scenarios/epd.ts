// Disaggregated serving under load and faults: a real `mmtc router` with `disaggregation: epd`
// and `auto`, two encode workers (one sharing our /dev/shm, one in a /dev/shm of its own: a
// private tmpfs in a mount namespace), one prefill and one decode reference worker. Under load
// every answer is checked item by item: each image reached exactly one encode worker (the same
// one for the same image, consistent hashing), its tensors' fingerprints are the image's, and
// its path is the one its encode worker's lane gives (SHM to the near one, inline to the far
// one). Then the faults: an encode worker killed mid-request, one that answers accepted: false,
// a prefill that never gets its embedding; each a clear error, /health fast, no file left.
import { chatBody, randomChat } from '../lib/chat.ts';
import { makeCorpus, expectedTensors, parseWorkerReport, compareTensors, type CorpusImage, type ReportedTensor } from '../lib/images.ts';
import { get, percentile, request, type Reply } from '../lib/http.ts';
import { canNamespace, sleep, spawnMmtc, startRouter, type Proc, type Router } from '../lib/procs.ts';
import { ourFiles, shmNamespace } from '../lib/shm.ts';
import { type Suite, type T } from '../lib/suite.ts';
import { configFile } from './faults-worker.ts';
import { predictPath } from './load.ts';

export interface RoleWorker {
  proc: Proc;
  url: string;
  bootstrapPort?: number;
}

export async function roleWorker(
  role: 'encode' | 'prefill' | 'decode',
  extra: string[] = [],
  prefix: string[] = [],
  runtime: 'tokenspeed' | 'vllm' = 'tokenspeed',
): Promise<RoleWorker> {
  const served = role !== 'decode';
  const proc = spawnMmtc(['worker', '--runtime', runtime, '--port', '0', '--role', role, ...(served ? ['--bootstrap-port', '0'] : []), ...extra], {
    name: `${runtime} worker ${role}${extra.length ? ` ${extra.join(' ')}` : ''}${prefix.length ? ' (own /dev/shm)' : ''}`,
    prefix,
  });
  const m = await proc.waitFor(served ? /listening on (grpc:\/\/\S+)\n[\s\S]*?bootstrap server on http:\/\/\S+:(\d+)/ : /listening on (grpc:\/\/\S+)/, 45_000);
  return { proc, url: m[1]!, ...(served ? { bootstrapPort: Number(m[2]) } : {}) };
}

function epdRouter(encoders: RoleWorker[], prefill: RoleWorker, decode: RoleWorker, name: string): Promise<Router> {
  const entry = (w: RoleWorker, type: string) =>
    `  - url: ${w.url}\n    worker_type: ${type}\n${w.bootstrapPort ? `    bootstrap_port: ${w.bootstrapPort}\n` : ''}`;
  const file = configFile(
    `disaggregation: epd\nmultimodal_tensor_transport: auto\nrequest_timeout_secs: 120\nhealth_check_interval_secs: 1\nworkers:\n${encoders.map((e) => entry(e, 'encode')).join('')}${entry(prefill, 'prefill')}${entry(decode, 'decode')}`,
  );
  return startRouter(['--config', file], { name });
}

/** Every difference between the decode worker's sentence and what the images must have become, with where each item went. */
function verifyEpd(reply: Reply, images: readonly CorpusImage[], prefill: string): { problems: string[]; items: Array<{ worker: string; path: string }> } {
  if (reply.status !== 200) return { problems: [`HTTP ${reply.status || reply.neterr}: ${reply.body.slice(0, 300)}`], items: [] };
  const content = reply.content ?? '';
  const problems: string[] = [];
  const head = new RegExp(`^${images.length} images? via epd, prefill ${prefill}, kv room \\d+\\.`).exec(content);
  if (!head) problems.push(`not an EPD answer naming the prefill worker: ${content.slice(0, 200)}`);
  const items: Array<{ worker: string; path: string }> = [];
  const re = / item (\d+) from encode worker (grpc:\/\/\S+), room (\d+): ([^]*?)\.(?= item \d+ from|$)/g;
  for (let m = re.exec(content); m; m = re.exec(content)) {
    const i = Number(m[1]);
    const report = parseWorkerReport(`1 image: ${m[4]}`);
    if (i !== items.length || !report || !images[i]) {
      problems.push(`item ${m[1]} out of order or unparsed`);
      continue;
    }
    problems.push(...compareTensors(expectedTensors('tokenspeed', [images[i]]), report.tensors).map((p) => `item ${i}: ${p}`));
    items.push({ worker: m[2]!, path: report.tensors.find((t) => t.name === 'encoder_input')?.path ?? '?' });
  }
  if (items.length !== images.length) problems.push(`${items.length} items reported for ${images.length} images`);
  return { problems, items };
}

/** The router's log events about workers' rotation (`worker_out_of_rotation`, `worker_in_rotation`: docs/router.md, "Workers"). */
function rotationEvents(output: string): Array<{ time: string; event: string; worker: string; worker_type: string; reason?: string }> {
  return output
    .split('\n')
    .filter((l) => l.startsWith('{') && l.includes('"event":"worker_'))
    .map((l) => JSON.parse(l) as { time: string; event: string; worker: string; worker_type: string; reason?: string });
}

async function healthProbe(url: string, ms: number): Promise<number[]> {
  const out: number[] = [];
  const end = performance.now() + ms;
  while (performance.now() < end) {
    const t = performance.now();
    await get(url, '/health', { timeoutMs: 5_000 });
    out.push(performance.now() - t);
    await sleep(100);
  }
  return out;
}

export async function epdGroup(suite: Suite): Promise<void> {
  const run = (name: string, fn: (t: T) => Promise<void>, maxSeconds: number) =>
    suite.run(`epd/${name}`, fn, {
      seeded: name !== 'faults',
      maxSeconds,
      ...(canNamespace() ? {} : { skip: 'needs root (unshare --mount) for the far encode worker' }),
    });
  await suite.group('epd', ['clients-32', 'faults', 'pd-both-runtimes'], async () => {
    await run('clients-32', (t) => loadEpd(t, suite.short ? 8 : 60), 240);
    await run('faults', (t) => faults(t), 180);
    await run('pd-both-runtimes', (t) => pdBothRuntimes(t, suite.short ? 6 : 30), 240);
  });
}

async function loadEpd(t: T, seconds: number): Promise<void> {
  const corpus = await makeCorpus();
  const far = await shmNamespace({ name: 'far encode worker' });
  try {
    // Under 32 clients of up to 4 images on two cores an image can wait over 10 s (the prefill
    // worker's default) for its encode worker: the waits are their longest, 60 s, below the
    // router's 120 s deadline, so what is checked is where every item went, not how fast.
    const [near, farWorker, prefill, decode] = await Promise.all([
      roleWorker('encode'),
      roleWorker('encode', [], far.prefix),
      roleWorker('prefill', ['--embedding-timeout-ms', '60000']),
      roleWorker('decode', ['--kv-timeout-ms', '60000']),
    ]);
    const router = await epdRouter([near, farWorker], prefill, decode, 'router (epd)');
    const rng = t.rng;
    const byImage = new Map<string, Set<string>>();
    /** Every item's encode worker and when its request was in flight (wall clock, as the router's log events are). */
    const itemsOf = new Map<string, Array<{ worker: string; from: number; to: number }>>();
    const problems: string[] = [];
    const paths = { near: { shm: 0, inline: 0 }, far: { shm: 0, inline: 0 } };
    let requests = 0;
    let items = 0;
    const latencies: number[] = [];
    const end = performance.now() + seconds * 1000;
    await Promise.all(
      Array.from({ length: 32 }, async (_, c) => {
        const r = rng.fork(c);
        await sleep(r.int(0, 800));
        while (performance.now() < end) {
          const sent = randomChat(r, corpus, [1, 2, 3, 4]);
          const from = Date.now();
          const reply = await request(router.url, sent.body, { timeoutMs: 120_000 });
          const to = Date.now();
          requests += 1;
          latencies.push(reply.ms);
          const v = verifyEpd(reply, sent.images, prefill.url);
          if (v.problems.length && problems.length < 20) problems.push(v.problems.join('; ').slice(0, 400));
          v.items.forEach((it, i) => {
            items += 1;
            const name = sent.images[i]!.name;
            (byImage.get(name) ?? byImage.set(name, new Set()).get(name)!).add(it.worker);
            (itemsOf.get(name) ?? itemsOf.set(name, []).get(name)!).push({ worker: it.worker, from, to });
            const side = it.worker === near.url ? paths.near : paths.far;
            if (it.path === 'shm' || it.path === 'inline') side[it.path] += 1;
          });
        }
      }),
    );
    // An encode worker the router took out of rotation (its log says when and why: a
    // HealthCheck unanswered for 3 s while the worker, starved on two cores, answered nothing
    // else either) has its images hashed to the other one until it is back: that move is
    // failover, not a routing fault. An image moved so is one with a home worker whose every
    // item elsewhere was in flight while the home was out (from its worker_out_of_rotation to
    // its worker_in_rotation); any other move is a fault.
    const events = rotationEvents(router.proc.output()).filter((e) => e.worker_type === 'encode');
    const outages = events.filter((e) => e.event === 'worker_out_of_rotation');
    const outOf = (worker: string) =>
      outages
        .filter((e) => e.worker === worker)
        .map((e) => {
          const out = Date.parse(e.time);
          const back = events.find((b) => b.worker === worker && b.event === 'worker_in_rotation' && Date.parse(b.time) >= out);
          return { out, back: back ? Date.parse(back.time) : Infinity };
        });
    const failover = (name: string) => {
      const seen = itemsOf.get(name) ?? [];
      return [...byImage.get(name)!].some((home) => seen.every((it) => it.worker === home || outOf(home).some((w) => it.from <= w.back && it.to >= w.out)));
    };
    const moved = [...byImage].filter(([, w]) => w.size > 1).map(([n]) => n);
    const misrouted = moved.filter((name) => !failover(name));
    const left = ourFiles();
    t.note('requests', requests);
    t.note('items', items);
    t.note('paths', paths);
    t.note(
      'encode_outages',
      outages.map((e) => `${e.worker === near.url ? 'near' : 'far'}: ${e.reason}`),
    );
    t.check(problems.length === 0, `answers that do not prove their routing: ${problems.slice(0, 3).join(' | ')}`);
    t.check(misrouted.length === 0, `images that reached another encode worker than their own while it was in rotation: ${misrouted.join(', ')}`);
    t.check(
      paths.near.inline === 0 && paths.far.shm === 0,
      `paths by encode worker: near ${JSON.stringify(paths.near)} (all SHM expected), far ${JSON.stringify(paths.far)} (all inline expected)`,
    );
    t.check(left.length === 0, `files left in /dev/shm: ${left.map((f) => f.name).join(', ')}`);
    t.check(requests > 0, 'no request was sent');
    t.summary(
      `${requests} requests, ${items} items (1–4 images each, streamed and not) from 32 clients in ${seconds} s: 0 lost or misrouted items is ${problems.length === 0 && misrouted.length === 0}; ${byImage.size} distinct images, ${moved.length === 0 ? 'each on one encode worker' : `${moved.length - misrouted.length} moved while their encode worker was out of rotation (${outages.length} time(s))`}; near encode worker ${paths.near.shm} SHM / ${paths.near.inline} inline, far (own /dev/shm) ${paths.far.shm} SHM / ${paths.far.inline} inline; p50 ${percentile(latencies, 50).toFixed(0)} ms; files left ${left.length}`,
    );
  } finally {
    await far.stop();
  }
}

async function faults(t: T): Promise<void> {
  const corpus = await makeCorpus();
  const image = corpus.find((c) => c.patches * c.features * 2 >= 65_536)!;
  const notes: string[] = [];
  // An encode worker that answers accepted: false.
  {
    const [refusing, prefill, decode] = await Promise.all([
      roleWorker('encode', ['--encode-accept', 'false']),
      roleWorker('prefill', ['--embedding-timeout-ms', '2000']),
      roleWorker('decode'),
    ]);
    const router = await epdRouter([refusing], prefill, decode, 'router (refusing encode)');
    const reply = await request(router.url, chatBody([image]), { timeoutMs: 30_000 });
    const want = `encode worker ${refusing.url} (image 0) did not accept the image (EncodeResponse.accepted is false)`;
    t.check(reply.status === 502 && reply.json?.error?.message === want, `accepted: false: ${reply.status} ${reply.body.slice(0, 200)}`);
    notes.push(`accepted false → ${reply.status} in ${reply.ms.toFixed(0)} ms`);
    for (const p of [router.proc, decode.proc, prefill.proc, refusing.proc]) await p.stop();
  }
  // A prefill that never gets its embedding (the encode worker drops it).
  {
    const [dropping, prefill, decode] = await Promise.all([
      roleWorker('encode', ['--encode-drop']),
      roleWorker('prefill', ['--embedding-timeout-ms', '2000']),
      roleWorker('decode'),
    ]);
    const router = await epdRouter([dropping], prefill, decode, 'router (dropping encode)');
    const health = healthProbe(router.url, 3_000);
    const reply = await request(router.url, chatBody([image]), { timeoutMs: 30_000 });
    const h = await health;
    const ok =
      reply.status === 502 &&
      new RegExp(
        `^prefill worker ${prefill.url} failed: DEADLINE_EXCEEDED: item 0: no embedding from 127\\.0\\.0\\.1:${dropping.bootstrapPort} room \\d+ within 2000 ms$`,
      ).test(reply.json?.error?.message ?? '');
    t.check(ok, `embedding never came: ${reply.status} ${reply.body.slice(0, 300)}`);
    t.check(percentile(h, 99) < 100, `/health p99 ${percentile(h, 99).toFixed(1)} ms while the prefill waited (bound 100 ms)`);
    notes.push(`embedding never came → ${reply.status} in ${reply.ms.toFixed(0)} ms, /health p99 ${percentile(h, 99).toFixed(1)} ms`);
    for (const p of [router.proc, decode.proc, prefill.proc, dropping.proc]) await p.stop();
  }
  // An encode worker killed while it holds its request (--delay-ms keeps it there).
  {
    const [slow, prefill, decode] = await Promise.all([
      roleWorker('encode', ['--delay-ms', '3000']),
      roleWorker('prefill', ['--embedding-timeout-ms', '10000']),
      roleWorker('decode'),
    ]);
    const router = await epdRouter([slow], prefill, decode, 'router (killed encode)');
    const pending = request(router.url, chatBody([image]), { timeoutMs: 30_000 });
    await sleep(800);
    await slow.proc.stop('SIGKILL');
    const reply = await pending;
    const ok = reply.status === 502 && (reply.json?.error?.message ?? '').startsWith(`encode worker ${slow.url} (image 0) failed: UNAVAILABLE`);
    t.check(ok, `encode worker killed: ${reply.status} ${reply.body.slice(0, 300)}`);
    const again = await request(router.url, chatBody([image]), { timeoutMs: 30_000 });
    t.check(again.status === 503, `after the kill the next request is 503 (no healthy encode worker): ${again.status} ${again.body.slice(0, 200)}`);
    notes.push(`encode worker killed → ${reply.status} in ${reply.ms.toFixed(0)} ms, next ${again.status}`);
    for (const p of [router.proc, decode.proc, prefill.proc]) await p.stop();
  }
  const left = ourFiles();
  t.check(left.length === 0, `files left in /dev/shm: ${left.map((f) => f.name).join(', ')}`);
  t.summary(`${notes.join('; ')}; files left ${left.length}`);
}

/**
 * PD over each runtime that does it (TokenSpeed at once, vLLM prefill then decode): three
 * prefill workers (one sharing our /dev/shm, one in a /dev/shm of its own, one sharing it with
 * the override `multimodal_tensor_transport: inline`) and one decode worker, 16 clients sending
 * 1–4 images, streamed and not. Every answer names the prefill worker that read the pixels and
 * what it read: each tensor's bytes are the image's, and its path is that prefill worker's own
 * (SHM near, inline far, inline where overridden). The decode worker refuses pixel tensors, so a
 * 200 proves it got none. No file is left.
 */
async function pdBothRuntimes(t: T, seconds: number): Promise<void> {
  const corpus = await makeCorpus();
  // Both runtimes' rigs at once (each its own workers, router and clients): what each is judged on is its own.
  // Settled both before judging: a rig that fails does not leave the other running past the check of /dev/shm.
  const settled = await Promise.allSettled((['tokenspeed', 'vllm'] as const).map((runtime) => pdOneRuntime(t, runtime, corpus, seconds)));
  const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
  const notes = settled.map((r) => (r as PromiseFulfilledResult<string>).value);
  const left = ourFiles();
  t.check(left.length === 0, `files left in /dev/shm: ${left.map((f) => f.name).join(', ')}`);
  t.summary(`${notes.join('; ')} (16 clients each, 1–4 images, streamed and not, both runtimes at once); files left ${left.length}`);
}

/** One runtime's PD rig under 16 clients for `seconds`: every answer checked, each prefill worker's pixels by its own transport; its note. */
async function pdOneRuntime(t: T, runtime: 'tokenspeed' | 'vllm', corpus: CorpusImage[], seconds: number): Promise<string> {
  const far = await shmNamespace({ name: `far ${runtime} prefill worker` });
  const started: Proc[] = [];
  let router: Router | undefined;
  const track = async <W extends { proc: Proc }>(w: Promise<W>): Promise<W> => {
    const ready = await w;
    started.push(ready.proc);
    return ready;
  };
  try {
    // Started together: each start is mostly its own process's load.
    const [near, farWorker, overridden, decode] = await Promise.all([
      track(roleWorker('prefill', [], [], runtime)),
      track(roleWorker('prefill', [], far.prefix, runtime)),
      track(roleWorker('prefill', [], [], runtime)),
      track(roleWorker('decode', ['--kv-timeout-ms', '60000'], [], runtime)),
    ]);
    const entry = (w: RoleWorker, type: string, more = '') =>
      `  - url: ${w.url}\n    runtime: ${runtime}\n    worker_type: ${type}\n${w.bootstrapPort ? `    bootstrap_port: ${w.bootstrapPort}\n` : ''}${more}`;
    const file = configFile(
      `disaggregation: pd\nmultimodal_tensor_transport: auto\nrequest_timeout_secs: 120\nhealth_check_interval_secs: 1\nworkers:\n${entry(near, 'prefill')}${entry(farWorker, 'prefill')}${entry(overridden, 'prefill', '    multimodal_tensor_transport: inline\n')}${entry(decode, 'decode')}`,
    );
    const base = (router = await startRouter(['--config', file], { name: `router (${runtime} pd)` })).url;
    const shares = new Map([
      [near.url, true],
      [farWorker.url, false],
      [overridden.url, false],
    ]);
    const byPrefill: Record<string, { requests: number; shm: number; inline: number }> = {};
    const problems: string[] = [];
    let requests = 0;
    const end = performance.now() + seconds * 1000;
    await Promise.all(
      Array.from({ length: 16 }, async (_, c) => {
        const r = t.rng.fork(runtime === 'vllm' ? 100 + c : c);
        await sleep(r.int(0, 500));
        while (performance.now() < end) {
          const sent = randomChat(r, corpus, [1, 2, 3, 4]);
          const reply = await request(base, sent.body, { timeoutMs: 120_000 });
          requests += 1;
          const found = verifyPd(reply, sent.images, runtime);
          if (found.problems.length && problems.length < 20) problems.push(found.problems.join('; ').slice(0, 400));
          if (!found.prefill) continue;
          const side = (byPrefill[found.prefill] ??= { requests: 0, shm: 0, inline: 0 });
          side.requests += 1;
          for (const tensor of found.tensors) {
            const expected = predictPath(tensor, 'auto', 65536, shares.get(found.prefill) === true);
            if (tensor.name.startsWith('encoder_input') || tensor.name === 'pixel_values') side[tensor.path === 'shm' ? 'shm' : 'inline'] += 1;
            if (tensor.path !== expected && problems.length < 20)
              problems.push(`${runtime}: ${tensor.name} to ${found.prefill} went ${tensor.path}, its prefill worker's transport says ${expected}`);
          }
        }
      }),
    );
    const served = Object.keys(byPrefill).length;
    t.check(requests > 0, `${runtime}: no request was sent`);
    t.check(problems.length === 0, `${runtime}: ${problems.slice(0, 3).join(' | ')}`);
    t.check(served === 3, `${runtime}: not every prefill worker served: ${JSON.stringify(byPrefill)}`);
    t.check(
      (byPrefill[near.url]?.shm ?? 0) > 0 && (byPrefill[farWorker.url]?.shm ?? 0) === 0 && (byPrefill[overridden.url]?.shm ?? 0) === 0,
      `${runtime}: pixels by SHM only to the near prefill worker: ${JSON.stringify(byPrefill)}`,
    );
    t.note(`${runtime}_requests`, requests);
    t.note(`${runtime}_pixels_by_prefill`, { near: byPrefill[near.url], far: byPrefill[farWorker.url], overridden_inline: byPrefill[overridden.url] });
    return `${runtime}: ${requests} requests, pixels near ${byPrefill[near.url]?.shm ?? 0} SHM / ${byPrefill[near.url]?.inline ?? 0} inline, far ${byPrefill[farWorker.url]?.shm ?? 0} / ${byPrefill[farWorker.url]?.inline ?? 0}, overridden ${byPrefill[overridden.url]?.shm ?? 0} / ${byPrefill[overridden.url]?.inline ?? 0}; ${problems.length} problems`;
  } finally {
    // The router first, then its workers together (whichever of them started).
    await router?.proc.stop();
    await Promise.all(started.map((proc) => proc.stop()));
    await far.stop();
  }
}

/** A PD answer: the prefill worker it names and the tensors it read, each checked against the images. */
function verifyPd(
  reply: Reply,
  images: readonly CorpusImage[],
  runtime: 'tokenspeed' | 'vllm',
): { problems: string[]; prefill?: string; tensors: ReportedTensor[] } {
  if (reply.status !== 200) return { problems: [`${runtime}: HTTP ${reply.status || reply.neterr}: ${reply.body.slice(0, 300)}`], tensors: [] };
  const content = reply.content ?? '';
  const head = new RegExp(`^${images.length} images? via pd, prefill (grpc://\\S+), ${runtime === 'vllm' ? 'transfer \\S+' : 'kv room \\d+'}: `).exec(content);
  if (!head) return { problems: [`${runtime}: not a PD answer naming its prefill worker: ${content.slice(0, 200)}`], tensors: [] };
  const report = parseWorkerReport(`${images.length} images: ${content.slice(head[0].length)}`);
  if (!report) return { problems: [`${runtime}: the prefill worker's report does not parse: ${content.slice(0, 200)}`], prefill: head[1]!, tensors: [] };
  return {
    problems: compareTensors(expectedTensors(runtime, images), report.tensors).map((p) => `${runtime}: ${p}`),
    prefill: head[1]!,
    tensors: report.tensors,
  };
}
