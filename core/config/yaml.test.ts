import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError } from './errors.ts';
import { RouterConfigSchema } from './schema.ts';
import { exportConfigYaml, parseConfigYaml, saveConfigFile, updateConfigYaml } from './yaml.ts';

function issuesOf(text: string): string[] {
  try {
    parseConfigYaml(text, 'r.yaml');
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).issues.map((i) => i.message);
  }
  throw new Error('expected the YAML to be rejected');
}

describe('loading YAML', () => {
  it('reads every documented key', () => {
    const { config, positions } = parseConfigYaml(
      [
        'host: 0.0.0.0',
        'port: 8080',
        'model_path: /models/qwen2-vl',
        'policy: least_load',
        'multimodal_tensor_transport: auto',
        'multimodal_shm_min_bytes: 0',
        'workers:',
        '  - url: grpc://127.0.0.1:50051',
        '    runtime: tokenspeed',
        '    worker_type: encode',
        '    labels: {shm_namespace_id: "abc:12"}',
        '    priority: 10',
        '    multimodal_tensor_transport: shm',
        '    multimodal_shm_min_bytes: 1048576',
        '  - url: unix:///run/worker.sock',
      ].join('\n'),
    );
    expect(config).toMatchObject({ host: '0.0.0.0', port: 8080, policy: 'least_load', multimodal_tensor_transport: 'auto', multimodal_shm_min_bytes: 0 });
    expect(config.workers[0]).toEqual({
      url: 'grpc://127.0.0.1:50051',
      runtime: 'tokenspeed',
      worker_type: 'encode',
      labels: { shm_namespace_id: 'abc:12' },
      priority: 10,
      multimodal_tensor_transport: 'shm',
      multimodal_shm_min_bytes: 1048576,
    });
    expect(config.workers[1]).toMatchObject({ url: 'unix:///run/worker.sock', runtime: 'unspecified', worker_type: 'regular' });
    expect(positions.get('workers[0].multimodal_shm_min_bytes')).toEqual({ line: 14, column: 5 });
  });

  it('an empty file is the defaults', () => {
    expect(parseConfigYaml('# nothing yet\n').config).toEqual(RouterConfigSchema.parse({}));
  });

  it('reports unknown keys at the key, with a suggestion', () => {
    expect(issuesOf('workers:\n  - url: grpc://a:1\n    multimodal_tensor_transprt: shm\n')).toEqual([
      "r.yaml:3:5: unknown key 'multimodal_tensor_transprt' in workers[0] (did you mean 'multimodal_tensor_transport'?)",
    ]);
  });

  it('reports every type error with key path and line:column, in file order', () => {
    expect(
      issuesOf(
        [
          'port: "8080"',
          'multimodal_tensor_transport: SHM',
          'multimodal_shm_min_bytes: 64k',
          'workers:',
          '  - url: grpc://a:1',
          '    multimodal_shm_min_bytes: -1',
          '  - runtime: triton',
        ].join('\n'),
      ),
    ).toEqual([
      "r.yaml:1:7: invalid value '8080' for port: expected an integer port 0-65535 (0 picks a free one)",
      "r.yaml:2:30: invalid value 'SHM' for multimodal_tensor_transport: expected inline, shm, auto or rdma",
      "r.yaml:3:27: invalid value '64k' for multimodal_shm_min_bytes: expected a non-negative integer number of bytes (e.g. 65536)",
      'r.yaml:6:31: invalid value -1 for workers[0].multimodal_shm_min_bytes: expected a non-negative integer number of bytes (e.g. 65536)',
      'r.yaml:7:5: missing required key workers[1].url: expected grpc://host:port or unix:///path/to/socket (an absolute path without . or .. segments, empty segments or control characters)',
      "r.yaml:7:14: invalid value 'triton' for workers[1].runtime: expected tokenspeed, vllm, sglang or unspecified",
    ]);
  });

  it.each([
    ['1.5', 'invalid value 1.5'],
    ['.nan', 'invalid value NaN'],
    ['true', 'invalid value true'],
  ])('refuses the threshold %s', (yamlValue, start) => {
    expect(issuesOf(`multimodal_shm_min_bytes: ${yamlValue}\n`)[0]).toContain(`${start} for multimodal_shm_min_bytes`);
  });

  it('reports YAML syntax errors and duplicate keys with their position', () => {
    expect(issuesOf('host: a\nhost: b\n')[0]).toMatch(/^r\.yaml:2:1: YAML syntax error: Map keys must be unique/);
    expect(issuesOf('workers:\n  - url: [\n')[0]).toMatch(/^r\.yaml:\d+:\d+: YAML syntax error/);
  });

  it('an alias with no anchor, and aliases that expand past the limit (billion laughs), are syntax errors at the alias', () => {
    expect(() => parseConfigYaml('port: 1\nhost: *nope\n', 'r.yaml')).toThrow(ConfigError);
    expect(issuesOf('port: 1\nhost: *nope\n')).toEqual(['r.yaml:2:7: YAML syntax error: Unresolved alias (the anchor must be set before the alias): nope']);
    let laughs = 'a0: &a0 [x, x, x, x, x, x, x, x, x]\n';
    for (let i = 1; i < 9; i++)
      laughs += `a${i}: &a${i} [${Array(9)
        .fill(`*a${i - 1}`)
        .join(', ')}]\n`;
    expect(issuesOf(laughs)).toEqual(['r.yaml:2:10: YAML syntax error: Excessive alias count indicates a resource exhaustion attack']);
  });

  it('a disaggregated topology the workers do not make: each problem at its key and line', () => {
    const text = [
      'disaggregation: epd',
      'workers:',
      '  - url: grpc://127.0.0.1:50051',
      '    worker_type: prefill',
      '  - url: unix:///tmp/e.sock',
      '    worker_type: encode',
      '  - url: grpc://127.0.0.1:50053',
      '    worker_type: decode',
      '    bootstrap_port: 9000',
      '  - url: grpc://127.0.0.1:50054',
      '    worker_type: encode',
      '  - url: grpc://127.0.0.1:50055',
      '    worker_type: prefill',
      '',
    ].join('\n');
    expect(issuesOf(text)).toEqual([
      "r.yaml:5:10: invalid value 'unix:///tmp/e.sock' for workers[1].url: an encode worker under disaggregation epd needs a grpc://host:port URL: its bootstrap server is reached at that host",
      'r.yaml:9:21: invalid value 9000 for workers[2].bootstrap_port: bootstrap_port is for prefill and encode workers (their bootstrap server); this worker is decode',
      "r.yaml:10:10: invalid value 'grpc://127.0.0.1:50054' for workers[3].url: workers[0] already has its bootstrap server at 127.0.0.1:8998 (8998, the default): each prefill or encode worker on one host needs a bootstrap_port of its own",
      "r.yaml:12:10: invalid value 'grpc://127.0.0.1:50055' for workers[4].url: workers[0] already has its bootstrap server at 127.0.0.1:8998 (8998, the default): each prefill or encode worker on one host needs a bootstrap_port of its own",
    ]);
    expect(issuesOf('disaggregation: pd\nworkers:\n  - url: grpc://127.0.0.1:50051\n    worker_type: decode\n')).toEqual([
      "r.yaml:1:17: invalid value 'pd' for disaggregation: disaggregation pd needs at least one prefill worker (worker_type prefill); the configuration has none",
    ]);
  });

  it('a top-level list is refused', () => {
    expect(issuesOf('- url: grpc://a:1\n')).toEqual(['r.yaml:1:1: expected a mapping of router settings at the top level, got a list']);
  });
});

