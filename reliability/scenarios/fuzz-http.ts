// Fuzzing through real processes: OpenAI chat bodies and image inputs through `mmtc serve`'s
// router, console contract inputs through its HTTP binding, and Generate requests straight to
// the reference workers over gRPC. Seeded, bounded in count and time. No crash (the process
// answers /health after every batch), no hang (every request has a deadline), every
// rejection a clear error with the right status, every 200 carrying the right tensors,
// nothing left in /dev/shm and nothing written outside it (the processes run in an empty
// directory that must stay empty).
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { commands, COMMAND_NAMES, WireErrorSchema } from '../../core/console/contract.ts';
import { parseConfigYaml } from '../../core/config/yaml.ts';
import type { EngineFailure, EngineRequest, PreparedImage } from '../../core/engines/engine.ts';
import { resolveSampling } from '../../core/engines/sampling.ts';
import { engineFor } from '../../core/engines/table.ts';
import { decodeToRgb } from '../../core/multimodal/decode.ts';
import { familyById, asQwenConfig } from '../../core/multimodal/families/index.ts';
import { loadModelDirectory } from '../../core/multimodal/model-dir.ts';
import { buildPrompt } from '../../core/multimodal/prompt.ts';
import { preprocessRgb } from '../../core/multimodal/qwen-vl.ts';
import { encodeFloat32As } from '../../core/transport/dtype.ts';
import { fnv1a64Hex } from '../../core/util/fnv.ts';
import { ShmRequestScope, ShmWriter } from '../../core/transport/shm-writer.ts';
import { parseWorkerReport } from '../lib/images.ts';
import { consoleCall, get, request, type Reply } from '../lib/http.ts';
import { startServe, startWorker, type Serve, type Worker } from '../lib/procs.ts';
import { mutate, nastyValue, type Rng } from '../lib/rng.ts';
import { ourFiles } from '../lib/shm.ts';
import { fmt, bytesText, MiB, type Suite, type T } from '../lib/suite.ts';
import { tempDir } from '../lib/tmp.ts';
import { imageBank, imageCase, loopbackOnly, openaiCase, validContractInput, type ContractState } from '../fuzz/inputs.ts';

const model = await loadModelDirectory();

/** What the encoder bytes of `bytes` must fingerprint to, per runtime, or why they cannot be decoded. */
async function expectedEncoder(bytes: Buffer): Promise<{ bf16: string; f32: string } | { error: string }> {
  try {
    const rgb = await decodeToRgb(bytes);
    const p = preprocessRgb(rgb.rgb, rgb.width, rgb.height, asQwenConfig(model.imageConfig), { float32: true, bf16: false });
    const pv = p.pixelValues!;
    return { f32: fnv1a64Hex(new Uint8Array(pv.buffer, pv.byteOffset, pv.byteLength)), bf16: fnv1a64Hex(encodeFloat32As('bfloat16', pv)) };
  } catch (err) {
    return { error: (err as Error).message };
  }
}

function encoderFnv(content: string | undefined): { runtime: string; fnv?: string } | undefined {
  const report = content === undefined ? undefined : parseWorkerReport(content);
  const t = report?.tensors.find((x) => x.name === 'encoder_input' || x.name === 'pixel_values');
  return t ? { runtime: t.name === 'pixel_values' ? 'vllm' : 'tokenspeed', ...(t.fnv1a ? { fnv: t.fnv1a } : {}) } : undefined;
}

/** An OpenAI error body: {error: {message, type, param, code}} with a message that says something. */
function openAiErrorProblem(r: Reply): string | undefined {
  const e = r.json?.error;
  if (!e || typeof e.message !== 'string' || e.message.length < 5 || typeof e.type !== 'string' || !('param' in e) || !('code' in e))
    return `not an OpenAI error body: ${r.body.slice(0, 200)}`;
  if (/internal error|undefined|\[object Object\]|TypeError|RangeError|ReferenceError/.test(e.message)) return `an unclear message: ${e.message.slice(0, 200)}`;
  return undefined;
}

