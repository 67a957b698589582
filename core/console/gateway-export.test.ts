import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { RouterConfigSchema, type RouterConfigInput } from '../config/schema.ts';
import { GatewayExportSchema } from './contract.ts';
import { exportForGateway, shellQuote, type GatewayExport } from './gateway-export.ts';

function exported(input: RouterConfigInput, excludeUrls?: ReadonlySet<string>): GatewayExport {
  const out = exportForGateway(RouterConfigSchema.parse(input), excludeUrls ? { excludeUrls } : undefined);
  // Every answer must cross the console contract as is.
  expect(GatewayExportSchema.parse(out)).toEqual(out);
  return out;
}

/** What a POSIX shell makes of a line: its words, as the program would receive them. */
function shellWords(line: string): string[] {
  const out = execFileSync('sh', ['-c', `for w in ${line}; do printf '%s\\0' "$w"; done`], { encoding: 'utf8' });
  return out.split('\0').slice(0, -1);
}

const typical: RouterConfigInput = {
  model_path: '/models/Qwen2.5-VL-3B',
  policy: 'least_load',
  multimodal_tensor_transport: 'auto',
  multimodal_shm_min_bytes: 1048576,
  workers: [
    { url: 'grpc://10.0.0.5:50051' },
    { url: 'grpc://10.0.0.6:50052', runtime: 'vllm', labels: { zone: 'b' }, priority: 70, multimodal_tensor_transport: 'shm', multimodal_shm_min_bytes: 0 },
  ],
};

