// The hardening figures (issue 12), measured again over real `mmtc router` processes: a 50 MB
// text body with /health polled meanwhile, 20 decompression-bomb PNGs in one request, bodies
// that trickle or are too big, max_tokens 1e15, image URLs naming this host (a server counts
// the connections it gets), 50 URLs of 19 MiB with private hosts allowed, a worker running as
// nobody, two routers in separate pid namespaces sharing /dev/shm, and (full mode) 128
// concurrent 1080p clients then a minute of idle, for the router's resident memory.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import sharp from 'sharp';
import { chatBody, sendChat } from '../lib/chat.ts';
import { makeCorpus } from '../lib/images.ts';
import { get, metrics, metricSum, percentile, request } from '../lib/http.ts';
import { canNamespace, sleep, startRouter, startWorker, until, type Proc, type Router } from '../lib/procs.ts';
import { ourFiles } from '../lib/shm.ts';
import { fmt, bytesText, MiB, type Suite, type T } from '../lib/suite.ts';

class Peak {
  max = 0;
  private timer: NodeJS.Timeout;
  constructor(proc: Proc, everyMs = 50) {
    this.max = proc.rss() ?? 0;
    this.timer = setInterval(() => (this.max = Math.max(this.max, proc.rss() ?? 0)), everyMs);
  }
  stop(): number {
    clearInterval(this.timer);
    return this.max;
  }
}

const withImages = (urls: string[], text = 'describe') => ({
  messages: [{ role: 'user', content: [...urls.map((url) => ({ type: 'image_url', image_url: { url } })), { type: 'text', text }] }],
});

export async function hardeningGroup(suite: Suite): Promise<void> {
  const names = ['text-50mb', 'bombs-20', 'bodies', 'loopback-urls', 'urls-50x19mib', 'worker-as-nobody', 'two-routers-pid-ns', 'clients-128-1080p'];
  await suite.group('hardening', names, async () => {
    const run = (name: string, fn: (t: T) => Promise<void>, maxSeconds: number, skip?: string) =>
      suite.run(`hardening/${name}`, fn, { maxSeconds, ...(skip ? { skip } : {}) });
    const worker = await startWorker('tokenspeed');
    const r = await startRouter(
      ['--worker-urls', worker.url, '--multimodal-tensor-transport', 'auto', '--limit-mm-per-prompt', 'image=20', '--body-timeout-secs', '2'],
      { name: 'router (hardening)' },
    );
    try {
      await run('text-50mb', (t) => text50mb(t, r), 90);
      await run('bombs-20', (t) => bombs(t, r), 120);
      await run('bodies', (t) => bodies(t, r), 90);
      await run('loopback-urls', (t) => loopbackUrls(t, r), 60);
    } finally {
      await r.proc.stop();
    }
    await run('urls-50x19mib', (t) => bigUrls(t, worker.url), 120);
    await run('worker-as-nobody', (t) => asNobody(t), 90, canNamespace() ? undefined : 'needs root (setpriv)');
    await run('two-routers-pid-ns', (t) => twoRouters(t), 90, canNamespace() ? undefined : 'needs root (unshare --pid)');
    await run('clients-128-1080p', (t) => clients128(t), 300, suite.short ? 'full mode only (the load scenarios run 128 clients in short mode)' : undefined);
  });
}

async function healthWhile<X>(base: string, work: Promise<X>): Promise<{ result: X; polls: number; worstMs: number; p99Ms: number; failed: number }> {
  let done = false;
  const ms: number[] = [];
  let failed = 0;
  const poller = (async () => {
    while (!done) {
      const h = await get(base, '/health', { timeoutMs: 10_000 });
      ms.push(h.ms);
      if (h.status !== 200) failed += 1;
      await sleep(10);
    }
  })();
  const result = await work;
  done = true;
  await poller;
  return { result, polls: ms.length, worstMs: Math.max(0, ...ms), p99Ms: percentile(ms, 99), failed };
}

