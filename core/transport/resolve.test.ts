import { describe, expect, it } from 'vitest';
import { readTransportEnvironment } from '../config/env.ts';
import { WorkerSpecSchema, type WorkerSpecInput } from '../config/schema.ts';
import { resolveConfiguredWorkers, resolveWorkerTransport } from './resolve.ts';
import { RouterConfigSchema } from '../config/schema.ts';

// The environment cases of the precedence (docs/configuration.md, "Precedence"), with what the env layers must end up as.
type EnvCase = {
  name: string;
  vars: (canonical: string, legacy: string) => Record<string, string>;
  contributes: 'env' | 'env_legacy' | null;
  states: [string, string];
};
const ENV_CASES: EnvCase[] = [
  { name: 'no variables', vars: () => ({}), contributes: null, states: ['unset', 'unset'] },
  { name: 'canonical valid', vars: (c) => ({ C: c }), contributes: 'env', states: ['valid', 'unset'] },
  { name: 'canonical and alias valid', vars: (c, l) => ({ C: c, L: l }), contributes: 'env', states: ['valid', 'not_consulted'] },
  { name: 'alias only', vars: (_c, l) => ({ L: l }), contributes: 'env_legacy', states: ['unset', 'valid'] },
  { name: 'blank canonical, alias valid', vars: (_c, l) => ({ C: '  ', L: l }), contributes: 'env_legacy', states: ['blank', 'valid'] },
  { name: 'canonical invalid, alias valid', vars: (_c, l) => ({ C: 'bogus', L: l }), contributes: null, states: ['invalid', 'not_consulted'] },
  { name: 'alias invalid', vars: () => ({ L: 'bogus' }), contributes: null, states: ['unset', 'invalid'] },
];

const KNOBS = {
  multimodal_tensor_transport: {
    canonical: 'SMG_MM_TENSOR_TRANSPORT',
    legacy: 'SMG_TOKENSPEED_MM_TENSOR_TRANSPORT',
    worker: 'shm',
    router: 'auto',
    envRaw: ' RDMA ',
    env: 'rdma',
    legacyRaw: 'Shm',
    legacyValue: 'shm',
    default: 'inline',
  },
  multimodal_shm_min_bytes: {
    canonical: 'SMG_MM_SHM_MIN_BYTES',
    legacy: 'SMG_TOKENSPEED_MM_SHM_MIN_BYTES',
    worker: 1,
    router: 2,
    envRaw: '3',
    env: 3,
    legacyRaw: ' 4 ',
    legacyValue: 4,
    default: 65536,
  },
} as const;

describe('precedence matrix (worker > router > env > env_legacy > default)', () => {
  for (const [knob, k] of Object.entries(KNOBS) as Array<[keyof typeof KNOBS, (typeof KNOBS)[keyof typeof KNOBS]]>) {
    for (const workerSet of [false, true]) {
      for (const routerSet of [false, true]) {
        for (const envCase of ENV_CASES) {
          it(`${knob}: worker ${workerSet ? 'set' : 'unset'}, router ${routerSet ? 'set' : 'unset'}, ${envCase.name}`, () => {
            const vars = Object.fromEntries(
              Object.entries(envCase.vars(k.envRaw, k.legacyRaw)).map(([which, v]) => [which === 'C' ? k.canonical : k.legacy, v]),
            );
            const worker = WorkerSpecSchema.parse({ url: 'grpc://w:1', ...(workerSet ? { [knob]: k.worker } : {}) });
            const router = routerSet ? { [knob]: k.router } : {};
            const resolved = resolveWorkerTransport({ worker, router, env: readTransportEnvironment(vars) })[knob];

            const envValue = envCase.contributes === 'env' ? k.env : envCase.contributes === 'env_legacy' ? k.legacyValue : undefined;
            const candidates: Array<[string, unknown]> = [
              ['worker', workerSet ? k.worker : undefined],
              ['router', routerSet ? k.router : undefined],
              ['env', envCase.contributes === 'env' ? envValue : undefined],
              ['env_legacy', envCase.contributes === 'env_legacy' ? envValue : undefined],
              ['default', k.default],
            ];
            const winner = candidates.find(([, v]) => v !== undefined)!;
            expect(resolved.value).toBe(winner[1]);
            expect(resolved.source).toBe(winner[0]);

            // Every layer is reported, with its raw value, whether or not it won.
            expect(resolved.layers.map((l) => l.layer)).toEqual(['worker', 'router', 'env', 'env_legacy', 'default']);
            const expectedState = (layer: string, present: boolean) => (!present ? 'unset' : layer === winner[0] ? 'won' : 'beaten');
            expect(resolved.layers[0]!.state).toBe(expectedState('worker', workerSet));
            expect(resolved.layers[0]!.raw).toBe(workerSet ? k.worker : null);
            expect(resolved.layers[1]!.state).toBe(expectedState('router', routerSet));
            expect(resolved.layers[1]!.raw).toBe(routerSet ? k.router : null);
            const envState = (s: string, layer: string) => (s === 'valid' ? expectedState(layer, true) : s);
            expect(resolved.layers[2]!.state).toBe(envState(envCase.states[0], 'env'));
            expect(resolved.layers[2]!.raw).toBe(vars[k.canonical] ?? null);
            expect(resolved.layers[3]!.state).toBe(envState(envCase.states[1], 'env_legacy'));
            expect(resolved.layers[3]!.raw).toBe(vars[k.legacy] ?? null);
            expect(resolved.layers[4]!).toMatchObject({ raw: k.default, state: expectedState('default', true) });
          });
        }
      }
    }
  }
});