describe('exportForGateway', () => {
  it('says which of the command line and the POST /workers bodies to use, and what using both does', () => {
    expect(exported(typical).usage).toBe(
      'Use the command line for the workers whose body adds nothing, and for grpc://10.0.0.6:50052 remove the url from the command and run its curl line once the gateway is up: their bodies carry settings the command line cannot (see the notes). Register each worker one way, not both: a url on the command line and also POSTed is refused the second time ("Worker <url> already exists"), and the worker keeps what the first registration gave it.',
    );
    expect(exported({ workers: [{ url: 'grpc://10.0.0.5:50051' }] }).usage).toMatch(
      /^Use the command line: it registers every worker, and their POST \/workers bodies add nothing the gateway applies\./,
    );
    expect(exported({ workers: [] }).usage).toMatch(/^No worker to register/);
    // A transport override alone is no reason to POST: SMG accepts it and does not apply it.
    expect(exported({ workers: [{ url: 'grpc://10.0.0.5:50051', multimodal_tensor_transport: 'shm' }] }).usage).toMatch(
      /^Use the command line: it registers every worker/,
    );
  });

  it('writes a typical config as one smg launch line with SMG spellings', () => {
    const out = exported(typical);
    expect(out.command).toBe(
      'smg launch --host 127.0.0.1 --port 30000 --model-path /models/Qwen2.5-VL-3B --policy least_load --request-timeout-secs 600 --health-check-interval-secs 10 --max-payload-size 67108864 --multimodal-tensor-transport auto --multimodal-shm-min-bytes 1048576 --worker-urls grpc://10.0.0.5:50051 grpc://10.0.0.6:50052',
    );
    expect(out.argv.slice(0, 2)).toEqual(['smg', 'launch']);
    expect(out.argv.join(' ')).toBe(out.command); // nothing here needs quoting
  });

  it('gives each worker its POST /workers body and a copy-paste curl line', () => {
    const out = exported(typical);
    expect(out.workers.map((w) => w.url)).toEqual(['grpc://10.0.0.5:50051', 'grpc://10.0.0.6:50052']);
    expect(out.workers[0]!.body).toEqual({
      url: 'grpc://10.0.0.5:50051',
      worker_type: 'regular',
      connection_mode: 'grpc',
      runtime_type: 'unspecified',
      priority: 50,
    });
    expect(out.workers[1]!.body).toEqual({
      url: 'grpc://10.0.0.6:50052',
      worker_type: 'regular',
      connection_mode: 'grpc',
      runtime_type: 'vllm',
      priority: 70,
      labels: { zone: 'b' },
      multimodal_tensor_transport: 'shm',
      multimodal_shm_min_bytes: 0,
    });
    expect(out.workers[1]!.curl).toBe(
      `curl -sS -X POST http://127.0.0.1:30000/workers -H 'content-type: application/json' -d '{"url":"grpc://10.0.0.6:50052","worker_type":"regular","connection_mode":"grpc","runtime_type":"vllm","priority":70,"labels":{"zone":"b"},"multimodal_tensor_transport":"shm","multimodal_shm_min_bytes":0}'`,
    );
    const words = shellWords(out.workers[1]!.curl);
    expect(JSON.parse(words[words.length - 1]!)).toEqual(out.workers[1]!.body);
  });

  it('notes what the gateway does differently in the typical config', () => {
    const { notes } = exported(typical);
    expect(notes).toHaveLength(5);
    expect(notes[2]).toMatch(
      /^multimodal_pixel_cache_mb is unset, so the command has no --mm-pixel-cache-mb: the gateway then reads SMG_MM_PIXEL_CACHE_MB .* keeps its pixel cache off, where this router uses 512 MiB\.$/,
    );
    notes.splice(2, 1);
    expect(notes[0]).toMatch(/^policy = 'least_load' is written --policy least_load, but SMG's least_load/);
    expect(notes[1]).toMatch(/^the request limits \(limit_mm_per_prompt, max_request_image_pixels, max_image_bytes, …\) have no smg launch flag/);
    expect(notes[3]).toMatch(
      /^workers\[1\] \(grpc:\/\/10\.0\.0\.6:50052\) labels = \{"zone":"b"\}, priority = 70, runtime = 'vllm' exist only in its POST \/workers body/,
    );
    expect(notes[2]).toMatch(
      /^workers\[1\] \(grpc:\/\/10\.0\.0\.6:50052\) multimodal_tensor_transport = 'shm' and multimodal_shm_min_bytes = 0 are in its POST \/workers body, which SMG accepts, but SMG \(v1\.11\.0\) does not copy/,
    );
    // set at router level: no env note
    expect(notes.join('\n')).not.toMatch(/SMG_MM_(TENSOR|SHM)/);
  });

  it('leaves a defaults-only config without transport flags and says the env decides', () => {
    const out = exported({ workers: [{ url: 'grpc://127.0.0.1:50051' }] });
    expect(out.command).toBe(
      'smg launch --host 127.0.0.1 --port 30000 --policy round_robin --request-timeout-secs 600 --health-check-interval-secs 10 --max-payload-size 67108864 --worker-urls grpc://127.0.0.1:50051',
    );
    expect(out.argv).not.toContain('--multimodal-tensor-transport');
    expect(out.argv).not.toContain('--multimodal-shm-min-bytes');
    expect(out.argv).not.toContain('--model-path');
    expect(out.notes).toEqual([
      expect.stringMatching(/^model_path is unset/),
      expect.stringMatching(/^the request limits \(/),
      'multimodal_tensor_transport is unset, so the command has no --multimodal-tensor-transport: the gateway then reads SMG_MM_TENSOR_TRANSPORT (or the deprecated SMG_TOKENSPEED_MM_TENSOR_TRANSPORT) from its own environment and otherwise uses inline, as this router does.',
      'multimodal_shm_min_bytes is unset, so the command has no --multimodal-shm-min-bytes: the gateway then reads SMG_MM_SHM_MIN_BYTES (or the deprecated SMG_TOKENSPEED_MM_SHM_MIN_BYTES) from its own environment and otherwise uses 65536, as this router does.',
      'multimodal_pixel_cache_mb is unset, so the command has no --mm-pixel-cache-mb: the gateway then reads SMG_MM_PIXEL_CACHE_MB from its own environment and otherwise keeps its pixel cache off, where this router uses 512 MiB.',
    ]);
  });

  it('writes the pixel cache budget as the gateway spells it when it is set', () => {
    const out = exported({ multimodal_pixel_cache_mb: 0, workers: [{ url: 'grpc://a:1' }] });
    expect(out.argv).toEqual(expect.arrayContaining(['--mm-pixel-cache-mb', '0']));
    expect(out.notes.join('\n')).not.toContain('multimodal_pixel_cache_mb');
  });

  it('emits a transport value equal to the default when it is set (set beats the env layer)', () => {
    const out = exported({ multimodal_tensor_transport: 'inline', multimodal_shm_min_bytes: 65536, workers: [{ url: 'grpc://a:1' }] });
    expect(out.command).toContain('--multimodal-tensor-transport inline --multimodal-shm-min-bytes 65536');
    expect(out.notes.join('\n')).not.toMatch(/SMG_MM_(TENSOR|SHM)/);
  });

  it('writes rdma as SMG spells it and notes that the two gateways treat it differently', () => {
    const out = exported({ multimodal_tensor_transport: 'rdma', model_path: '/m', workers: [{ url: 'grpc://a:1' }] });
    expect(out.argv).toEqual(expect.arrayContaining(['--multimodal-tensor-transport', 'rdma']));
    const note = out.notes.find((n) => n.startsWith("multimodal_tensor_transport = 'rdma'"));
    expect(note).toContain('mm-rdma');
    expect(note).toContain('--rdma-listen-ip');
    expect(note).toContain('SMG pulls pixel tensors to TokenSpeed workers over its NIXL RDMA lane');
  });

  it('an SGLang worker under shm or auto: the gateway sends its tensors inline too, and the note says why', () => {
    const out = exported({
      multimodal_tensor_transport: 'shm',
      workers: [
        { url: 'grpc://s:1', runtime: 'sglang' },
        { url: 'grpc://t:2', runtime: 'tokenspeed', multimodal_tensor_transport: 'auto' },
        { url: 'grpc://u:3', runtime: 'sglang', multimodal_tensor_transport: 'inline' },
      ],
    });
    expect(out.workers[0]!.body).toMatchObject({ runtime_type: 'sglang' });
    const inlineOnly = out.notes.filter((n) => n.includes('has no /dev/shm handle'));
    expect(inlineOnly).toEqual([
      "workers[0] (grpc://s:1) runtime = 'sglang': SGLang's TensorData has no /dev/shm handle, so the gateway, like this router, sends its tensors inline although the mode is 'shm'.",
    ]);
  });

  it('rounds fractional seconds up, since SMG takes whole seconds', () => {
    const out = exported({ request_timeout_secs: 2.5, health_check_interval_secs: 0.2, workers: [] });
    expect(out.argv).toEqual(expect.arrayContaining(['--request-timeout-secs', '3', '--health-check-interval-secs', '1']));
    expect(out.notes).toContain('request_timeout_secs = 2.5 is not a whole number of seconds; SMG takes whole seconds, so the command uses 3.');
    expect(out.notes).toContain('health_check_interval_secs = 0.2 is not a whole number of seconds; SMG takes whole seconds, so the command uses 1.');
  });

  it('quotes a value holding a space or a quote so the shell passes it through unchanged', () => {
    const path = "/models/Bob's model";
    const out = exported({ model_path: path, workers: [{ url: 'grpc://a:1', labels: { owner: "O'Brien team" } }] });
    expect(out.argv).toContain(path);
    expect(out.command).toContain(`--model-path '/models/Bob'\\''s model'`);
    expect(shellWords(out.command)).toEqual(out.argv);
    const words = shellWords(out.workers[0]!.curl);
    expect(words.slice(0, 6)).toEqual(['curl', '-sS', '-X', 'POST', 'http://127.0.0.1:30000/workers', '-H']);
    expect(JSON.parse(words[words.length - 1]!)).toEqual(out.workers[0]!.body);
  });

  it('shellQuote leaves plain words bare and single-quotes the rest', () => {
    expect(shellQuote('grpc://10.0.0.5:50051')).toBe('grpc://10.0.0.5:50051');
    expect(shellQuote('')).toBe("''");
    expect(shellQuote('a b')).toBe("'a b'");
    expect(shellQuote("it's")).toBe(`'it'\\''s'`);
    expect(shellQuote('$HOME `x` *')).toBe("'$HOME `x` *'");
    expect(shellQuote('grpc://[::1]:50051')).toBe("'grpc://[::1]:50051'");
  });

  it('leaves excluded workers out and says so', () => {
    const out = exported({ workers: [{ url: 'grpc://127.0.0.1:50051' }, { url: 'grpc://10.0.0.5:50051' }] }, new Set(['grpc://127.0.0.1:50051']));
    expect(out.command).toMatch(/ --worker-urls grpc:\/\/10\.0\.0\.5:50051$/);
    expect(out.argv).not.toContain('grpc://127.0.0.1:50051');
    expect(out.workers.map((w) => w.url)).toEqual(['grpc://10.0.0.5:50051']);
    expect(out.notes[0]).toMatch(/^workers grpc:\/\/127\.0\.0\.1:50051 is left out: excluded from the export/);
  });

  it('excluding the only worker leaves a command without workers', () => {
    const out = exported({ workers: [{ url: 'grpc://127.0.0.1:50051' }] }, new Set(['grpc://127.0.0.1:50051']));
    expect(out.argv).not.toContain('--worker-urls');
    expect(out.workers).toEqual([]);
    expect(out.notes).toContain('workers is empty after the exclusion, so the command registers none; add workers later with POST /workers.');
  });

  it('gives prefill and decode workers with --pd-disaggregation, each prefill with its bootstrap port', () => {
    const out = exported({
      disaggregation: 'pd',
      decode_policy: 'least_load',
      workers: [
        { url: 'grpc://p:1', worker_type: 'prefill', bootstrap_port: 9011 },
        { url: 'grpc://q:4', worker_type: 'prefill' },
        { url: 'grpc://d:2', worker_type: 'decode' },
      ],
    });
    expect(out.command).toMatch(
      / --pd-disaggregation --prefill grpc:\/\/p:1 9011 --prefill grpc:\/\/q:4 8998 --decode grpc:\/\/d:2 --decode-policy least_load$/,
    );
    expect(out.argv).not.toContain('--worker-urls');
    expect(out.argv).not.toContain('--encode-policy');
    expect(out.workers.map((w) => w.body.worker_type)).toEqual(['prefill', 'prefill', 'decode']);
  });

  it('gives encode workers with --epd-disaggregation, their ports and the encode policy, and notes where SMG differs', () => {
    const out = exported({
      disaggregation: 'epd',
      workers: [
        { url: 'grpc://e:1', worker_type: 'encode', runtime: 'tokenspeed', bootstrap_port: 9001 },
        { url: 'grpc://p:2', worker_type: 'prefill' },
        { url: 'grpc://d:3', worker_type: 'decode' },
      ],
    });
    expect(out.command).toMatch(
      / --epd-disaggregation --encode grpc:\/\/e:1 9001 --prefill grpc:\/\/p:2 8998 --decode grpc:\/\/d:3 --encode-policy consistent_hashing$/,
    );
    expect(out.notes).toContainEqual(
      expect.stringMatching(/^disaggregation = 'epd' is written --epd-disaggregation, which SMG supports for gRPC TokenSpeed workers only/),
    );
    // The ring is the gateway's own (BLAKE3 points, the content hash as the key): no note, the same placement.
    expect(out.notes.filter((n) => n.startsWith('encode_policy'))).toEqual([]);
    const rr = exported({
      disaggregation: 'epd',
      encode_policy: 'round_robin',
      workers: [
        { url: 'grpc://e:1', worker_type: 'encode' },
        { url: 'grpc://p:2', worker_type: 'prefill' },
        { url: 'grpc://d:3', worker_type: 'decode' },
      ],
    });
    expect(rr.command).toMatch(/ --encode-policy round_robin$/);
  });

  it('leaves prefill, decode and encode workers off the command line under disaggregation none, saying so', () => {
    const out = exported({ workers: [{ url: 'grpc://p:1', worker_type: 'prefill' }, { url: 'grpc://r:3' }] });
    expect(out.command).toMatch(/ --worker-urls grpc:\/\/r:3$/);
    expect(out.notes).toContain(
      "disaggregation = 'none': the 1 prefill, decode and encode worker (grpc://p:1) get no request here, and are left off the command line (their POST /workers bodies are still listed).",
    );
  });

  it('lists a unix socket worker and notes that SMG cannot dial it', () => {
    const out = exported({ workers: [{ url: 'unix:///run/worker.sock' }] });
    expect(out.argv).toEqual(expect.arrayContaining(['--worker-urls', 'unix:///run/worker.sock']));
    expect(out.notes).toContainEqual(
      expect.stringMatching(/^workers\[0\] \(unix:\/\/\/run\/worker\.sock\) url = 'unix:\/\/\/run\/worker\.sock' is a unix socket: SMG dials only/),
    );
  });

  it('brackets an IPv6 host, targets a wildcard bind on loopback, and refuses port 0', () => {
    const out = exported({ host: '::', port: 0, workers: [{ url: 'grpc://[::1]:50051' }] });
    expect(out.argv).toEqual(expect.arrayContaining(['--host', '[::]', '--port', '30000']));
    expect(out.command).toContain("--host '[::]' --port 30000");
    expect(out.command).toContain("--worker-urls 'grpc://[::1]:50051'");
    expect(out.workers[0]!.curl).toMatch(/^curl -sS -g -X POST 'http:\/\/\[::1\]:30000\/workers' /);
    expect(out.notes).toContainEqual(expect.stringMatching(/^host = '::' is written --host \[::\]/));
    expect(out.notes).toContainEqual(expect.stringMatching(/^port = 0 \(pick a free port\) has no SMG equivalent/));

    const any4 = exported({ host: '0.0.0.0', port: 8080, workers: [{ url: 'grpc://a:1' }] });
    expect(any4.workers[0]!.curl).toMatch(/^curl -sS -X POST http:\/\/127\.0\.0\.1:8080\/workers /);
  });

  it('notes that a posted shm_namespace_id must name the gateway host', () => {
    const out = exported({ multimodal_tensor_transport: 'auto', workers: [{ url: 'grpc://a:1', labels: { shm_namespace_id: 'boot:42' } }] });
    expect(out.workers[0]!.body.labels).toEqual({ shm_namespace_id: 'boot:42' });
    expect(out.notes).toContainEqual(expect.stringMatching(/^workers\[0\] \(grpc:\/\/a:1\) labels\.shm_namespace_id = 'boot:42' is posted as a label/));
  });

  it('writes labels in sorted order so the same config gives the same bytes', () => {
    const a = exported({ workers: [{ url: 'grpc://a:1', labels: { z: '1', a: '2' } }] });
    const b = exported({ workers: [{ url: 'grpc://a:1', labels: { a: '2', z: '1' } }] });
    expect(a).toEqual(b);
    expect(a.workers[0]!.curl).toContain('"labels":{"a":"2","z":"1"}');
  });

  it('writes the body limit as --max-payload-size and names each other limit that differs from its default', () => {
    const out = exported({
      max_body_bytes: 1048576,
      limit_mm_per_prompt: { image: 4 },
      allow_private_media_hosts: true,
      workers: [{ url: 'grpc://127.0.0.1:50051' }],
    });
    expect(out.argv.slice(out.argv.indexOf('--max-payload-size'), out.argv.indexOf('--max-payload-size') + 2)).toEqual(['--max-payload-size', '1048576']);
    const note = out.notes.find((n) => n.includes('no smg launch flag'));
    expect(note).toBe(
      'limit_mm_per_prompt = {"image":4}, allow_private_media_hosts = true have no smg launch flag, nor do this router\'s other request limits: the gateway does not apply them, so a request refused here may be accepted there.',
    );
  });

  it('names a setting in every note', () => {
    const out = exported(
      {
        host: '::1',
        port: 0,
        request_timeout_secs: 1.5,
        multimodal_tensor_transport: 'rdma',
        workers: [{ url: 'unix:///s', worker_type: 'encode', labels: { shm_namespace_id: 'x' }, multimodal_shm_min_bytes: 1 }, { url: 'grpc://r:1' }],
      },
      new Set(['grpc://gone:1']),
    );
    const settings =
      /\b(host|port|model_path|policy|limit_mm_per_prompt|request_timeout_secs|health_check_interval_secs|multimodal_tensor_transport|multimodal_shm_min_bytes|multimodal_pixel_cache_mb|workers|worker_type|labels|priority|runtime|url)\b/;
    for (const note of out.notes) expect(note).toMatch(settings);
  });
});