interface Tally {
  statuses: Record<string, number>;
  labels: Record<string, number>;
  bad: string[];
  ms: number[];
}
const newTally = (): Tally => ({ statuses: {}, labels: {}, bad: [], ms: [] });
function count(t: Tally, status: number | string, label: string, ms: number): void {
  t.statuses[String(status)] = (t.statuses[String(status)] ?? 0) + 1;
  t.labels[`${label} → ${status}`] = (t.labels[`${label} → ${status}`] ?? 0) + 1;
  t.ms.push(ms);
}

async function inBatches<X>(items: number, concurrency: number, deadline: number, fn: (i: number) => Promise<X>): Promise<number> {
  let next = 0;
  let done = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < items && performance.now() < deadline) {
        const i = next++;
        await fn(i);
        done += 1;
      }
    }),
  );
  return done;
}

export async function httpFuzzGroup(suite: Suite): Promise<void> {
  const names = ['openai', 'images', 'contract', 'generate'];
  await suite.group('fuzz', names, async () => {
    const cwd = tempDir('cwd');
    const dir = tempDir('fuzz');
    const file = path.join(dir, 'router.yaml');
    const ts = await startWorker('tokenspeed', [], { cwd });
    const vllm = await startWorker('vllm', [], { cwd });
    writeFileSync(
      file,
      `# fuzzing\nmultimodal_tensor_transport: auto\nhealth_check_interval_secs: 1\nrequest_timeout_secs: 60\nworkers:\n  - url: ${ts.url}\n  - url: ${vllm.url}\n`,
    );
    const serve = await startServe(['--config', file], { cwd, env: { XDG_CONFIG_HOME: dir }, name: 'serve (fuzz)' });
    const n = (short: number, full: number) => (suite.short ? short : full);
    const common = async (t: T, tally: Tally) => {
      const h = await get(serve.routerUrl, '/health', { timeoutMs: 10_000 });
      t.check(serve.proc.alive() && h.status === 200, `the router must still be up and healthy: ${h.status} ${h.neterr ?? ''}`);
      t.check(ourFiles('/dev/shm').length === 0, `files left in /dev/shm: ${ourFiles('/dev/shm').length}`);
      t.check(readdirSync(cwd).length === 0, `something was written in the processes' working directory: ${readdirSync(cwd)}`);
      for (const b of tally.bad.slice(0, 10)) t.check(false, b);
      t.note('statuses', tally.statuses);
      t.note('by_kind', tally.labels);
      t.note('slowest_ms', Math.round(Math.max(0, ...tally.ms)));
      t.note('router_rss_mib', Math.round((serve.proc.rss() ?? 0) / MiB));
    };
    try {
      await suite.run('fuzz/openai', (t) => openaiFuzz(t, serve, n(200, 2000), n(30, 180), common), { seeded: true, maxSeconds: n(30, 180) + 90 });
      await suite.run('fuzz/images', (t) => imagesFuzz(t, serve, n(150, 1500), n(45, 240), common), { seeded: true, maxSeconds: n(45, 240) + 90 });
      await suite.run('fuzz/contract', (t) => contractFuzz(t, serve, file, ts, n(250, 2500), n(30, 180), common), {
        seeded: true,
        maxSeconds: n(30, 180) + 90,
      });
      await suite.run('fuzz/generate', (t) => generateFuzz(t, [ts, vllm], n(300, 3000), n(30, 180)), { seeded: true, maxSeconds: n(30, 180) + 60 });
    } finally {
      await serve.proc.stop();
    }
  });
}

