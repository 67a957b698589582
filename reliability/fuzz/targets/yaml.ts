// The YAML loader (core/config/yaml.ts parseConfigYaml): every document either loads into a
// valid configuration or is refused with a ConfigError whose every issue has a message and
// a line:column; anything else escaping (a TypeError, a ReferenceError) is a crash, and a
// document that takes seconds to load is a hang in the making.
import { stringify } from 'yaml';
import { ConfigError } from '../../../core/config/errors.ts';
import { RouterConfigSchema } from '../../../core/config/schema.ts';
import { parseConfigYaml } from '../../../core/config/yaml.ts';
import { mutate, type Rng } from '../../lib/rng.ts';
import type { CaseOutcome } from '../harness.ts';

const BASE = {
  host: '127.0.0.1',
  port: 30000,
  policy: 'round_robin',
  multimodal_tensor_transport: 'auto',
  multimodal_shm_min_bytes: 65536,
  request_timeout_secs: 600,
  limit_mm_per_prompt: { image: 16 },
  allowed_media_domains: ['images.example.com'],
  workers: [
    { url: 'grpc://127.0.0.1:50051', runtime: 'tokenspeed', labels: { zone: 'a' }, priority: 50, multimodal_tensor_transport: 'shm' },
    { url: 'unix:///run/w.sock', worker_type: 'decode', multimodal_shm_min_bytes: 0 },
  ],
};
const BASE_TEXT = `# comment\n${stringify(BASE)}`;

const bomb = (levels: number, width: number) => {
  let s = `a0: &a0 [${Array(width).fill('"x"').join(',')}]\n`;
  for (let i = 1; i < levels; i++)
    s += `a${i}: &a${i} [${Array(width)
      .fill(`*a${i - 1}`)
      .join(',')}]\n`;
  return s;
};

const SPECIALS: string[] = [
  bomb(9, 9),
  bomb(4, 30),
  'port: *nope\n',
  'a: &a\n  b: *a\nport: 1\n',
  'workers: &w\n  - url: grpc://a:1\nextra: *w\n',
  '<<: {port: 5}\n',
  'port: !!binary aGVsbG8=\n',
  'port: !!js/function "function(){}"\n',
  'port: !!python/object:os.system ls\n',
  'port: 1e400\n',
  'port: 0x7530\n',
  'port: 0o72460\n',
  'port: +30000\n',
  'port: 30_000\n',
  'port: .inf\n',
  'port: .nan\n',
  'port: ~\n',
  'port: 2001-01-01\n',
  '\ufeffport: 1\n',
  'port: 1\u0000\n',
  'port:\t1\n',
  'port: 1\r\nhost: a\r\n',
  'port: 1\nport: 2\n',
  '---\nport: 1\n---\nport: 2\n',
  '? [a, b]\n: 1\n',
  '? {a: 1}\n: 1\n',
  '['.repeat(5000) + ']'.repeat(5000),
  '{a: '.repeat(3000) + '1' + '}'.repeat(3000),
  `${'- '.repeat(2000)}x\n`,
  `host: "${'a'.repeat(200_000)}"\n`,
  `workers:\n${'  - url: grpc://127.0.0.1:1\n'.repeat(2000)}`,
  'workers: 5\n',
  'workers:\n  - 5\n',
  'workers:\n  - url: grpc://a:1\n    labels: {n: 1, b: true}\n',
  'workers:\n  - url: grpc://a:1\n    __proto__: {polluted: 1}\n',
  '__proto__:\n  polluted: 1\n',
  'constructor:\n  prototype:\n    polluted: 1\n',
  'multimodal_tensor_transport: SHM\n',
  'multimodal_shm_min_bytes: 64k\n',
  'multimodal_shm_min_bytes: -1\n',
  'request_timeout_secs: 0\n',
  'request_timeout_secs: 1e308\n',
  '"port": 1\n',
  "'port': 1\n",
  'port: "1"\n',
  '!!map {port: 1}\n',
  '%YAML 1.1\n---\nport: 1\n',
  '%TAG ! tag:evil.com,2000:\n---\nport: !x 1\n',
  'port: |\n  1\n',
  'port: >-\n  1\n',
  '',
  '   \n\n',
  '#only a comment\n',
  '- a\n- b\n',
  '"just a string"\n',
  '42\n',
  'null\n',
  '\ud800: 1\n',
  'host: \ud800\n',
];

