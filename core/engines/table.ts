// The engine table: every runtime this router speaks, and the one place that turns a runtime's
// name into what it means. Modules that must know something about a worker's runtime (its
// encoder dtype, whether it has a /dev/shm lane, whether the request carries one encoder tensor
// per image) ask here; the CLI's --runtime choices and the registry's checks come from here.
// Nothing an engine module imports imports this table, so there is no import circle.
import type { Runtime, WireRuntime } from '../config/schema.ts';
import type { Engine, EngineCapabilities } from './engine.ts';
import { sglangEngine } from './sglang.ts';
import { tokenSpeedEngine } from './tokenspeed.ts';
import { vllmEngine } from './vllm.ts';

export const ENGINES: Readonly<Record<WireRuntime, Engine>> = { tokenspeed: tokenSpeedEngine, vllm: vllmEngine, sglang: sglangEngine };

/** The runtimes with an engine, in the table's order (discovery tries them all at once). */
export const ENGINE_RUNTIMES = Object.keys(ENGINES) as WireRuntime[];

export function engineFor(runtime: WireRuntime): Engine {
  return ENGINES[runtime];
}

export function capabilitiesOf(runtime: WireRuntime): EngineCapabilities {
  return ENGINES[runtime].capabilities;
}

/** A worker entry's runtime, when it names one this router speaks (`unspecified`: detected). */
export function declaredRuntime(runtime: Runtime | string | undefined): WireRuntime | undefined {
  return runtime !== undefined && Object.hasOwn(ENGINES, runtime) ? (runtime as WireRuntime) : undefined;
}

/** What transport resolution asks of a worker's runtime: its name for messages and whether it has a /dev/shm lane (undefined: not known yet). */
export function laneFacts(runtime: WireRuntime | undefined): { name: string; shmLane: boolean } | undefined {
  return runtime === undefined ? undefined : { name: capabilitiesOf(runtime).label, shmLane: capabilitiesOf(runtime).shmLane };
}

/** The runtimes whose capabilities pass `test`, by the names people write (`TokenSpeed and vLLM`). */
export function runtimesWhere(test: (c: EngineCapabilities) => boolean): string {
  const labels = ENGINE_RUNTIMES.filter((r) => test(capabilitiesOf(r))).map((r) => capabilitiesOf(r).label);
  return labels.length <= 1 ? (labels[0] ?? 'none') : `${labels.slice(0, -1).join(', ')} and ${labels.at(-1)}`;
}

/** What a resolution without the worker's runtime cannot say yet: which runtimes travel inline whatever the mode. */
export function undeclaredRuntimeNote(): string {
  const inlineOnly = ENGINE_RUNTIMES.filter((r) => !capabilitiesOf(r).shmLane).length;
  return `runtime not declared: the router detects it when it reaches the worker; ${runtimesWhere((c) => !c.shmLane)} carr${inlineOnly === 1 ? 'ies' : 'y'} tensors inline only, whatever the mode (runtime_inline_only)`;
}