async function openaiFuzz(t: T, serve: Serve, cases: number, seconds: number, common: (t: T, tally: Tally) => Promise<void>): Promise<void> {
  const img = await (
    await import('sharp')
  )
    .default({ create: { width: 96, height: 64, channels: 3, background: '#3a7' } })
    .png()
    .toBuffer();
  const url = `data:image/png;base64,${img.toString('base64')}`;
  const expected = await expectedEncoder(img);
  const tally = newTally();
  const tried = await inBatches(cases, 4, performance.now() + seconds * 1000, async (i) => {
    const c = openaiCase(t.rng.fork(i), i, url);
    const r = await request(serve.routerUrl, Buffer.isBuffer(c.body) ? c.body : Buffer.from(c.body), {
      method: c.method ?? 'POST',
      path: c.path ?? '/v1/chat/completions',
      headers: c.headers ?? {},
      timeoutMs: 60_000,
    });
    count(tally, r.status || r.neterr!, c.label, r.ms);
    const where = `case ${i} (${c.label}): ${Buffer.from(c.body).toString().slice(0, 160)}`;
    if (r.status === 200) {
      const got = encoderFnv(r.content);
      if (c.baseImage && 'f32' in expected && got && got.fnv !== (got.runtime === 'vllm' ? expected.f32 : expected.bf16))
        tally.bad.push(`${where}: a 200 with the wrong tensor (${got.fnv})`);
      if (r.streamError) tally.bad.push(`${where}: a stream ended with an error: ${r.streamError}`);
    } else if ([400, 404, 413].includes(r.status)) {
      const p = openAiErrorProblem(r);
      if (p) tally.bad.push(`${where}: ${r.status} ${p}`);
    } else tally.bad.push(`${where}: answered ${r.status || r.neterr}: ${r.body.slice(0, 200)}`);
  });
  await common(t, tally);
  t.note('tried', tried);
  t.summary(
    `${tried} bodies: ${Object.entries(tally.statuses)
      .map(([s, k]) => `${k}× ${s}`)
      .join(', ')}; ${tally.bad.length} wrong answers; slowest ${fmt(Math.max(0, ...tally.ms), 0)} ms; router RSS ${bytesText(serve.proc.rss())}`,
  );
}

async function imagesFuzz(t: T, serve: Serve, cases: number, seconds: number, common: (t: T, tally: Tally) => Promise<void>): Promise<void> {
  const bank = await imageBank();
  const tally = newTally();
  let checked = 0;
  const rssPeak = { v: 0 };
  const sampler = setInterval(() => (rssPeak.v = Math.max(rssPeak.v, serve.proc.rss() ?? 0)), 100);
  const tried = await inBatches(cases, 3, performance.now() + seconds * 1000, async (i) => {
    const rng = t.rng.fork(i);
    const c = imageCase(rng, i, bank);
    // Now and then the case's image goes second, after a good one: errors must name the right index.
    const second = rng.chance(0.25);
    const good = `data:image/png;base64,${bank['rgb.png']!.toString('base64')}`;
    const body = loopbackOnly({
      messages: [
        {
          role: 'user',
          content: [
            ...(second ? [{ type: 'image_url', image_url: { url: good } }] : []),
            { type: 'image_url', image_url: { url: c.url } },
            { type: 'text', text: 'x' },
          ],
        },
      ],
    });
    const r = await request(serve.routerUrl, JSON.stringify(body), { timeoutMs: 90_000 });
    count(tally, r.status || r.neterr!, c.label, r.ms);
    const where = `case ${i} (${c.label})`;
    const index = second ? 1 : 0;
    if (r.status === 200) {
      if (!c.bytes) return void tally.bad.push(`${where}: accepted something that is not an image`);
      const want = await expectedEncoder(c.bytes);
      const report = r.content === undefined ? undefined : parseWorkerReport(r.content);
      const tensors = report?.tensors.filter((x) => x.name.startsWith('encoder_input') || x.name === 'pixel_values') ?? [];
      if ('error' in want) return void tally.bad.push(`${where}: the router took an image our own decode refuses (${want.error})`);
      if (tensors.length === 0) return void tally.bad.push(`${where}: no encoder tensor in the answer: ${String(r.content).slice(0, 200)}`);
      const mine = tensors.find((x) => x.name === `encoder_input[${index}]` || (!second && x.name === 'encoder_input'));
      if (mine) {
        checked += 1;
        if (mine.fnv1a !== want.bf16) tally.bad.push(`${where}: a 200 with a corrupted tensor (${mine.fnv1a} != ${want.bf16})`);
      } else if (tensors[0]!.name === 'pixel_values' && !second) {
        checked += 1;
        if (tensors[0]!.fnv1a !== want.f32) tally.bad.push(`${where}: a 200 with a corrupted tensor (${tensors[0]!.fnv1a} != ${want.f32})`);
      }
    } else if (r.status === 400 || r.status === 413) {
      const p = openAiErrorProblem(r);
      if (p) return void tally.bad.push(`${where}: ${r.status} ${p}`);
      const msg = r.json.error.message as string;
      const param = r.json.error.param as string | null;
      if (!msg.startsWith(`image ${index}:`) && !/pixels in all|images are above/.test(msg))
        tally.bad.push(`${where}: the error does not name image ${index}: ${msg.slice(0, 160)}`);
      else if (msg.startsWith('image') && param !== `messages[0].content[${index}].image_url.url`)
        tally.bad.push(`${where}: the error's param is ${param}, not image ${index}'s URL`);
    } else tally.bad.push(`${where}: answered ${r.status || r.neterr}: ${r.body.slice(0, 200)}`);
  });
  clearInterval(sampler);
  await common(t, tally);
  const bound = 1024 * MiB + 800 * MiB;
  t.check(rssPeak.v <= bound, `router RSS peaked at ${bytesText(rssPeak.v)} (bound ${bytesText(bound)}: preprocess_memory_bytes + 800 MiB)`);
  t.note('tried', tried);
  t.note('fingerprints_checked', checked);
  t.note('router_rss_peak_mib', Math.round(rssPeak.v / MiB));
  t.summary(
    `${tried} image inputs: ${Object.entries(tally.statuses)
      .map(([s, k]) => `${k}× ${s}`)
      .join(
        ', ',
      )}; ${checked} accepted images' tensors checked against our own decode; ${tally.bad.length} wrong answers; router RSS peak ${bytesText(rssPeak.v)}`,
  );
}

