// The configuration's limits, as an operator meets them: a degenerate duration, too many
// workers, a worker URL that names another socket than it shows, a file too big to load or
// with too many problems to list — each refused with an error naming the field, the value and
// what is accepted, and never by holding the process (docs/configuration.md, "Limits of a configuration").
import { describe, expect, it } from 'vitest';
import { ConfigError } from './errors.ts';
import { DURATION_RANGES, MAX_LABELS, MAX_WORKERS, MIN_LIMIT_BYTES, type DurationKey } from './schema.ts';
import { parseRouterConfig } from './validate.ts';
import { MAX_CONFIG_YAML_BYTES, parseConfigYaml } from './yaml.ts';

function issuesOf(run: () => unknown): ConfigError['issues'] {
  try {
    run();
  } catch (err) {
    if (err instanceof ConfigError) return err.issues;
    throw err;
  }
  throw new Error('expected a ConfigError');
}

const KEYS = Object.keys(DURATION_RANGES) as DurationKey[];

describe('durations', () => {
  it.each(KEYS.flatMap((key) => [1e-300, 0, DURATION_RANGES[key].min / 2, DURATION_RANGES[key].max * 2, 1e300, -1].map((v) => [key, v] as const)))(
    '%s = %d is refused naming the field, the value and the range',
    (key, value) => {
      const { min, max } = DURATION_RANGES[key];
      expect(issuesOf(() => parseRouterConfig({ [key]: value }))).toEqual([
        { path: key, message: `invalid value ${value} for ${key}: expected a number of seconds from ${min} to ${max}` },
      ]);
    },
  );

  it.each(KEYS)('%s accepts both ends of its range', (key) => {
    const { min, max } = DURATION_RANGES[key];
    expect(parseRouterConfig({ [key]: min })[key]).toBe(min);
    expect(parseRouterConfig({ [key]: max })[key]).toBe(max);
  });

  it('names the range in a YAML file too, at its line', () => {
    expect(issuesOf(() => parseConfigYaml('port: 1\nhealth_check_interval_secs: 1e-300\n', 'r.yaml'))[0]!.message).toBe(
      'r.yaml:2:29: invalid value 1e-300 for health_check_interval_secs: expected a number of seconds from 0.1 to 3600',
    );
  });
});

describe('request limits', () => {
  const what = { max_body_bytes: 'request', max_image_bytes: 'image', max_request_image_bytes: 'request with an image' } as const;

  it.each(Object.entries(what).flatMap(([key, refused]) => [5, 0, MIN_LIMIT_BYTES - 1].map((v) => [key, v, refused] as const)))(
    '%s = %d is refused: a limit that small refuses every %s',
    (key, value, refused) => {
      expect(issuesOf(() => parseRouterConfig({ [key]: value }))).toEqual([
        {
          path: key,
          message: `invalid value ${value} for ${key}: expected an integer number of bytes of at least 1024 (1 KiB): a smaller limit refuses every ${refused}`,
        },
      ]);
    },
  );

  it.each(Object.keys(what))('%s takes 1 KiB', (key) => {
    expect(parseRouterConfig({ [key]: MIN_LIMIT_BYTES })[key as keyof typeof what]).toBe(MIN_LIMIT_BYTES);
  });

  it('max_request_image_pixels counts pixels, and says so', () => {
    expect(issuesOf(() => parseRouterConfig({ max_request_image_pixels: 0 }))).toEqual([
      {
        path: 'max_request_image_pixels',
        message: 'invalid value 0 for max_request_image_pixels: expected a positive integer number of pixels (width × height, e.g. 64000000)',
      },
    ]);
  });
});