async function text50mb(t: T, r: Router): Promise<void> {
  const body = Buffer.from(JSON.stringify({ messages: [{ role: 'user', content: 'lorem ipsum dolor sit amet '.repeat(2_000_000).slice(0, 50_000_000) }] }));
  const peak = new Peak(r.proc);
  const { result, polls, worstMs, p99Ms, failed } = await healthWhile(r.url, request(r.url, body, { timeoutMs: 60_000 }));
  const rss = peak.stop();
  t.check(
    result.status === 400 && result.json?.error?.code === 'context_length_exceeded',
    `a 50 MB text must be refused 400 context_length_exceeded: ${result.status} ${result.body.slice(0, 200)}`,
  );
  t.check(failed === 0 && polls > 3, `/health must keep answering: ${polls} polls, ${failed} failed`);
  t.check(r.proc.alive(), 'the router died');
  t.note('status', result.status);
  t.note('answer_ms', Math.round(result.ms));
  t.note('health', { polls, worst_ms: Math.round(worstMs * 10) / 10, p99_ms: Math.round(p99Ms * 10) / 10 });
  t.note('peak_rss_mib', Math.round(rss / MiB));
  t.summary(
    `50 MB text: ${result.status} ${result.json?.error?.code} in ${fmt(result.ms, 0)} ms; /health ${polls} polls, worst ${fmt(worstMs)} ms, p99 ${fmt(p99Ms)} ms, ${failed} failed; router peak RSS ${bytesText(rss)}`,
  );
}

async function bombs(t: T, r: Router): Promise<void> {
  const bomb = await sharp({ create: { width: 10_000, height: 10_000, channels: 3, background: '#000' } })
    .png({ compressionLevel: 9 })
    .toBuffer();
  const body = Buffer.from(
    JSON.stringify(
      withImages(
        Array.from({ length: 20 }, () => `data:image/png;base64,${bomb.toString('base64')}`),
        'x',
      ),
    ),
  );
  const before = r.proc.rss()!;
  const peak = new Peak(r.proc);
  const res = await request(r.url, body, { timeoutMs: 60_000 });
  await sleep(1000);
  const max = peak.stop();
  const wait = t.short ? 5 : 30;
  await sleep(wait * 1000);
  const later = r.proc.rss()!;
  t.check(res.status === 413, `20 bombs must be refused 413: ${res.status} ${res.body.slice(0, 200)}`);
  t.check(
    /pixels in all .* above max_request_image_pixels = 64000000/.test(res.json?.error?.message ?? ''),
    `the refusal must name the pixel limit: ${res.json?.error?.message}`,
  );
  t.check(max - before < 512 * MiB, `refusing the bombs grew the router by ${bytesText(max - before)}`);
  t.note('body_mib', Math.round((body.byteLength / MiB) * 10) / 10);
  t.note('status', res.status);
  t.note('answer_ms', Math.round(res.ms));
  t.note('rss_mib', { before: Math.round(before / MiB), peak: Math.round(max / MiB), [`after_${wait}s`]: Math.round(later / MiB) });
  t.summary(
    `20 PNGs of 10000×10000 in one ${fmt(body.byteLength / MiB)} MB request: ${res.status} in ${fmt(res.ms, 0)} ms ("${String(res.json?.error?.message).slice(0, 60)}…"); RSS ${bytesText(before)} → peak ${bytesText(max)} → ${bytesText(later)} ${wait} s later`,
  );
}