const STATUS_OF: Record<string, number> = {
  invalid_input: 400,
  invalid_config: 422,
  conflict: 409,
  restart_required: 409,
  file_drift: 409,
  not_found: 404,
  unauthorized: 401,
  forbidden: 403,
  busy: 429,
};

async function contractFuzz(
  t: T,
  serve: Serve,
  file: string,
  ts: Worker,
  cases: number,
  seconds: number,
  common: (t: T, tally: Tally) => Promise<void>,
): Promise<void> {
  const tally = newTally();
  const call = (command: string, input: unknown, headers: Record<string, string> = {}) => consoleCall(serve.consoleUrl, serve.token, command, input, headers);
  const original = (await call('config.get', {})).json;
  let state: ContractState = { revision: original.revision, config: original.config, workerUrl: ts.url };
  const refresh = async () => {
    const v = (await call('config.get', {})).json;
    state = { revision: v.revision, config: v.config, workerUrl: ts.url };
  };
  let skipped = 0;
  const tried = await inBatches(cases, 2, performance.now() + seconds * 1000, async (i) => {
    const rng: Rng = t.rng.fork(i);
    const command = rng.chance(0.03) ? rng.pick(['no.such.command', '__proto__', 'overview/../config.get', '']) : rng.pick(COMMAND_NAMES);
    let input: unknown = validContractInput(command, state, rng);
    const r0 = rng.next();
    if (r0 < 0.65) for (let k = rng.int(1, 3); k > 0; k--) input = mutate(input, rng);
    else if (r0 < 0.75) input = nastyValue(rng);
    input = loopbackOnly(input);
    // The server resolves the path as a URL does (`overview/../config.get` is config.get).
    const resolved = new URL(`/api/${command}`, 'http://console').pathname.slice('/api/'.length);
    const known = Object.hasOwn(commands, resolved);
    if (known && (resolved === 'transport.calibrate' || resolved === 'traffic.sendTestRequest')) {
      // Only refusals of these: a valid calibration runs for seconds, a valid test request is covered by the load scenarios.
      const parsed = (commands as Record<string, { input: { safeParse(v: unknown): { success: boolean; data?: unknown } } }>)[resolved]!.input.safeParse(
        input ?? {},
      );
      if (
        parsed.success &&
        (resolved === 'transport.calibrate' || (parsed.data as { width: number }).width * (parsed.data as { height: number }).height > 250_000)
      ) {
        skipped += 1;
        return;
      }
    }
    const raw = rng.chance(0.05);
    const body = raw ? rng.pick(['{', 'null', '[]', '"x"', '{"a":' + '['.repeat(10_000)]) : JSON.stringify(input ?? null);
    const r = await consoleCall(serve.consoleUrl, serve.token, command, body, rng.chance(0.03) ? { 'content-type': 'text/plain' } : {});
    count(tally, r.status || r.neterr!, raw ? 'raw body' : known ? command : 'unknown command', r.ms);
    const where = `case ${i} ${command} ${body.slice(0, 200)}`;
    if (r.status === 200) {
      const out = known
        ? (commands as Record<string, { output: { safeParse(v: unknown): { success: boolean } } }>)[resolved]!.output.safeParse(r.json)
        : { success: false };
      if (!out.success) tally.bad.push(`${where}: a 200 whose body is not the contract's output`);
      if (/apply|rollback|reload|workers\.(add|update|remove)/.test(command)) await refresh();
      return;
    }
    const wire = WireErrorSchema.safeParse(r.json);
    if (!wire.success) return void tally.bad.push(`${where}: answered ${r.status || r.neterr} without a contract error: ${r.body.slice(0, 200)}`);
    const e = wire.data.error;
    if (e.code === 'internal') return void tally.bad.push(`${where}: an internal error: ${e.message.slice(0, 300)}`);
    if (r.status !== 415 && STATUS_OF[e.code] !== r.status) tally.bad.push(`${where}: code ${e.code} with status ${r.status}`);
    if (e.message.length < 5 || /\[object Object\]|TypeError|RangeError|ReferenceError/.test(e.message))
      tally.bad.push(`${where}: an unclear message: ${e.message}`);
    if (e.code === 'conflict') await refresh();
  });
  // Put the configuration back and check the state is whole: the file parses and holds it, the history loads.
  await refresh();
  const restore = await call('config.apply', { draft: original.config, expectedRevision: state.revision });
  const back = (await call('config.get', {})).json;
  const onDisk = parseConfigYaml(readFileSync(file, 'utf8'), file).config;
  const history = await call('config.history', {});
  t.check(
    restore.status === 200 || (restore.status === 409 && restore.json?.error?.code === 'file_drift'),
    `restoring the original config: ${restore.status} ${restore.body.slice(0, 200)}`,
  );
  t.check(
    JSON.stringify(back.config.workers.map((w: { url: string }) => w.url)) === JSON.stringify(original.config.workers.map((w: { url: string }) => w.url)),
    'the workers are not back',
  );
  t.check(
    JSON.stringify(onDisk.workers.map((w) => w.url)) === JSON.stringify(original.config.workers.map((w: { url: string }) => w.url)) &&
      back.file.drifted === false,
    'the file does not hold the restored config',
  );
  t.check(history.status === 200 && history.json.entries.length > 0, 'the history does not load');
  t.check(back.revision >= original.revision, 'the revision went backwards');
  await common(t, tally);
  t.note('tried', tried);
  t.note('skipped_valid_heavy', skipped);
  t.note('revisions', { start: original.revision, end: back.revision });
  t.summary(
    `${tried} command inputs: ${Object.entries(tally.statuses)
      .map(([s, k]) => `${k}× ${s}`)
      .join(
        ', ',
      )}; ${tally.bad.length} wrong answers (500s, bodies off the contract, codes off their status); ${back.revision - original.revision} revisions applied meanwhile, config restored, file and history whole`,
  );
}