describe('export and save', () => {
  const dirs: string[] = [];
  afterEach(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

  const sample = RouterConfigSchema.parse({
    port: 31000,
    multimodal_tensor_transport: 'auto',
    workers: [
      { url: 'grpc://b:2', labels: { zone: 'a', arch: 'x86' }, multimodal_shm_min_bytes: 0 },
      { url: 'grpc://a:1', runtime: 'vllm' },
    ],
  });

  it('exports the same bytes for the same config and round-trips', () => {
    const once = exportConfigYaml(sample);
    const reordered = RouterConfigSchema.parse(
      JSON.parse(JSON.stringify({ ...sample, workers: [{ ...sample.workers[0], labels: { arch: 'x86', zone: 'a' } }, sample.workers[1]] })),
    );
    expect(exportConfigYaml(reordered)).toBe(once);
    const back = parseConfigYaml(once).config;
    expect(back).toEqual(sample);
    expect(exportConfigYaml(back)).toBe(once);
    expect(once).not.toContain('multimodal_shm_min_bytes: 65536'); // unset knobs stay unset, so env can still win
  });

  it('saving over an edited file keeps its comments and only changes what changed', () => {
    const original = [
      '# Router for the GPU box',
      'port: 31000 # fixed by the firewall',
      '',
      '# auto: only when the worker shares /dev/shm',
      'multimodal_tensor_transport: auto',
      'workers:',
      '  # the encoder',
      '  - url: grpc://b:2 # left socket',
      '    multimodal_shm_min_bytes: 0',
      '    labels: {zone: a, arch: x86}',
      '  - url: grpc://a:1',
      '    runtime: vllm',
      '',
    ].join('\n');
    const edited = RouterConfigSchema.parse({
      ...sample,
      multimodal_tensor_transport: 'shm',
      multimodal_shm_min_bytes: 4096,
      workers: [{ ...sample.workers[0]!, multimodal_shm_min_bytes: undefined }, sample.workers[1]!, { url: 'grpc://c:3' }],
    });
    const text = updateConfigYaml(original, edited);
    for (const comment of [
      '# Router for the GPU box',
      '# fixed by the firewall',
      '# auto: only when the worker shares /dev/shm',
      '# the encoder',
      '# left socket',
    ]) {
      expect(text).toContain(comment);
    }
    expect(text).toContain('multimodal_tensor_transport: shm');
    expect(text).toContain('multimodal_shm_min_bytes: 4096');
    expect(text).not.toMatch(/multimodal_shm_min_bytes: 0/);
    expect(text).toContain('- url: grpc://c:3');
    expect(text).not.toContain('priority'); // defaults are not spelled out in an operator's file
    expect(parseConfigYaml(text).config).toEqual(edited);
  });

  it('writes atomically and keeps the previous file as .bak', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'mmtc-yaml-'));
    dirs.push(dir);
    const file = path.join(dir, 'router.yaml');
    writeFileSync(file, '# mine\nport: 31000\n');
    await saveConfigFile(file, RouterConfigSchema.parse({ port: 32000 }));
    expect(readFileSync(file, 'utf8')).toBe('# mine\nport: 32000\n');
    expect(readFileSync(`${file}.bak`, 'utf8')).toBe('# mine\nport: 31000\n');
    await saveConfigFile(path.join(dir, 'new.yaml'), sample);
    expect(parseConfigYaml(readFileSync(path.join(dir, 'new.yaml'), 'utf8')).config).toEqual(sample);
    expect(existsSync(path.join(dir, 'new.yaml.bak'))).toBe(false);
  });

  it('refuses to save over a file that does not load, leaving it untouched', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'mmtc-yaml-'));
    dirs.push(dir);
    const file = path.join(dir, 'router.yaml');
    writeFileSync(file, 'port: [\n');
    await expect(saveConfigFile(file, sample)).rejects.toThrow(ConfigError);
    expect(readFileSync(file, 'utf8')).toBe('port: [\n');
  });
});
