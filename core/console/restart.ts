// What survives a restart. The console writes every applied revision to its file, but the
// router it runs was started with flags, and flags override the file at every start
// (docs/console.md, "Where the configuration lives"). So a change the operator makes to a
// setting a flag gave at start is written to the file (nothing is lost on disk), and the
// console says, before and after the apply, that a restart with the same flags sets it back;
// Overview's sync state is the same computation over the file as it is on disk.
//
// The rules:
//   - the file gets the running configuration, except the embedded reference worker, and
//     except a setting a start flag gave that the operator has not changed since the start
//     or the last reload (that value is the flag's, not the operator's: the file keeps its
//     own, or the default; under --worker-urls, its own worker list);
//   - what a restart would run is the file with the start flags applied over it, as
//     `mmtc serve` does at start; what differs from the running configuration (the embedded
//     worker aside: a restart starts a new one) lives only until the next restart;
//   - a reload of the file runs what a restart would: the file with the start flags over it.
import { applyConfigFlags, workerFlagsText, type ConfigFlags } from '../config/load.ts';
import type { ConfigOrigins } from '../config/origins.ts';
import { RouterConfigSchema, type RouterConfig } from '../config/schema.ts';
import { startFlagFor, type DiffEntry } from './contract.ts';
import { diffConfigs } from './diff.ts';

/** A router setting given by a flag when the console started, and the value it gave. */
export interface StartFlag {
  key: string;
  /** The flag and its value as typed, e.g. `--multimodal-tensor-transport auto`. */
  flag: string;
  value: unknown;
}

/** The settings given by flags at start: router settings from the start revision's origins, and the worker list when --worker-urls was given. */
export function startFlagsOf(config: RouterConfig, origins: Readonly<ConfigOrigins>, flags: ConfigFlags): StartFlag[] {
  const out: StartFlag[] = [];
  for (const [key, origin] of Object.entries(origins)) {
    if (!origin.startsWith('--') || key.includes('[') || key === 'workers') continue;
    const value = (config as Record<string, unknown>)[key];
    // A switch (--pd-disaggregation, --allow-private-media-hosts) is typed without a value.
    const isSwitch = value === true || (key === 'disaggregation' && origin.endsWith('-disaggregation'));
    out.push({ key, flag: isSwitch ? origin : `${origin} ${flagText(value)}`, value });
  }
  const workerFlags = workerFlagsText(flags, config.workers);
  if (workerFlags !== undefined) out.push({ key: 'workers', flag: workerFlags, value: config.workers.map((w) => w.url) });
  return out;
}

function flagText(value: unknown): string {
  if (Array.isArray(value)) return value.join(',');
  if (value !== null && typeof value === 'object') return JSON.stringify(value);
  return String(value);
}

/**
 * The configuration the file gets for an applied `config` (see the rules above):
 * `operatorKeys` are the settings the operator has changed since the start (or the last
 * reload): those are written as they run; a flagged setting the operator never touched keeps
 * the file's own value (or the default), and so does the file's worker list under
 * --worker-urls.
 */
export function configForFile(
  config: RouterConfig,
  startFlags: readonly StartFlag[],
  fileConfig: RouterConfig | undefined,
  embedded: ReadonlySet<string>,
  operatorKeys: ReadonlySet<string>,
): RouterConfig {
  const out: Record<string, unknown> = { ...config, workers: config.workers.filter((w) => !embedded.has(w.url)) };
  const defaults = RouterConfigSchema.parse({}) as Record<string, unknown>;
  for (const f of startFlags) {
    if (operatorKeys.has(f.key)) continue; // the operator's own value: written
    const fromFile = fileConfig ? (fileConfig as Record<string, unknown>)[f.key] : undefined;
    out[f.key] = fromFile ?? defaults[f.key];
  }
  return RouterConfigSchema.parse(out);
}

/** What a restart with `flags` runs, given `fileConfig` as the file's content: the file with the flags applied over it, as `mmtc serve` does at start. */
export function restartConfig(fileConfig: RouterConfig, flags: ConfigFlags): RouterConfig {
  try {
    return applyConfigFlags(fileConfig, flags).config;
  } catch {
    return fileConfig; // the flags were valid at start; they cannot fail on another file
  }
}

/**
 * What a restart with `flags` would run differently from `running`, given `fileConfig` as the
 * file's content: each entry's `before` is the running value, `after` the restart's.
 */
export function restartChanges(running: RouterConfig, fileConfig: RouterConfig, flags: ConfigFlags, embedded: ReadonlySet<string>): DiffEntry[] {
  const kept = { ...running, workers: running.workers.filter((w) => !embedded.has(w.url)) };
  return diffConfigs(kept, restartConfig(fileConfig, flags));
}

/** Of what a restart would change, what the start flags set back (a hand edit of the file is drift, not a flag), with the flags behind it. */
export function flagCausedChanges(changes: readonly DiffEntry[], startFlags: readonly StartFlag[]): { changes: DiffEntry[]; flags: string[] } {
  const byFlags = changes.filter((d) => startFlagFor(startFlags, d.path) !== undefined);
  return { changes: byFlags, flags: startFlags.filter((f) => byFlags.some((d) => startFlagFor([f], d.path))).map((f) => f.flag) };
}