/** Generate requests built by the router's own engines, then broken one field at a time, straight to the reference workers. */
async function generateFuzz(t: T, workers: Worker[], cases: number, seconds: number): Promise<void> {
  const sharp = (await import('sharp')).default;
  const imgs = await Promise.all(
    [
      [120, 90],
      [64, 200],
    ].map(([w, h]) =>
      sharp({ create: { width: w!, height: h!, channels: 3, background: '#8a4' } })
        .png()
        .toBuffer(),
    ),
  );
  const prepared: PreparedImage[] = [];
  for (const b of imgs) {
    const rgb = await decodeToRgb(b);
    const p = preprocessRgb(rgb.rgb, rgb.width, rgb.height, asQwenConfig(model.imageConfig), { float32: true, bf16: true });
    prepared.push({
      pixelValues: p.pixelValues!,
      bf16: p.bf16!,
      patches: p.patches,
      features: p.features,
      encoderShape: familyById(model.family).encoderShape(p, model.imageConfig),
      modelTensors: familyById(model.family).imageTensors(p),
      placeholder: { offset: 0, length: p.tokens },
      mediaHash: Buffer.alloc(32, 1),
    });
  }
  const built = buildPrompt(
    model,
    [
      {
        role: 'user',
        content: [
          { type: 'image_url', image_url: { url: 'mmtc:loaded' } },
          { type: 'image_url', image_url: { url: 'mmtc:loaded' } },
          { type: 'text', text: 'x' },
        ],
      },
    ],
    prepared.map((p) => p.placeholder.length),
  );
  built.placeholders.forEach((r, i) => (prepared[i]!.placeholder = r));
  const writer = new ShmWriter({ dir: '/dev/shm' });
  const statuses: Record<string, number> = {};
  const bad: string[] = [];
  const rssStart = workers.map((w) => w.proc.rss() ?? 0);
  const rssPeak = workers.map(() => 0);
  const sampler = setInterval(() => workers.forEach((w, k) => (rssPeak[k] = Math.max(rssPeak[k]!, w.proc.rss() ?? 0))), 100);
  const connections = workers.map((w) => engineFor(w.url === workers[0]!.url ? 'tokenspeed' : 'vllm').connect(w.url));
  const deadline = performance.now() + seconds * 1000;
  let tried = 0;
  try {
    for (let i = 0; i < cases && performance.now() < deadline; i++) {
      const rng = t.rng.fork(i);
      const k = rng.int(0, 1);
      const runtime = k === 0 ? 'tokenspeed' : 'vllm';
      const images = rng.chance(0.5) ? prepared : [prepared[0]!];
      const req: EngineRequest = {
        requestId: `fuzz-${i}`,
        text: built.text,
        inputIds: images.length === 2 ? built.inputIds : built.inputIds.slice(0, prepared[0]!.placeholder.offset + prepared[0]!.placeholder.length + 1),
        images,
        imageTokenId: model.imageTokenId,
        sampling: resolveSampling({ maxTokens: 16 }, {}, () => undefined),
        stream: rng.chance(0.5),
        encoderDtype: runtime === 'tokenspeed' ? 'bfloat16' : 'float32',
        encoderReadWrite: runtime === 'tokenspeed',
      };
      const scope = new ShmRequestScope();
      const wire = await engineFor(runtime).buildRequest(req, {
        requestId: req.requestId,
        revision: 1,
        source: 'api',
        worker: workers[k]!.url,
        runtime,
        decision: { shmEnabled: false, reason: 'mode_inline', worker: workers[k]!.url },
        minBytes: 0,
        writer,
        scope,
      });
      const what = breakRequest(rng, wire.message as Record<string, unknown>, runtime);
      const result = await new Promise<{ ok: true } | { ok: false; failure: EngineFailure }>((resolve) => {
        connections[k]!.generate(
          wire,
          { deadline: Date.now() + 20_000 },
          { event() {}, failure: (failure) => resolve({ ok: false, failure }), end: () => resolve({ ok: true }) },
        );
      });
      tried += 1;
      const status = result.ok ? 'OK' : result.failure.status;
      statuses[`${runtime} ${status}`] = (statuses[`${runtime} ${status}`] ?? 0) + 1;
      // The real servicers answer a few broken requests with INTERNAL, in Python's words (an
      // IndexError, a KeyError, the TokenSpeed scheduler's exception): so does the reference
      // worker, which judges as they do. Any other INTERNAL is a bug of the worker's.
      const servicersOwn = !result.ok && result.failure.status === 'INTERNAL' && SERVICER_INTERNAL.test(result.failure.details);
      if (!result.ok && result.failure.status !== 'INVALID_ARGUMENT' && !servicersOwn)
        bad.push(`case ${i} (${runtime}, ${what}): ${result.failure.status}: ${result.failure.details.slice(0, 200)}`);
      if (!result.ok && result.failure.status === 'INVALID_ARGUMENT' && result.failure.details.length < 10)
        bad.push(`case ${i} (${runtime}, ${what}): an unclear refusal: ${result.failure.details}`);
      // A broken request the worker accepts is a failure. (Until this suite found them, an image
      // with no placeholder range and a tensor whose dtype its role does not allow were accepted:
      // docs/reliability.md, "Bugs the suite found".)
      if (result.ok && what !== 'valid' && !/harmless/.test(what)) bad.push(`case ${i} (${runtime}, ${what}): accepted`);
      if (!result.ok && what === 'valid')
        bad.push(`case ${i} (${runtime}): a valid request was refused: ${result.failure.status}: ${result.failure.details.slice(0, 200)}`);
    }
  } finally {
    clearInterval(sampler);
    for (const c of connections) c.close();
  }
  const health = await Promise.all(
    connections
      .map((_, k) => engineFor(k === 0 ? 'tokenspeed' : 'vllm').connect(workers[k]!.url))
      .map(async (c) => {
        try {
          return (await c.health(5000)).healthy;
        } catch {
          return false; // no answer within 5 s: not healthy, which the check below fails
        } finally {
          c.close();
        }
      }),
  );
  for (const b of bad.slice(0, 10)) t.check(false, b);
  t.check(workers.every((w) => w.proc.alive()) && health.every(Boolean), `the workers must be alive and healthy after the fuzz: ${health}`);
  t.check(
    rssPeak.every((p, k) => p - rssStart[k]! < 512 * MiB),
    `a worker's RSS grew by more than 512 MiB: ${rssPeak.map((p, k) => bytesText(p - rssStart[k]!))}`,
  );
  t.check(ourFiles('/dev/shm').length === 0, 'files left in /dev/shm');
  t.note('tried', tried);
  t.note('statuses', statuses);
  t.note(
    'worker_rss_mib',
    workers.map((_, k) => ({ start: Math.round(rssStart[k]! / MiB), peak: Math.round(rssPeak[k]! / MiB) })),
  );
  t.summary(
    `${tried} Generate requests: ${Object.entries(statuses)
      .map(([s, c]) => `${c}× ${s}`)
      .join(
        ', ',
      )}; ${bad.length} not refused as the servicers refuse them (INVALID_ARGUMENT, or their own INTERNAL words); workers healthy ${health.every(Boolean)}, RSS peak ${rssPeak.map((p) => bytesText(p)).join('/')}`,
  );
}