function textEdit(rng: Rng, text: string): string {
  const chars = [...text];
  for (let k = rng.int(1, 4); k > 0; k--) {
    const at = rng.int(0, chars.length);
    switch (rng.int(0, 5)) {
      case 0:
        chars.splice(at, rng.int(1, 20));
        break;
      case 1:
        chars.splice(at, 0, ...rng.string(12, ':-[]{}&*!|>\'"#%@` \n\t,?abc123\\\u0000\u00e9'));
        break;
      case 2:
        chars.splice(at, 0, ...rng.pick(['\n  - ', ': ', ' &x ', ' *x', ' !!str ', ' !!int ', '\n---\n', '\t', '<<: *x\n', ' {', '[ ', '"', "'"]));
        break;
      case 3: {
        const lines = chars.join('').split('\n');
        const i = rng.int(0, lines.length - 1);
        lines.splice(rng.int(0, lines.length), 0, lines[i]!);
        return lines.join('\n');
      }
      case 4: {
        const lines = chars.join('').split('\n');
        const i = rng.int(0, lines.length - 1);
        lines[i] = ' '.repeat(rng.int(0, 6)) + lines[i]!.trimStart();
        return lines.join('\n');
      }
      default:
        chars[Math.min(at, chars.length - 1)] = rng.pick(['0', 'x', ':', ' ', '\n', '-']);
    }
  }
  return chars.join('');
}

export function generateYaml(rng: Rng, i: number): string {
  if (i < SPECIALS.length) return SPECIALS[i]!;
  const r = rng.next();
  if (r < 0.4) {
    let v: unknown = BASE;
    for (let k = rng.int(1, 3); k > 0; k--) v = mutate(v, rng);
    try {
      return String(stringify(v) ?? '');
    } catch {
      return String(v); // a value the YAML library will not write: its String() is an input too
    }
  }
  return textEdit(rng, r < 0.8 ? BASE_TEXT : rng.pick(SPECIALS));
}

export function checkYamlOutcome(text: string, run: () => unknown): CaseOutcome {
  const t0 = performance.now();
  try {
    const config = (run() as { config: unknown }).config;
    const ms = performance.now() - t0;
    if (ms > 2000) return { kind: 'accepted', problem: `took ${ms.toFixed(0)} ms`, input: JSON.stringify(text) };
    if (!RouterConfigSchema.safeParse(config).success)
      return { kind: 'accepted', problem: 'loaded a configuration that does not pass the schema', input: JSON.stringify(text) };
    return { kind: 'accepted', label: 'valid' };
  } catch (err) {
    const ms = performance.now() - t0;
    if (!(err instanceof ConfigError))
      return { kind: 'rejected', problem: `not a ConfigError: ${(err as Error)?.constructor?.name}: ${(err as Error)?.message}`, input: JSON.stringify(text) };
    if (ms > 2000) return { kind: 'rejected', problem: `took ${ms.toFixed(0)} ms to refuse`, input: JSON.stringify(text) };
    const bad = err.issues.find(
      (x) => !x.message || typeof x.line !== 'number' || typeof x.column !== 'number' || x.line < 1 || x.column < 1 || !/fuzz\.yaml:\d+:\d+: /.test(x.message),
    );
    if (bad) return { kind: 'rejected', problem: `an issue without a message or position: ${JSON.stringify(bad)}`, input: JSON.stringify(text) };
    const m = err.issues[0]!.message;
    return {
      kind: 'rejected',
      label: /YAML syntax error/.test(m)
        ? 'syntax error'
        : /unknown key/.test(m)
          ? 'unknown key'
          : /invalid value/.test(m)
            ? 'invalid value'
            : /expected a mapping/.test(m)
              ? 'not a mapping'
              : 'other',
    };
  }
}

export function yamlTarget() {
  return {
    run(rng: Rng, i: number): CaseOutcome {
      const text = generateYaml(rng, i);
      return checkYamlOutcome(text, () => parseConfigYaml(text, 'fuzz.yaml'));
    },
  };
}
