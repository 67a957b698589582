// The CLI flags: the router's flags as commander hands them to core/config/load.ts
// (applyConfigFlags), every combination either a valid configuration or a ConfigError whose
// every issue names its flag; and a sample of the same argument lists through the real
// `mmtc config resolve --json` / `mmtc config export`: exit 0 with valid output, or a short
// `error:` (exit 1 from the parser, 2 from validation), never a stack trace.
import { spawnSync } from 'node:child_process';
import { ConfigError } from '../../../core/config/errors.ts';
import { applyConfigFlags, CONFIG_FLAG_HELP, type ConfigFlags } from '../../../core/config/load.ts';
import { RouterConfigSchema } from '../../../core/config/schema.ts';
import { parseRouterConfig } from '../../../core/config/validate.ts';
import { BIN, baseEnv } from '../../lib/procs.ts';
import { NASTY_STRINGS, type Rng } from '../../lib/rng.ts';
import type { CaseOutcome } from '../harness.ts';

const FLAGS = CONFIG_FLAG_HELP.map((f) => ({ flag: f.flags.split(' ')[0]!, takes: f.flags.includes('<'), list: f.flags.includes('...') })).filter(
  (f) => f.flag !== '--config',
);
const prop = (flag: string) => flag.replace(/^--/, '').replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
const GOOD: Record<string, string[]> = {
  '--host': ['127.0.0.1', '::1', 'localhost'],
  '--port': ['0', '30000', '65535'],
  '--worker-urls': ['grpc://127.0.0.1:50051', 'unix:///tmp/w.sock', 'grpc://[::1]:1'],
  '--multimodal-tensor-transport': ['inline', ' SHM ', 'auto', 'rdma'],
  '--multimodal-shm-min-bytes': ['0', '65536', ' 1024 '],
  '--limit-mm-per-prompt': ['image=2', '{"image": 3}', 'image=0'],
  '--allowed-media-domains': ['images.example.com', 'a.b'],
  '--request-timeout-secs': ['1', '0.5', '600'],
};
const BAD = [
  '-1',
  '1.5',
  '1e6',
  '64k',
  'NaN',
  '',
  ' ',
  'fast',
  '99999999999999999999',
  'image=',
  '{',
  'image=-1',
  'video=1',
  'grpc://a',
  'http://x:1',
  'unix://',
  '*.example.com',
  '0x10',
  'true',
  ...NASTY_STRINGS.filter((s) => !s.includes('\u0000')),
];

function draw(rng: Rng): { flags: ConfigFlags; argv: string[] } {
  const flags: ConfigFlags = {};
  const argv: string[] = [];
  for (let k = rng.int(1, 4); k > 0; k--) {
    const f = rng.pick(FLAGS);
    if (!f.takes) {
      flags[prop(f.flag)] = true;
      argv.push(f.flag);
      continue;
    }
    const values = Array.from({ length: f.list ? rng.int(1, 3) : 1 }, () =>
      rng.chance(0.5) && GOOD[f.flag] ? rng.pick(GOOD[f.flag]!) : rng.chance(0.8) ? rng.pick(BAD) : rng.string(12),
    );
    flags[prop(f.flag)] = f.list ? values : values[0]!;
    argv.push(f.flag, ...values);
  }
  return { flags, argv };
}

export function flagsTarget() {
  let cliRuns = 0;
  const maxCli = Number(process.env.MMTC_FUZZ_CLI_RUNS ?? 6);
  return {
    run(rng: Rng, i: number): CaseOutcome {
      const { flags, argv } = draw(rng);
      const input = JSON.stringify(argv);
      let outcome: CaseOutcome;
      try {
        const loaded = applyConfigFlags(parseRouterConfig({}), flags);
        if (!RouterConfigSchema.safeParse(loaded.config).success)
          return { kind: 'accepted', problem: 'flags gave a configuration that fails the schema', input };
        outcome = { kind: 'accepted', label: 'valid flags' };
      } catch (err) {
        if (!(err instanceof ConfigError))
          return { kind: 'rejected', problem: `not a ConfigError: ${(err as Error)?.constructor?.name}: ${(err as Error)?.message}`, input };
        const unnamed = err.issues.find((x) => !/--[a-z-]+/.test(x.message) && !/--[a-z-]+/.test(x.path));
        if (unnamed) return { kind: 'rejected', problem: `an issue that names no flag: ${JSON.stringify(unnamed)}`, input };
        outcome = { kind: 'rejected', label: 'invalid flag value' };
      }
      // An argument cannot hold a NUL byte (the kernel's argv is C strings): such sets are checked in process only.
      if (i % 7 === 0 && cliRuns < maxCli && !argv.some((a) => a.includes('\u0000'))) {
        cliRuns += 1;
        const command = rng.chance(0.5) ? ['config', 'resolve', '--json'] : ['config', 'export'];
        const r = spawnSync(process.execPath, [BIN, ...command, ...argv], { env: baseEnv(), encoding: 'utf8', timeout: 30_000 });
        const all = `${r.stdout}\n${r.stderr}`;
        if (r.signal) return { kind: outcome.kind, problem: `mmtc ${command.join(' ')} was killed by ${r.signal}`, input };
        if (/^\s+at .+:\d+:\d+\)?$/m.test(all) || /TypeError|ReferenceError|RangeError|SyntaxError/.test(all))
          return { kind: outcome.kind, problem: `mmtc ${command.join(' ')} printed a stack trace: ${all.slice(0, 400)}`, input };
        if (r.status === 0) {
          if (outcome.kind === 'rejected')
            return { kind: 'rejected', problem: `mmtc accepted flags the loader refuses (exit 0): ${r.stdout.slice(0, 200)}`, input };
          if (command[2] === '--json') JSON.parse(r.stdout);
        } else if (r.status === 1 || r.status === 2) {
          if (!/^error: /m.test(r.stderr)) return { kind: outcome.kind, problem: `exit ${r.status} without an error: line: ${r.stderr.slice(0, 300)}`, input };
          if (r.status === 2 && outcome.kind === 'accepted')
            return { kind: 'accepted', problem: `mmtc refused flags the loader accepts: ${r.stderr.slice(0, 300)}`, input };
        } else return { kind: outcome.kind, problem: `mmtc ${command.join(' ')} exited ${r.status}: ${all.slice(0, 300)}`, input };
        outcome.label = `${outcome.label} (real CLI, exit ${r.status})`;
      }
      return outcome;
    },
  };
}
