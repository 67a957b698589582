// The layer the Workers editor's "inherit" choice names ("no override: shm from router"), for
// every case of the ladder: the worker has no override (the winner below it), the worker's
// override won (the first layer below holding a value, past unset, blank and invalid ones),
// and nothing below the worker holds a value.
import { describe, expect, it } from 'vitest';
import type { ResolvedWorkerTransport } from '../../../core/console/contract.ts';
import { inheritedLayer } from './inherited.ts';

type ModeKnob = ResolvedWorkerTransport['multimodal_tensor_transport'];
type Reading = ModeKnob['layers'][number];

const unset = (layer: Reading['layer'], name: string): Reading => ({ layer, name, raw: null, value: null, state: 'unset' });
const set = (layer: Reading['layer'], name: string, value: ModeKnob['value'], state: Reading['state'], origin?: string): Reading => ({
  layer,
  name,
  raw: value,
  value,
  state,
  ...(origin ? { origin } : {}),
});
const knob = (...layers: Reading[]): ModeKnob => {
  const won = layers.find((l) => l.state === 'won');
  return { value: won?.value ?? 'auto', source: won?.layer ?? 'default', layers, warnings: [] };
};

describe('the layer a worker without an override inherits', () => {
  it('no override: the layer that won (the router here)', () => {
    const k = knob(
      unset('worker', 'workers[0].multimodal_tensor_transport'),
      set('router', 'multimodal_tensor_transport', 'shm', 'won', 'router.yaml:3:1'),
      set('env', 'MMTC_MULTIMODAL_TENSOR_TRANSPORT', 'inline', 'beaten'),
      set('default', 'built-in default', 'auto', 'beaten'),
    );
    expect(inheritedLayer(k)).toBe(k.layers[1]);
  });

  it('no override and nothing set: the built-in default that won', () => {
    const k = knob(unset('worker', 'w'), unset('router', 'r'), unset('env', 'e'), unset('env_legacy', 'l'), set('default', 'built-in default', 'auto', 'won'));
    expect(inheritedLayer(k)?.layer).toBe('default');
  });

  it("the worker's own override won: the first layer below it that holds a value, the beaten router value", () => {
    const k = knob(set('worker', 'w', 'inline', 'won'), set('router', 'r', 'shm', 'beaten'), set('default', 'built-in default', 'auto', 'beaten'));
    expect(inheritedLayer(k)).toBe(k.layers[1]);
  });

  it("the worker's override won and the layers below it are unset, blank or invalid: past them to the default", () => {
    const blank: Reading = { layer: 'env', name: 'MMTC_MULTIMODAL_TENSOR_TRANSPORT', raw: '  ', value: null, state: 'blank' };
    const invalid: Reading = { layer: 'env_legacy', name: 'SGLANG_MM_TRANSPORT', raw: 'shmm', value: null, state: 'invalid' };
    const k = knob(set('worker', 'w', 'shm', 'won'), unset('router', 'r'), blank, invalid, set('default', 'built-in default', 'auto', 'beaten'));
    expect(inheritedLayer(k)).toBe(k.layers[4]);
  });

  it('nothing below the worker holds a value: none, and the editor says the router, env or default decides', () => {
    const k = knob(set('worker', 'w', 'shm', 'won'), unset('router', 'r'), unset('env', 'e'));
    expect(inheritedLayer(k)).toBeUndefined();
  });
});