describe('disaggregation: whose overrides apply', () => {
  const env = readTransportEnvironment({});
  const w = (spec: WorkerSpecInput) => WorkerSpecSchema.parse(spec);

  it('the first encode worker overrides prefill and decode workers', () => {
    const workers = [
      w({ url: 'grpc://p:1', worker_type: 'prefill', multimodal_tensor_transport: 'inline' }),
      w({ url: 'grpc://d:1', worker_type: 'decode', multimodal_shm_min_bytes: 7 }),
      w({ url: 'grpc://e1:1', worker_type: 'encode', multimodal_tensor_transport: 'auto' }),
      w({ url: 'grpc://e2:1', worker_type: 'encode', multimodal_tensor_transport: 'shm' }),
    ];
    const resolved = resolveConfiguredWorkers(RouterConfigSchema.parse({ workers }), env, {}, () => undefined);
    expect(resolved.map((r) => r.multimodal_tensor_transport.value)).toEqual(['auto', 'auto', 'auto', 'shm']);
    expect(resolved.map((r) => r.multimodal_shm_min_bytes.value)).toEqual([65536, 65536, 65536, 65536]);
    expect(resolved[0]!.overrides_from).toBe('grpc://e1:1');
    expect(resolved[0]!.notes).toEqual(["tensors go to the encode worker; grpc://e1:1's overrides apply"]);
    expect(resolved[0]!.multimodal_tensor_transport.layers[0]!.name).toBe('workers[2].multimodal_tensor_transport');
  });

  it('without an encode worker, decode workers take the prefill worker overrides', () => {
    const workers = [
      w({ url: 'grpc://d:1', worker_type: 'decode', multimodal_tensor_transport: 'inline' }),
      w({ url: 'grpc://p:1', worker_type: 'prefill', multimodal_tensor_transport: 'shm', multimodal_shm_min_bytes: 0 }),
    ];
    const [decode, prefill] = resolveConfiguredWorkers(RouterConfigSchema.parse({ workers }), env, {}, () => undefined);
    expect(decode!.multimodal_tensor_transport).toMatchObject({ value: 'shm', source: 'worker' });
    expect(decode!.multimodal_shm_min_bytes.value).toBe(0);
    expect(prefill!.overrides_from).toBe('grpc://p:1');
  });

  it('rdma resolves as rdma but says it travels inline', () => {
    const r = resolveWorkerTransport({ worker: w({ url: 'grpc://a:1', multimodal_tensor_transport: 'rdma' }), router: {}, env });
    expect(r.multimodal_tensor_transport.value).toBe('rdma');
    expect(r.notes).toContain('rdma has no lane in this router yet: tensors travel inline');
  });

  it('with no worker configured, shows what a worker without overrides gets', () => {
    const [only] = resolveConfiguredWorkers(
      RouterConfigSchema.parse({ multimodal_shm_min_bytes: 0 }),
      readTransportEnvironment({ SMG_MM_TENSOR_TRANSPORT: 'shm' }),
      {},
      () => undefined,
    );
    expect(only!.multimodal_tensor_transport).toMatchObject({ value: 'shm', source: 'env' });
    expect(only!.multimodal_shm_min_bytes).toMatchObject({ value: 0, source: 'router' });
  });
});
