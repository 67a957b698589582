// The child side of fuzz/harness.ts: `child.ts <target> <seed> <count> <seconds> [args…]`.
// Prints `CASE i` before each case and `RESULT {…}` at the end. With MMTC_FUZZ_AS_USER=NAME
// (root only) the cases run as that user, once the target is loaded.
import { dropPrivileges } from '../../core/refworker/user.ts';
import { Rng } from '../lib/rng.ts';
import type { CaseOutcome, FuzzResult } from './harness.ts';

const [target, seedArg, countArg, secondsArg, ...args] = process.argv.slice(2);
const seed = Number(seedArg);
const count = Number(countArg);
const seconds = Number(secondsArg);

const targets: Record<
  string,
  () => Promise<{ setup?: () => Promise<void>; run: (rng: Rng, i: number) => Promise<CaseOutcome> | CaseOutcome; teardown?: () => Promise<void> }>
> = {
  yaml: async () => (await import('./targets/yaml.ts')).yamlTarget(),
  env: async () => (await import('./targets/env.ts')).envTarget(),
  flags: async () => (await import('./targets/flags.ts')).flagsTarget(),
  reader: async () => (await import('./targets/reader.ts')).readerTarget(args),
  ipc: async () => (await import('./targets/ipc.ts')).ipcTarget(),
};

const make = targets[target!];
if (!make) throw new Error(`no fuzz target ${target}`);
const t = await make();
await t.setup?.();
// As another user (root only): loaded as root, so it runs from a checkout that user cannot enter.
if (process.env.MMTC_FUZZ_AS_USER) dropPrivileges(process.env.MMTC_FUZZ_AS_USER);
const result: FuzzResult = { tried: 0, accepted: 0, rejected: 0, labels: {}, failures: [], slowest: { case: -1, ms: 0 }, stoppedBy: 'count' };
const rng = new Rng(seed);
const end = performance.now() + seconds * 1000;
for (let i = 0; i < count; i++) {
  if (performance.now() > end) {
    result.stoppedBy = 'time';
    break;
  }
  process.stdout.write(`CASE ${i}\n`);
  const t0 = performance.now();
  let outcome: CaseOutcome;
  try {
    outcome = await t.run(rng.fork(i), i);
  } catch (err) {
    outcome = { kind: 'rejected', problem: `crashed: ${(err as Error)?.stack?.split('\n').slice(0, 4).join(' | ') ?? String(err)}` };
  }
  const ms = performance.now() - t0;
  if (ms > result.slowest.ms) result.slowest = { case: i, ms };
  result.tried += 1;
  result[outcome.kind] += 1;
  const label = `${outcome.kind}: ${outcome.label ?? 'other'}`;
  result.labels[label] = (result.labels[label] ?? 0) + 1;
  if (outcome.problem && result.failures.length < 50)
    result.failures.push({ case: i, problem: outcome.problem, ...(outcome.input !== undefined ? { input: outcome.input.slice(0, 600) } : {}) });
}
await t.teardown?.();
process.stdout.write(`RESULT ${JSON.stringify(result)}\n`, () => process.exit(0));
