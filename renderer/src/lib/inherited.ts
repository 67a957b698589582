// What a worker inherits for a transport setting it has no override for: the Workers editor's
// "inherit" choice says "no override: <value> from <layer>", and this decides which layer that
// is. The ladder lists the layers in precedence order (worker > router > env > env_legacy >
// default; core/transport/resolution-schema.ts).
import type { ResolvedWorkerTransport } from '../../../core/console/contract.ts';

type Knob = ResolvedWorkerTransport['multimodal_tensor_transport'] | ResolvedWorkerTransport['multimodal_shm_min_bytes'];

/**
 * The layer below the worker's own that a worker without an override takes its value from:
 * - the layer that won, when it is not the worker's own (the worker has no override: what it
 *   shows now is what it inherits);
 * - when the worker's own override won, the first layer below it, in precedence order, that
 *   holds a value (a beaten router value, an env variable, the built-in default); unset, blank
 *   and invalid layers hold none;
 * - undefined when no layer below the worker holds a value.
 */
export function inheritedLayer<K extends { layers: ReadonlyArray<Knob['layers'][number]> }>(knob: K): K['layers'][number] | undefined {
  return knob.layers.find((l) => l.state === 'won' && l.layer !== 'worker') ?? knob.layers.find((l) => l.layer !== 'worker' && l.value !== null);
}