type Msg = Record<string, any>;

/** Break one thing in a built request (or nothing: `valid`); says what. Values stay in their protobuf field's range. */
/** The INTERNAL errors the gateway's servicers raise themselves for a broken request (core/refworker/vllm.ts, shm-reader.ts attach). */
const SERVICER_INTERNAL = /^(list index out of range \(IndexError|'[A-Za-z_]+' \(KeyError|Scheduler hit an exception: )/;

function breakRequest(rng: Rng, m: Msg, runtime: 'tokenspeed' | 'vllm'): string {
  const u32 = () => rng.pick([0, 1, 2, 3, 7, 255, 65_535, 2 ** 31, 2 ** 32 - 1]);
  const tensors: Msg[] = [];
  if (runtime === 'tokenspeed') for (const item of m.mmInputs?.items ?? []) tensors.push(item.encoderInput, ...Object.values(item.modelSpecificTensors as Msg));
  else if (m.mmInputs) tensors.push(m.mmInputs.pixelValues, ...Object.values(m.mmInputs.modelSpecificTensors as Msg));
  const ids: number[] = runtime === 'tokenspeed' ? m.tokenized.inputIds : m.input.value.inputIds;
  const pick = rng.int(0, 17);
  const t = rng.pick(tensors);
  switch (pick) {
    case 0:
      return 'valid';
    case 1: {
      const before = t.shape.reduce((a: number, b: number) => a * b, 1);
      t.shape = Array.from({ length: rng.int(0, 3) }, u32);
      const same = t.shape.reduce((a: number, b: number) => a * b, 1) === before && t !== tensors[0];
      return `shape ${JSON.stringify(t.shape)}${same ? ' (harmless: same size, not the encoder input)' : ''}`;
    }
    case 2: {
      const before = t.dtype;
      t.dtype = rng.pick(['', 'float64', 'int8', 'bool', 'complex64', 'FLOAT32', 'uint32', 'int64', 'bfloat16', 'x'.repeat(300)]);
      return `dtype ${t.dtype.slice(0, 20)}${t.dtype === before ? ' (harmless: unchanged)' : ''}`;
    }
    case 3:
      if (t.payload?.$case === 'inline') t.payload.value = t.payload.value.subarray(0, rng.int(0, Math.max(0, t.payload.value.length - 1)));
      return 'inline bytes cut';
    case 4:
      t.payload = undefined;
      return 'no payload';
    case 5:
      t.payload = {
        $case: 'shm',
        value: {
          name: rng.pick(['', '..', '../../etc/passwd', 'smg-tokenspeed-1-1-1', '/dev/shm/x', 'a\u0000b', 'x'.repeat(4000)]),
          offset: BigInt(rng.pick([0, 2 ** 53 - 1, 1])),
          nbytes: BigInt(rng.pick([0, 2 ** 40, 2 ** 53 - 1, 16])),
          ownerId: 'smg:1',
        },
      };
      return `shm handle ${JSON.stringify(t.payload.value, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v)).slice(0, 80)}`;
    case 6:
      t.payload = { $case: 'remote', value: { transport: 'rdma', descriptor: Buffer.alloc(4), nbytes: 16n } };
      return 'remote payload';
    case 7: {
      const grid = tensors.find((x) => x && x.dtype === 'int64' && x.shape.length === 2);
      if (grid?.payload?.$case === 'inline') {
        const values = new BigInt64Array(Uint8Array.from(grid.payload.value).buffer);
        values[rng.int(0, values.length - 1)] = BigInt(rng.pick([0, -1, 3, 99, 2 ** 31, -(2 ** 40)]));
        grid.payload.value = Buffer.from(values.buffer);
      }
      return 'grid values changed';
    }
    case 8: {
      const ph = runtime === 'tokenspeed' ? m.mmInputs?.items?.[0]?.placeholders?.[0] : m.mmInputs?.mmPlaceholders?.[0];
      if (!ph) return 'no placeholder to change (harmless)';
      const before = JSON.stringify(ph);
      ph.offset = u32();
      ph.length = rng.pick([ph.length, u32()]);
      return `placeholder ${JSON.stringify(ph)}${JSON.stringify(ph) === before ? ' (harmless: unchanged)' : ''}`;
    }
    case 9:
      if (runtime === 'tokenspeed' && m.mmInputs?.items?.[0]) m.mmInputs.items[0].placeholderTokenId = u32();
      else if (m.mmInputs) m.mmInputs.imTokenId = u32();
      return 'image token id changed';
    case 10:
      ids.splice(0, ids.length, ...Array.from({ length: rng.int(0, 5) }, u32));
      return 'input ids replaced';
    case 11:
      for (let k = rng.int(1, 5); k > 0; k--) ids[rng.int(0, ids.length - 1)] = u32();
      return 'input ids changed (harmless unless inside a placeholder)';
    case 12:
      if (runtime === 'tokenspeed') m.samplingParams.maxNewTokens = rng.pick([0, 1, 2 ** 32 - 1]);
      else m.samplingParams.maxTokens = rng.pick([0, 1, 2 ** 32 - 1]);
      return 'max tokens (harmless)';
    case 13:
      if (runtime === 'tokenspeed' && m.mmInputs?.items) m.mmInputs.items.push({ ...m.mmInputs.items[0], placeholders: [{ offset: 0, length: 1 }] });
      else if (m.mmInputs) m.mmInputs.mmPlaceholders.push({ offset: 0, length: 1 });
      return 'an extra image';
    case 14:
      if (runtime === 'tokenspeed' && m.mmInputs?.items?.[0]) m.mmInputs.items[0].encoderInput = undefined;
      else if (m.mmInputs) m.mmInputs.pixelValues = undefined;
      return 'no encoder tensor';
    case 15:
      if (runtime === 'tokenspeed' && m.mmInputs?.items?.[0]) m.mmInputs.items[0].modelSpecificTensors = {};
      else if (m.mmInputs) m.mmInputs.modelSpecificTensors = {};
      return 'no grid';
    case 16:
      t.shape = [...t.shape].reverse();
      return t === tensors[0] ? 'encoder shape transposed' : 'side tensor shape transposed (harmless: same size)';
    default:
      if (runtime === 'tokenspeed' && m.mmInputs?.items?.[0]) m.mmInputs.items[0].placeholders = [];
      else if (m.mmInputs) m.mmInputs.mmPlaceholders = [];
      return 'no placeholders';
  }
}
