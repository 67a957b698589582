import { describe, expect, it } from 'vitest';
import { readTransportEnvironment } from './env.ts';
import { ConfigError } from './errors.ts';
import { RouterConfigSchema } from './schema.ts';
import { carryOrigins } from './origins.ts';
import { ConfigConflictError, ConfigStore, EMBEDDED_DEFAULT_ORIGIN, RestartRequiredError } from './store.ts';

const env = readTransportEnvironment({});
const base = RouterConfigSchema.parse({
  port: 0,
  multimodal_tensor_transport: 'inline',
  workers: [{ url: 'grpc://a:1' }, { url: 'grpc://b:2', multimodal_shm_min_bytes: 0 }],
});
const by = { origin: 'console (HTTP)', client: 'http' as const };

function store() {
  return new ConfigStore({
    config: base,
    origins: { multimodal_tensor_transport: 'router.yaml:1:1', 'workers[1].multimodal_shm_min_bytes': 'router.yaml:5:5', 'workers[1]': 'router.yaml:4:5' },
    env,
    file: 'router.yaml',
  });
}

describe('ConfigStore', () => {
  it('apply validates, swaps the whole config, bumps the revision and tells subscribers', () => {
    const s = store();
    const seen: Array<[number, number]> = [];
    s.subscribe((next, prev) => seen.push([prev.revision, next.revision]));
    const first = s.current();
    const next = s.apply({ ...base, multimodal_tensor_transport: 'shm' }, 1, by);
    expect(next.revision).toBe(2);
    expect(next.config.multimodal_tensor_transport).toBe('shm');
    expect(next.client).toBe('http');
    expect(next.file).toBe('router.yaml');
    expect(s.current()).toBe(next);
    expect(first.config.multimodal_tensor_transport).toBe('inline'); // a held snapshot never changes
    expect(Object.isFrozen(next)).toBe(true);
    expect(seen).toEqual([[1, 2]]);
  });

  it('a stale expected revision is a conflict naming the current one, and nothing changes', () => {
    const s = store();
    s.apply({ ...base, policy: 'least_load' }, 1, by);
    const before = s.current();
    let err: unknown;
    try {
      s.apply({ ...base, multimodal_tensor_transport: 'auto' }, 1, by);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigConflictError);
    expect(err).toMatchObject({ expectedRevision: 1, currentRevision: 2 });
    expect((err as Error).message).toBe(
      'the configuration changed meanwhile: you edited revision 1, the router is at revision 2; review the changes and apply again',
    );
    expect(s.current()).toBe(before);
  });

  it('two applies with the same expected revision: exactly one wins', () => {
    const s = store();
    const results = ['shm', 'auto'].map((mode) => {
      try {
        return s.apply({ ...base, multimodal_tensor_transport: mode }, 1, by).config.multimodal_tensor_transport;
      } catch (err) {
        return err instanceof ConfigConflictError ? 'conflict' : 'other';
      }
    });
    expect(results).toEqual(['shm', 'conflict']);
    expect(s.current()).toMatchObject({ revision: 2, config: { multimodal_tensor_transport: 'shm' } });
  });

  it('an invalid config lists every issue and changes nothing', () => {
    const s = store();
    const before = s.current();
    let err: unknown;
    try {
      s.apply({ ...base, multimodal_tensor_transport: 'fast', workers: [{ url: 'http://x' }] }, 1, by);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).issues.map((i) => i.path).sort()).toEqual(['multimodal_tensor_transport', 'workers[0].url']);
    expect(s.current()).toBe(before);
  });

  it('host, port and model_path are refused with the reason while the router runs', () => {
    const s = store();
    let err: unknown;
    try {
      s.apply({ ...base, port: 8080, host: '0.0.0.0', multimodal_tensor_transport: 'shm' }, 1, by);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(RestartRequiredError);
    expect((err as ConfigError).issues.map((i) => i.message)).toEqual([
      "host cannot change while the router runs ('127.0.0.1' -> '0.0.0.0'): restart the router with the new value",
      'port cannot change while the router runs (0 -> 8080): restart the router with the new value',
    ]);
    expect(s.current().revision).toBe(1);
    expect(s.current().config.multimodal_tensor_transport).toBe('inline');
  });
});

describe('origins across revisions', () => {
  it('unchanged values keep their origin, changed ones get the new one, workers are matched by url', () => {
    const s = store();
    const reordered = {
      ...base,
      multimodal_shm_min_bytes: 4096,
      workers: [base.workers[1]!, { ...base.workers[0]!, priority: 80 }, { url: 'grpc://c:3', multimodal_tensor_transport: 'shm' }],
    };
    const next = s.apply(reordered, 1, by);
    expect(next.origins).toEqual({
      multimodal_tensor_transport: 'router.yaml:1:1',
      multimodal_shm_min_bytes: 'console (HTTP)',
      'workers[0]': 'router.yaml:4:5',
      'workers[0].multimodal_shm_min_bytes': 'router.yaml:5:5',
      'workers[1].priority': 'console (HTTP)',
      'workers[2]': 'console (HTTP)',
      'workers[2].url': 'console (HTTP)',
      'workers[2].multimodal_tensor_transport': 'console (HTTP)',
    });
  });

  it('a value set back to what it was keeps no stale origin when it was only a default', () => {
    const origins = carryOrigins(base, {}, { ...base, policy: 'round_robin' }, 'createRouter()');
    expect(origins.policy).toBeUndefined();
  });

  it('the embedded worker joins the start revision (no revision, nobody told), keeps its origin when a rollback brings it back, and is left out of what is recorded', () => {
    const s = new ConfigStore({ config: RouterConfigSchema.parse({ port: 0 }), env });
    const told: number[] = [];
    s.subscribe((next) => told.push(next.revision));
    const embedded = RouterConfigSchema.parse({ workers: [{ url: 'grpc://127.0.0.1:40001', runtime: 'tokenspeed' }] }).workers[0]!;
    const started = s.startEmbeddedWorker(embedded);
    expect(started).toMatchObject({ revision: 1, client: 'start', origins: { 'workers[0]': EMBEDDED_DEFAULT_ORIGIN } });
    expect(told).toEqual([]);
    expect(s.configuredOnly(started.config).workers).toEqual([]);
    expect(() => s.startEmbeddedWorker(embedded)).toThrow(/only a start revision with no worker configured/);
    // Replaced by a configured worker, then back (an Undo): the embedded worker again, not the console's.
    const replaced = s.apply({ ...started.config, workers: [{ url: 'grpc://a:1' }] }, 1, by);
    expect(Object.values(replaced.origins)).not.toContain(EMBEDDED_DEFAULT_ORIGIN);
    const back = s.apply({ ...replaced.config, workers: [embedded] }, 2, { ...by, rollbackOf: 1 });
    expect(back).toMatchObject({ revision: 3, rollbackOf: 1, origins: { 'workers[0]': EMBEDDED_DEFAULT_ORIGIN } });
    expect(back.config.workers.filter((_, i) => back.origins[`workers[${i}]`] === EMBEDDED_DEFAULT_ORIGIN).map((w) => w.url)).toEqual([
      'grpc://127.0.0.1:40001',
    ]);
    expect(s.embeddedWorker()).toEqual(embedded);
  });
});
