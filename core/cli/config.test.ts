import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runMmtc } from '../test/cli.ts';

const dir = mkdtempSync(path.join(tmpdir(), 'mmtc-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
function file(name: string, text: string): string {
  const p = path.join(dir, name);
  writeFileSync(p, text);
  return p;
}

describe('mmtc config flags', () => {
  it.each([
    [['--multimodal-tensor-transport', 'fast'], "invalid value 'fast' for --multimodal-tensor-transport: expected inline, shm, auto or rdma"],
    [['--multimodal-shm-min-bytes', '64k'], "invalid value '64k' for --multimodal-shm-min-bytes: expected a non-negative integer number of bytes (e.g. 65536)"],
    [['--multimodal-shm-min-bytes', '-1'], "invalid value '-1' for --multimodal-shm-min-bytes: expected a non-negative integer number of bytes (e.g. 65536)"],
    [['--port', '70000'], "invalid value '70000' for --port: expected an integer port 0-65535 (0 picks a free one)"],
    [
      ['--worker-urls', 'http://10.0.0.1:80'],
      "invalid value 'http://10.0.0.1:80' for --worker-urls: expected grpc://host:port or unix:///path/to/socket (an absolute path without . or .. segments, empty segments or control characters)",
    ],
  ])('%j exits non-zero naming the flag and value', (args, message) => {
    const r = runMmtc(['config', 'resolve', ...args]);
    expect(r.status).toBe(2);
    expect(r.stderr.trim()).toBe(`error: ${message}`);
    expect(r.stdout).toBe('');
  });

  it('a disaggregation the listed workers do not make names the flags to fix, not only the YAML keys', () => {
    const regular = runMmtc([
      'config',
      'resolve',
      '--epd-disaggregation',
      '--worker-urls',
      'grpc://127.0.0.1:50051',
      '--encode',
      'grpc://127.0.0.1:50052',
      '--prefill',
      'grpc://127.0.0.1:50053',
      '9001',
      '--decode',
      'grpc://127.0.0.1:50054',
    ]);
    expect(regular.status).toBe(2);
    expect(regular.stderr.trim()).toBe(
      "error: --worker-urls grpc://127.0.0.1:50051: invalid value 'regular' for workers[0].worker_type: a regular worker takes no part under disaggregation epd, which routes to encode, prefill, decode workers: give it one of those types, or remove it (on the command line: list grpc://127.0.0.1:50051 with --encode, --prefill, --decode instead of --worker-urls)",
    );
    const missing = runMmtc(['config', 'resolve', '--pd-disaggregation', '--decode', 'grpc://127.0.0.1:50054']);
    expect(missing.status).toBe(2);
    expect(missing.stderr.trim()).toBe(
      "error: --pd-disaggregation: invalid value 'pd' for disaggregation: disaggregation pd needs at least one prefill worker (worker_type prefill); the configuration has none (on the command line: --prefill URL [BOOTSTRAP_PORT])",
    );
    const shared = runMmtc([
      'config',
      'resolve',
      '--pd-disaggregation',
      '--prefill',
      'grpc://127.0.0.1:50051',
      '--prefill',
      'grpc://127.0.0.1:50052',
      '--decode',
      'grpc://127.0.0.1:50054',
    ]);
    expect(shared.stderr.trim()).toBe(
      "error: --prefill grpc://127.0.0.1:50052: invalid value 'grpc://127.0.0.1:50052' for workers[1].url: workers[0] already has its bootstrap server at 127.0.0.1:8998 (8998, the default): each prefill or encode worker on one host needs a bootstrap_port of its own (on the command line: a port of its own after the URL, --prefill grpc://127.0.0.1:50052 PORT)",
    );
    const unix = runMmtc(['config', 'resolve', '--pd-disaggregation', '--prefill', 'unix:///tmp/p.sock', '--decode', 'grpc://127.0.0.1:50054']);
    expect(unix.stderr.trim()).toBe(
      "error: --prefill unix:///tmp/p.sock: invalid value 'unix:///tmp/p.sock' for workers[0].url: a prefill worker under disaggregation pd needs a grpc://host:port URL: its bootstrap server is reached at that host",
    );
  });

  it('accepts a mode trimmed and in any case, and flags override the file', () => {
    const cfg = file(
      'flags.yaml',
      'multimodal_tensor_transport: inline\nmultimodal_shm_min_bytes: 10\nworkers:\n  - url: grpc://127.0.0.1:50051\n    runtime: vllm\n',
    );
    const r = runMmtc(['config', 'resolve', '--json', '--config', cfg, '--multimodal-tensor-transport', ' AUTO ']);
    expect(r.status).toBe(0);
    const out = JSON.parse(r.stdout);
    expect(out.workers[0].multimodal_tensor_transport).toMatchObject({ value: 'auto', source: 'router' });
    expect(out.workers[0].multimodal_tensor_transport.layers[1]).toMatchObject({ raw: 'auto', origin: '--multimodal-tensor-transport', state: 'won' });
    expect(out.workers[0].multimodal_shm_min_bytes.layers[1]).toMatchObject({ raw: 10, origin: `${cfg}:2:1`, state: 'won' });
  });

  it('--worker-urls replaces the list but keeps the file settings of a url it names again', () => {
    const cfg = file('urls.yaml', 'workers:\n  - url: grpc://a:1\n  - url: grpc://b:2\n    multimodal_tensor_transport: shm\n');
    const r = runMmtc(['config', 'resolve', '--json', '--config', cfg, '--worker-urls', 'grpc://b:2', 'grpc://c:3']);
    const out = JSON.parse(r.stdout);
    expect(out.workers.map((w: { url: string }) => w.url)).toEqual(['grpc://b:2', 'grpc://c:3']);
    expect(out.workers[0].multimodal_tensor_transport).toMatchObject({ value: 'shm', source: 'worker' });
    expect(out.workers[0].multimodal_tensor_transport.layers[0].origin).toBe(`${cfg}:4:5`);
  });
});

describe('mmtc config resolve', () => {
  it('shows the winning layer and every layer as a table', () => {
    const r = runMmtc(['config', 'resolve', '--worker-urls', 'grpc://127.0.0.1:50051', '--multimodal-shm-min-bytes', '0'], {
      SMG_MM_TENSOR_TRANSPORT: 'shm',
      SMG_MM_SHM_MIN_BYTES: '1024',
    });
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('worker grpc://127.0.0.1:50051 (regular, --worker-urls)');
    expect(r.stdout).toContain("multimodal_tensor_transport = 'shm'   from env (SMG_MM_TENSOR_TRANSPORT)");
    expect(r.stdout).toContain('multimodal_shm_min_bytes = 0   from router (--multimodal-shm-min-bytes)');
    expect(r.stdout).toMatch(/env\s+SMG_MM_SHM_MIN_BYTES\s+'1024'\s+beaten/);
  });

  it('a worker declared runtime sglang under shm: the table says it travels inline, and why', () => {
    const cfg = file(
      'sglang.yaml',
      'multimodal_tensor_transport: shm\nworkers:\n  - url: grpc://127.0.0.1:50051\n    runtime: sglang\n  - url: grpc://127.0.0.1:50052\n',
    );
    const r = runMmtc(['config', 'resolve', '--config', cfg]);
    expect(r.status).toBe(0);
    const [sglang, other] = r.stdout.split(/^worker /m).slice(1);
    expect(sglang).toContain('note: SGLang carries tensors inline only (its TensorData has no /dev/shm handle): mode shm travels inline (runtime_inline_only)');
    expect(other).toContain(
      'note: runtime not declared: the router detects it when it reaches the worker; SGLang carries tensors inline only, whatever the mode (runtime_inline_only)',
    );
  });

  it('with no worker configured, shows the embedded default worker the router will start', () => {
    const r = runMmtc(['config', 'resolve', '--multimodal-tensor-transport', 'auto']);
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('no workers configured: the router starts its embedded reference worker');
    expect(r.stdout).toContain('worker grpc://127.0.0.1:<port chosen at start> (regular, embedded default)');
    expect(r.stdout).toContain("multimodal_tensor_transport = 'auto'   from router (--multimodal-tensor-transport)");
    const json = JSON.parse(runMmtc(['config', 'resolve', '--json']).stdout);
    expect(json.workers[0]).toMatchObject({ origin: 'embedded default', worker_type: 'regular' });
  });

  it('warns once per deprecated alias however many workers resolve', () => {
    const r = runMmtc(['config', 'resolve', '--worker-urls', 'grpc://a:1', 'grpc://b:2', 'grpc://c:3'], { SMG_TOKENSPEED_MM_TENSOR_TRANSPORT: 'auto' });
    expect(r.status).toBe(0);
    const warning = 'warning: SMG_TOKENSPEED_MM_TENSOR_TRANSPORT is deprecated; set SMG_MM_TENSOR_TRANSPORT instead';
    expect(r.stderr.split('\n').filter((l) => l === warning)).toHaveLength(1);
  });

  it('an invalid env value is a warning, not an error, and the layer counts as absent', () => {
    const r = runMmtc(['config', 'resolve', '--json'], { SMG_MM_SHM_MIN_BYTES: '64k', SMG_TOKENSPEED_MM_SHM_MIN_BYTES: '1' });
    expect(r.status).toBe(0);
    expect(r.stderr).toContain("warning: ignoring SMG_MM_SHM_MIN_BYTES='64k'");
    const knob = JSON.parse(r.stdout).workers[0].multimodal_shm_min_bytes;
    expect(knob).toMatchObject({ value: 65536, source: 'default' });
    expect(knob.layers[3]).toMatchObject({ name: 'SMG_TOKENSPEED_MM_SHM_MIN_BYTES', raw: '1', state: 'not_consulted' });
  });
});

describe('mmtc config validate / export', () => {
  it('exit 0 for a valid file', () => {
    const r = runMmtc(['config', 'validate', file('ok.yaml', 'workers:\n  - url: grpc://a:1\n')]);
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('valid (1 worker)');
  });

  it('lists every error with path and position, and exits 1', () => {
    const cfg = file('bad.yaml', 'multimodal_tensor_transport: fast\nworkers:\n  - url: grpc://a:1\n    multimodal_shm_min_bytes: 64k\n');
    const r = runMmtc(['config', 'validate', cfg]);
    expect(r.status).toBe(1);
    expect(r.stdout).toContain(`${cfg}:1:30: invalid value 'fast' for multimodal_tensor_transport: expected inline, shm, auto or rdma`);
    expect(r.stdout).toContain(`${cfg}:4:31: invalid value '64k' for workers[0].multimodal_shm_min_bytes`);
  });

  it('a missing file is a clear error', () => {
    const r = runMmtc(['config', 'validate', path.join(dir, 'nope.yaml')]);
    expect(r.status).toBe(1);
    expect(r.stdout).toContain(`cannot read config file ${path.join(dir, 'nope.yaml')}: no such file`);
  });

  it('export prints normalized YAML that validates and exports to the same bytes', () => {
    const cfg = file('exp.yaml', '# comment\nworkers: [{url: "grpc://a:1", labels: {b: "2", a: "1"}}]\nport: 31000\n');
    const first = runMmtc(['config', 'export', '--config', cfg, '--multimodal-tensor-transport', 'auto']);
    expect(first.status).toBe(0);
    expect(first.stdout).toContain('multimodal_tensor_transport: auto');
    const again = runMmtc(['config', 'export', '--config', file('exp2.yaml', first.stdout)]);
    expect(again.stdout).toBe(first.stdout);
  });

  it('without --config, export and resolve read the file mmtc serve uses, and say so', () => {
    const home = path.join(dir, 'xdg');
    const serveFile = path.join(home, 'mmtc', 'router.yaml');
    mkdirSync(path.dirname(serveFile), { recursive: true });
    writeFileSync(serveFile, 'multimodal_tensor_transport: auto\nworkers:\n  - url: grpc://127.0.0.1:50077\n    runtime: vllm\n');
    const exported = runMmtc(['config', 'export'], { XDG_CONFIG_HOME: home });
    expect(exported.status).toBe(0);
    expect(exported.stdout).toContain('url: grpc://127.0.0.1:50077');
    expect(exported.stdout).toContain('multimodal_tensor_transport: auto');
    expect(exported.stderr).toContain(`mmtc: read ${serveFile}, the file mmtc serve uses`);
    const resolved = JSON.parse(runMmtc(['config', 'resolve', '--json'], { XDG_CONFIG_HOME: home }).stdout);
    expect(resolved.config_file).toBe(serveFile);
    expect(resolved.workers.map((w: { url: string }) => w.url)).toEqual(['grpc://127.0.0.1:50077']);

    const none = runMmtc(['config', 'export'], { XDG_CONFIG_HOME: path.join(dir, 'empty-xdg') });
    expect(none.stdout).toContain('workers: []');
    expect(none.stderr).toContain(
      `mmtc: no configuration file: ${path.join(dir, 'empty-xdg', 'mmtc', 'router.yaml')} (the file mmtc serve uses) does not exist`,
    );
  });
});