async function bodies(t: T, r: Router): Promise<void> {
  // Each on a fresh connection and never sent again: a reset by the router must show as one.
  const once = { agent: false as const, retry: false };
  const slow = await request(r.url, undefined, {
    ...once,
    method: 'POST',
    chunks: Array.from({ length: 40 }, () => Buffer.from('{')),
    delayMs: 100,
    headers: { 'content-type': 'application/json' },
    timeoutMs: 30_000,
  });
  const declared = await request(r.url, Buffer.alloc(65 * MiB, 0x20), { ...once, timeoutMs: 60_000 });
  const streamed = await request(r.url, undefined, {
    ...once,
    method: 'POST',
    chunks: Array.from({ length: 70 }, () => Buffer.alloc(MiB, 0x20)),
    headers: { 'content-type': 'application/json' },
    timeoutMs: 60_000,
  });
  const maxTokens = await request(r.url, { max_tokens: 1e15, messages: [{ role: 'user', content: 'hi' }] }, once);
  t.check(
    slow.status === 400 && /did not arrive within 2 s \(body_timeout_secs\)/.test(slow.json?.error?.message ?? ''),
    `a trickled body: ${slow.status || slow.neterr} ${slow.body.slice(0, 200)}`,
  );
  t.check(
    declared.status === 413 && declared.json?.error?.message === 'request body is 65.0 MiB, above the 64.0 MiB limit (max_body_bytes)',
    `a 65 MiB body: ${declared.status || declared.neterr} ${declared.body.slice(0, 200)}`,
  );
  t.check(
    streamed.status === 413 && /above the 64\.0 MiB limit/.test(streamed.json?.error?.message ?? ''),
    `a 70 MiB chunked body: ${streamed.status || streamed.neterr} ${streamed.body.slice(0, 200)}`,
  );
  t.check(maxTokens.status === 400 && maxTokens.json?.error?.param === 'max_tokens', `max_tokens 1e15: ${maxTokens.status} ${maxTokens.body.slice(0, 200)}`);
  t.check(r.proc.alive(), 'the router died');
  t.note('slow_body', { status: slow.status, message: slow.json?.error?.message, ms: Math.round(slow.ms) });
  t.note('declared_65mib', { status: declared.status, message: declared.json?.error?.message });
  t.note('chunked_70mib', { status: streamed.status, message: streamed.json?.error?.message });
  t.note('max_tokens_1e15', { status: maxTokens.status, code: maxTokens.json?.error?.code });
  t.summary(
    `trickled body → ${slow.status} "${slow.json?.error?.message}"; 65 MiB declared → ${declared.status} JSON; 70 MiB chunked → ${streamed.status} JSON; max_tokens 1e15 → ${maxTokens.status} ${maxTokens.json?.error?.code}`,
  );
}

async function loopbackUrls(t: T, r: Router): Promise<void> {
  let connections = 0;
  const inside = http.createServer((_q, s) => s.end('secret'));
  inside.on('connection', () => (connections += 1));
  await new Promise<void>((done) => inside.listen(0, '127.0.0.1', done));
  const port = (inside.address() as AddressInfo).port;
  try {
    const hosts = ['127.0.0.1', 'localhost', '127.1', '2130706433', '0x7f000001', '[::ffff:127.0.0.1]', '[::1]', '0.0.0.0', 'localhost.'];
    const statuses: Record<string, number> = {};
    for (const host of hosts) {
      const res = await request(r.url, withImages([`http://${host}:${port}/x.png`]));
      statuses[host] = res.status;
      t.check(res.status === 400 && !res.body.includes('secret'), `${host}: ${res.status} ${res.body.slice(0, 200)}`);
    }
    t.check(connections === 0, `the router connected ${connections} times to a server on this host`);
    t.note('statuses', statuses);
    t.note('connections', connections);
    t.summary(`${hosts.length} spellings of this host refused (${[...new Set(Object.values(statuses))].join('/')}), ${connections} connections made`);
  } finally {
    await new Promise<void>((done) => inside.close(() => done()));
  }
}

