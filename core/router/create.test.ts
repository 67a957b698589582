import { describe, expect, it } from 'vitest';
import { readTransportEnvironment } from '../config/env.ts';
import { ConfigError } from '../config/errors.ts';
import { createRouter } from './create.ts';

const environment = readTransportEnvironment({ SMG_MM_TENSOR_TRANSPORT: 'shm' });

describe('createRouter (programmatic API)', () => {
  it('uses the YAML field names and resolves with provenance', () => {
    const router = createRouter(
      { multimodal_shm_min_bytes: 0, workers: [{ url: 'grpc://127.0.0.1:50051', multimodal_tensor_transport: 'auto' }, { url: 'grpc://127.0.0.1:50052' }] },
      { environment },
    );
    const [a, b] = router.resolveTransport();
    expect(a!.multimodal_tensor_transport).toMatchObject({ value: 'auto', source: 'worker' });
    expect(a!.multimodal_tensor_transport.layers[0]!.origin).toBe('createRouter()');
    expect(b!.multimodal_tensor_transport).toMatchObject({ value: 'shm', source: 'env' });
    expect(b!.multimodal_shm_min_bytes).toMatchObject({ value: 0, source: 'router' });
  });

  it('resolveTransport says, as mmtc config resolve does, that an SGLang worker travels inline and that an undeclared runtime decides', () => {
    const router = createRouter(
      {
        multimodal_tensor_transport: 'auto',
        workers: [{ url: 'grpc://127.0.0.1:50051', runtime: 'sglang' }, { url: 'grpc://127.0.0.1:50052' }, { url: 'grpc://127.0.0.1:50053', runtime: 'vllm' }],
      },
      { environment },
    );
    const [sglang, undeclared, vllm] = router.resolveTransport();
    expect(sglang!.notes).toEqual([
      'SGLang carries tensors inline only (its TensorData has no /dev/shm handle): mode auto travels inline (runtime_inline_only)',
    ]);
    expect(undeclared!.notes).toEqual([
      'runtime not declared: the router detects it when it reaches the worker; SGLang carries tensors inline only, whatever the mode (runtime_inline_only)',
    ]);
    expect(vllm!.notes).toEqual([]);
  });

  it.each([
    [{ multimodal_tensor_transport: 'fast' }, "invalid value 'fast' for multimodal_tensor_transport: expected inline, shm, auto or rdma"],
    [{ multimodal_tensor_transport: 'SHM' }, "invalid value 'SHM' for multimodal_tensor_transport: expected inline, shm, auto or rdma"],
    [{ multimodal_shm_min_bytes: -1 }, 'invalid value -1 for multimodal_shm_min_bytes: expected a non-negative integer number of bytes (e.g. 65536)'],
    [{ multimodal_shm_min_bytes: 1.5 }, 'invalid value 1.5 for multimodal_shm_min_bytes: expected a non-negative integer number of bytes (e.g. 65536)'],
    [{ multimodal_shm_min_bytes: Number.NaN }, 'invalid value NaN for multimodal_shm_min_bytes: expected a non-negative integer number of bytes (e.g. 65536)'],
    [
      { workers: [{ url: 'grpc://a:1', multimodal_shm_min_bytes: '64k' }] },
      "invalid value '64k' for workers[0].multimodal_shm_min_bytes: expected a non-negative integer number of bytes (e.g. 65536)",
    ],
  ])('throws a ConfigError for %j instead of falling back', (options, message) => {
    let thrown: unknown;
    try {
      createRouter(options as never, { environment });
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(ConfigError);
    expect((thrown as ConfigError).issues.map((i) => i.message)).toEqual([message]);
  });

  it('applyConfig swaps the whole config or nothing', () => {
    const router = createRouter({ multimodal_tensor_transport: 'inline' }, { environment });
    const before = router.config;
    expect(() => router.applyConfig({ multimodal_tensor_transport: 'shm', port: 70000 })).toThrow(ConfigError);
    expect(router.config).toBe(before);
    expect(router.revision).toBe(1);
    expect(router.applyConfig({ multimodal_tensor_transport: 'shm' })).toBe(2);
    expect(router.resolveTransport()[0]!.multimodal_tensor_transport).toMatchObject({ value: 'shm', source: 'router' });
  });
});

describe('createRouter().start()', () => {
  it('serves the same API with the embedding options', async () => {
    const { startMmtc } = await import('../test/cli.ts');
    const worker = await startMmtc(['worker', '--runtime', 'vllm', '--port', '0'], /listening on grpc:\/\//);
    const url = worker.line.match(/grpc:\/\/\S+/)![0];
    const router = createRouter({ port: 0, multimodal_tensor_transport: 'auto', workers: [{ url }] }, { environment });
    const lines: string[] = [];
    const running = await router.start({ log: (l) => lines.push(l) });
    try {
      const health = (await (await fetch(`${running.url}/health`)).json()) as { workers: Array<{ url: string; runtime: string; healthy: boolean }> };
      expect(health.workers).toEqual([expect.objectContaining({ url, runtime: 'vllm', healthy: true })]);
      expect(lines.some((l) => l.includes('transport auto (from router)'))).toBe(true);
    } finally {
      await running.close();
      await worker.stop();
    }
  });
});