describe('workers', () => {
  const workers = (n: number) => Array.from({ length: n }, (_, i) => ({ url: `grpc://127.0.0.1:${i + 1}` }));

  it(`takes ${MAX_WORKERS} workers and refuses one more, quoting the list by its length`, () => {
    expect(parseRouterConfig({ workers: workers(MAX_WORKERS) }).workers).toHaveLength(MAX_WORKERS);
    expect(issuesOf(() => parseRouterConfig({ workers: workers(MAX_WORKERS + 1) }))).toEqual([
      {
        path: 'workers',
        message: `invalid value a list of ${MAX_WORKERS + 1} entries for workers: expected at most ${MAX_WORKERS} workers (MAX_WORKERS, docs/configuration.md)`,
      },
    ]);
  });

  it('refuses 10,000 workers with one short issue', () => {
    const issues = issuesOf(() => parseRouterConfig({ workers: workers(10_000) }));
    expect(issues).toHaveLength(1);
    expect(issues[0]!.message.length).toBeLessThan(200);
  });

  it.each([
    'unix:///../../var/run/docker.sock',
    'unix:///run/../var/run/docker.sock',
    'unix:///run/./w.sock',
    'unix:///run//w.sock',
    'unix:///run/w.sock\nunix:///var/run/docker.sock',
    'unix:///run/w\u0000.sock',
    'unix:///run/w.sock/',
    'grpc://127.0.0.1:1\n',
  ])('refuses the worker URL %j', (url) => {
    const issues = issuesOf(() => parseRouterConfig({ workers: [{ url }] }));
    expect(issues[0]!.path).toBe('workers[0].url');
    expect(issues[0]!.message).toMatch(
      /: expected grpc:\/\/host:port or unix:\/\/\/path\/to\/socket \(an absolute path without \. or \.\. segments, empty segments or control characters\)$/,
    );
  });

  it('takes an ordinary socket path', () => {
    expect(parseRouterConfig({ workers: [{ url: 'unix:///run/mmtc/worker-0.sock' }] }).workers[0]!.url).toBe('unix:///run/mmtc/worker-0.sock');
  });

  it(`takes ${MAX_LABELS} labels and refuses more, or a label name or value too long`, () => {
    const labels = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`l${i}`, 'v']));
    expect(Object.keys(parseRouterConfig({ workers: [{ url: 'grpc://a:1', labels: labels(MAX_LABELS) }] }).workers[0]!.labels)).toHaveLength(MAX_LABELS);
    expect(issuesOf(() => parseRouterConfig({ workers: [{ url: 'grpc://a:1', labels: labels(MAX_LABELS + 1) }] }))[0]!.message).toMatch(
      /for workers\[0\]\.labels: expected at most 32 labels$/,
    );
    expect(issuesOf(() => parseRouterConfig({ workers: [{ url: 'grpc://a:1', labels: { zone: 'x'.repeat(257) } }] }))[0]!.message).toMatch(
      /^invalid value 'x{120}… \(257 characters\)' for workers\[0\]\.labels\.zone: expected a string label value of at most 256 characters/,
    );
  });

  it('a label name too long is quoted as the name, with its length, not as the value under it', () => {
    const name = 'n'.repeat(70);
    expect(issuesOf(() => parseRouterConfig({ workers: [{ url: 'grpc://a:1', labels: { [name]: '1' } }] }))).toEqual([
      {
        path: 'workers[0].labels',
        message: `invalid key '${name}' (70 characters) in workers[0].labels: expected a string label name of 1 to 63 characters`,
      },
    ]);
  });

  it('quotes a label nested 100,000 deep without overflowing the stack', () => {
    let deep: unknown = 'x';
    for (let i = 0; i < 100_000; i++) deep = { a: deep };
    const issues = issuesOf(() => parseRouterConfig({ workers: [{ url: 'grpc://a:1', labels: { zone: deep } }] }));
    expect(issues[0]!.message).toMatch(/^invalid value .* for workers\[0\]\.labels\.zone: expected a string label value/);
  });
});

describe('YAML text', () => {
  it(`refuses a file over ${MAX_CONFIG_YAML_BYTES / 1024} KiB before parsing it: 20,000 unknown keys`, () => {
    const text = Array.from({ length: 20_000 }, (_, i) => `unknown_key_${i}: ${i}`).join('\n');
    expect(issuesOf(() => parseConfigYaml(text, 'big.yaml'))).toEqual([
      {
        path: '',
        line: 1,
        column: 1,
        message: `big.yaml:1:1: the configuration is ${Math.ceil(text.length / 1024)} KiB, above the 32 KiB a configuration may have (MAX_CONFIG_YAML_BYTES; ${MAX_WORKERS} workers fit in about half of it)`,
      },
    ]);
  });

  it('lists the first 50 problems and counts the rest, at the last one listed', () => {
    const text = Array.from({ length: 3000 }, (_, i) => `k${i}: 1`).join('\n');
    const issues = issuesOf(() => parseConfigYaml(text, 'many.yaml'));
    expect(issues).toHaveLength(51);
    expect(issues[49]!.message).toMatch(/^many\.yaml:50:1: unknown key 'k49'/);
    expect(issues[50]).toEqual({
      path: '',
      line: 50,
      column: 1,
      message: 'many.yaml:50:1: … and 2950 more problems of the same kinds, not listed (the first 50 are above)',
    });
  });

  it('still finds a repeated key, at the repeat, among thousands', () => {
    const text = `${Array.from({ length: 3000 }, (_, i) => `k${i}: 1`).join('\n')}\nk7: 2\n`;
    expect(issuesOf(() => parseConfigYaml(text, 'dup.yaml'))).toEqual([
      { path: '', line: 3001, column: 1, message: 'dup.yaml:3001:1: YAML syntax error: Map keys must be unique' },
    ]);
  });

  it('a key repeated inside a worker entry is found too', () => {
    expect(issuesOf(() => parseConfigYaml('workers:\n  - url: grpc://a:1\n    url: grpc://b:2\n', 'w.yaml'))[0]!.message).toBe(
      'w.yaml:3:5: YAML syntax error: Map keys must be unique',
    );
  });
});