async function bigUrls(t: T, workerUrl: string): Promise<void> {
  const image = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.alloc(19 * MiB - 8, 7)]);
  let served = 0;
  let requests = 0;
  const server = http.createServer((_q, s) => {
    requests += 1;
    s.writeHead(200, { 'content-type': 'image/png', 'content-length': image.byteLength });
    s.on('close', () => {});
    const chunk = 1024 * 1024;
    let off = 0;
    const pump = () => {
      while (off < image.byteLength) {
        const part = image.subarray(off, off + chunk);
        off += part.byteLength;
        served += part.byteLength;
        if (!s.write(part)) return void s.once('drain', pump);
      }
      s.end();
    };
    pump();
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const port = (server.address() as AddressInfo).port;
  const r = await startRouter(['--worker-urls', workerUrl, '--allow-private-media-hosts', '--limit-mm-per-prompt', 'image=50'], { name: 'router (50 URLs)' });
  try {
    await sleep(2000);
    const before = r.proc.rss()!;
    const peak = new Peak(r.proc);
    const res = await request(r.url, withImages(Array.from({ length: 50 }, (_, i) => `http://127.0.0.1:${port}/${i}.png`)), { timeoutMs: 60_000 });
    await sleep(3000);
    const max = peak.stop();
    await sleep(5000);
    const after = r.proc.rss()!;
    const defaultLimit = await startRouter(['--worker-urls', workerUrl, '--allow-private-media-hosts'], { name: 'router (default image limit)' });
    const servedBefore = served;
    const refused = await request(defaultLimit.url, withImages(Array.from({ length: 50 }, (_, i) => `http://127.0.0.1:${port}/${i}.png`)), {
      timeoutMs: 60_000,
    });
    const servedForDefault = served - servedBefore;
    await defaultLimit.proc.stop();
    t.check(
      res.status === 413 && /above 64\.0 MiB in all \(max_request_image_bytes\)/.test(res.json?.error?.message ?? ''),
      `50 URLs of 19 MiB: ${res.status} ${res.body.slice(0, 200)}`,
    );
    t.check(after - before < 256 * MiB, `the router kept ${bytesText(after - before)} after refusing`);
    t.check(
      refused.status === 400 && servedForDefault === 0,
      `with the default limit of 16 images nothing must be fetched: ${refused.status}, ${servedForDefault} bytes`,
    );
    t.note('status', res.status);
    t.note('message', res.json?.error?.message);
    t.note('fetches_started', requests);
    t.note('mib_served', Math.round(served / MiB));
    t.note('rss_mib', {
      before: Math.round(before / MiB),
      peak: Math.round(max / MiB),
      after_8s: Math.round(after / MiB),
      kept: Math.round((after - before) / MiB),
    });
    t.note('default_limit', { status: refused.status, bytes_fetched: servedForDefault });
    t.summary(
      `50 URLs × 19 MiB (private hosts allowed, limit 50 images): ${res.status} "${res.json?.error?.message}" after ${fmt(served / MiB, 0)} MiB served to the router; RSS ${bytesText(before)} → peak ${bytesText(max)} → ${bytesText(after)} (kept ${bytesText(after - before)}); with the default limit: ${refused.status} before any fetch`,
    );
  } finally {
    await r.proc.stop();
    await new Promise<void>((done) => server.close(() => done()));
  }
}

async function asNobody(t: T): Promise<void> {
  const [thumb] = await makeCorpus(['thumb.png']);
  const w = await startWorker('tokenspeed', ['--user', 'nobody'], { env: { HOME: '/tmp' }, exitWithSuite: false });
  const r = await startRouter(['--worker-urls', w.url, '--multimodal-tensor-transport', 'shm'], { name: 'router (worker as nobody)' });
  try {
    const replies = [];
    for (let i = 0; i < 4; i++) replies.push(await sendChat(r.url, { images: [thumb!], stream: i === 3, body: chatBody([thumb!], { stream: i === 3 }) }));
    const m = await metrics(r.url);
    const fallbacks = metricSum(m, 'smg_mm_shm_read_fallbacks_total');
    t.check(
      replies.every((x) => x.verdict.ok),
      `every request must succeed: ${replies.map((x) => `${x.reply.status} ${x.verdict.problems[0] ?? ''}`)}`,
    );
    t.check(
      replies.every((x) => !x.verdict.paths.shm),
      `a worker that cannot read our files gets tensors inline: ${replies.map((x) => JSON.stringify(x.verdict.paths))}`,
    );
    t.check(fallbacks === 1, `the first request is retried inline, counted once: ${fallbacks}`);
    t.check(ourFiles('/dev/shm').length === 0, 'files left in /dev/shm');
    t.note(
      'statuses',
      replies.map((x) => x.reply.status),
    );
    t.note('read_fallbacks', fallbacks);
    const correctInline = replies.filter((x) => x.verdict.ok && !x.verdict.paths.shm).length;
    t.summary(
      `worker as nobody, router in mode shm: ${replies.map((x) => x.reply.status).join('/')}, ${correctInline}/${replies.length} with every tensor inline and the right fingerprints, smg_mm_shm_read_fallbacks_total ${fallbacks}; files left ${ourFiles('/dev/shm').length}`,
    );
  } finally {
    await r.proc.stop();
    await w.proc.stop();
  }
}

async function twoRouters(t: T): Promise<void> {
  const [thumb] = await makeCorpus(['thumb.png']);
  // The worker holds every request this long before it reads (and unlinks) its files, so A's
  // files are still in flight, whatever they look like to B, for as long as B takes to start.
  const delayMs = 12_000;
  const w = await startWorker('tokenspeed', ['--delay-ms', String(delayMs)]);
  const ns = ['unshare', '--pid', '--fork', '--kill-child=SIGTERM', '--mount-proc'];
  // What is checked is the request files in flight; both routers are SIGKILLed at the end, and a
  // pixel cache's entries from another pid namespace stay 5 minutes after its heartbeat stops
  // (cache/crash-restart covers that), so these two run without one and leave nothing.
  const flags = ['--worker-urls', w.url, '--multimodal-tensor-transport', 'shm', '--multimodal-shm-min-bytes', '0', '--multimodal-pixel-cache-mb', '0'];
  const a = await startRouter(flags, { prefix: ns, exitWithSuite: false, name: 'router A (pid ns)' });
  try {
    const sentAt = performance.now();
    const inFlight = Array.from({ length: 3 }, () => sendChat(a.url, { images: [thumb!], stream: false, body: chatBody([thumb!]) }));
    await until(() => ourFiles('/dev/shm', 1).length >= 3, 3000, 20);
    const filesOfA = ourFiles('/dev/shm', 1).map((f) => f.name);
    const b = await startRouter(flags, { prefix: ns, exitWithSuite: false, name: 'router B (pid ns)' });
    try {
      const stillThere = ourFiles('/dev/shm', 1).filter((f) => filesOfA.includes(f.name)).length;
      const bStartedAfterMs = performance.now() - sentAt;
      const bSweep = /\/dev\/shm orphan sweep: .*/.exec(b.proc.output())?.[0];
      const fromB = Array.from({ length: 3 }, () => sendChat(b.url, { images: [thumb!], stream: false, body: chatBody([thumb!]) }));
      const all = await Promise.all([...inFlight, ...fromB]);
      const failures = all.filter((x) => !x.verdict.ok || !x.verdict.paths.shm).length;
      // Only while the worker still holds A's requests does a missing file mean B's sweep took it.
      t.check(
        bStartedAfterMs < delayMs - 1000,
        `router B took ${fmt(bStartedAfterMs / 1000)} s to start, past the worker's ${delayMs / 1000} s hold of A's requests: the check cannot tell B's sweep from A's requests finishing`,
      );
      t.check(
        filesOfA.length > 0 && stillThere === filesOfA.length,
        `B's start-up sweep must leave A's ${filesOfA.length} in-flight files: ${stillThere} left`,
      );
      t.check(bSweep === undefined || !/removed/.test(bSweep), `B's start-up sweep removed files: ${bSweep}`);
      t.check(
        failures === 0,
        `${failures} of ${all.length} requests failed or went inline: ${all.map((x) => `${x.reply.status} ${JSON.stringify(x.verdict.paths)} ${x.verdict.problems[0] ?? ''}`)}`,
      );
      const left = ourFiles('/dev/shm', 1).length;
      t.check(left === 0, `${left} files left`);
      t.note('worker_delay_ms', delayMs);
      t.note('b_ready_after_ms', Math.round(bStartedAfterMs));
      t.note('b_sweep_line', bSweep ?? null);
      t.note('files_of_a_in_flight', filesOfA.length);
      t.note('kept_by_b_sweep', stillThere);
      t.note('failures', failures);
      t.summary(
        `two routers, each pid 1 of its own pid namespace, one /dev/shm: B ready ${fmt(bStartedAfterMs / 1000)} s after A's requests were sent (the worker holds them ${delayMs / 1000} s); B's start-up sweep kept A's ${stillThere}/${filesOfA.length} in-flight files${bSweep ? ` (it said "${bSweep}")` : ', removed nothing'}; ${all.length - failures}/${all.length} requests correct through SHM; files left ${left}`,
      );
    } finally {
      await b.proc.stop('SIGKILL');
    }
  } finally {
    await a.proc.stop('SIGKILL');
  }
}

/**
 * bench:memory's measurement: its worker does not hash tensors (--no-fingerprint). With the
 * default hashing worker, 128 concurrent 1080p requests keep its event loop busy long enough
 * that its HealthCheck misses the 3 s probe timeout, and the router takes it out for a health
 * interval: the requests meanwhile get 503 (docs/reliability.md, "Findings").
 */
async function clients128(t: T): Promise<void> {
  const [hd] = await makeCorpus(['fullhd.jpg']);
  const body = chatBody([hd!], { maxTokens: 8 });
  const worker = await startWorker('tokenspeed', ['--no-fingerprint'], { name: 'no fingerprint' });
  const r = await startRouter(['--worker-urls', worker.url, '--multimodal-tensor-transport', 'auto'], { name: 'router (128 × 1080p)' });
  try {
    for (let i = 0; i < 8; i++) await request(r.url, body);
    await sleep(10_000);
    const warmIdle = r.proc.rss()!;
    const peak = new Peak(r.proc, 100);
    const statuses: Record<string, number> = {};
    await Promise.all(
      Array.from({ length: 128 }, async () => {
        for (let k = 0; k < 3; k++) {
          const res = await request(r.url, body, { timeoutMs: 300_000 });
          statuses[res.status] = (statuses[res.status] ?? 0) + 1;
        }
      }),
    );
    const max = peak.stop();
    await sleep(60_000);
    const idle = r.proc.rss()!;
    const bound = warmIdle + 128 * 3 * MiB + 1024 * MiB;
    t.check((statuses['200'] ?? 0) === 384, `every request must succeed: ${JSON.stringify(statuses)}`);
    t.check(max <= bound, `peak RSS ${bytesText(max)} above base + budget ${bytesText(bound)}`);
    t.check(idle <= 2 * warmIdle, `after 60 s idle RSS ${bytesText(idle)} is above 2 × warm idle ${bytesText(2 * warmIdle)}`);
    t.note('statuses', statuses);
    t.note('rss_mib', {
      warm_idle: Math.round(warmIdle / MiB),
      peak: Math.round(max / MiB),
      after_60s_idle: Math.round(idle / MiB),
      bound: Math.round(bound / MiB),
    });
    t.note('worker', '--no-fingerprint, as bench:memory');
    t.summary(
      `128 clients × 3 requests of one 1080p JPEG (worker --no-fingerprint): ${JSON.stringify(statuses)}; RSS warm idle ${bytesText(warmIdle)} → peak ${bytesText(max)} (base + budget ${bytesText(bound)}) → ${bytesText(idle)} after 60 s idle`,
    );
  } finally {
    await r.proc.stop();
    await worker.proc.stop();
  }
}
