// The reference worker's roles at their edges: the flags that cannot go together (exit 2,
// naming the flag and the value), and the bootstrap server's bounded wait. The roles' serving
// is checked end to end through the router in core/router/disaggregated.test.ts.
import { describe, expect, it } from 'vitest';
import { runMmtc } from '../test/cli.ts';
import { fetchBootstrapRecord, startBootstrapServer } from './bootstrap.ts';

describe('mmtc worker --role', () => {
  it.each([
    [['--runtime', 'vllm', '--role', 'encode'], '--role encode needs --runtime tokenspeed (a vllm reference worker can be regular, prefill, decode)'],
    [
      ['--runtime', 'tokenspeed', '--role', 'decode', '--bootstrap-port', '9000'],
      '--bootstrap-port is for an encode or prefill worker, which has a bootstrap server (this one is --role decode)',
    ],
    [['--runtime', 'tokenspeed', '--role', 'prefill', '--encode-drop'], '--encode-drop is for an encode worker (this one is --role prefill)'],
    [
      ['--runtime', 'tokenspeed', '--role', 'prefill', '--embedding-timeout-ms', '0'],
      "invalid value '0' for --embedding-timeout-ms: expected whole milliseconds from 1 to 60000",
    ],
    [
      ['--runtime', 'tokenspeed', '--role', 'encode', '--bootstrap-port', '70000'],
      "invalid value '70000' for --bootstrap-port: expected an integer port 0-65535",
    ],
    [
      ['--runtime', 'tokenspeed', '--role', 'prefill', '--kv-connector', 'mooncake'],
      '--kv-connector is for a vLLM prefill or decode worker (this one is tokenspeed, --role prefill)',
    ],
    [['--runtime', 'vllm', '--model-dtype', 'int8'], "invalid value 'int8' for --model-dtype: expected float32, bfloat16 or float16"],
    [
      ['--runtime', 'sglang', '--default-sampling-params', '{"temperature":"hot"}'],
      `invalid value '{"temperature":"hot"}' for --default-sampling-params: default_sampling_params_json: temperature must be a number, got "hot"`,
    ],
    [['--runtime', 'tokenspeed', '--tamper-shm', 'poke'], "invalid value 'poke' for --tamper-shm: expected write or map"],
  ])('%j exits 2 naming the flag and value', (args, message) => {
    const r = runMmtc(['worker', '--port', '0', ...args]);
    expect(r.status).toBe(2);
    expect(r.stderr).toContain(message);
  });

  it('a KV connector it does not emulate is refused with the choices', () => {
    const r = runMmtc(['worker', '--port', '0', '--runtime', 'vllm', '--role', 'prefill', '--kv-connector', 'lmcache']);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain("option '--kv-connector <connector>' argument 'lmcache' is invalid. Allowed choices are nixl, mooncake, none.");
  });
});

describe('the bootstrap server', () => {
  it('hands a record to a fetch that waits for it, and a fetch that waits in vain fails within its bound naming the server and room', async () => {
    const server = await startBootstrapServer('127.0.0.1', 0);
    const call = { on: () => undefined };
    try {
      const waiting = fetchBootstrapRecord<{ n: number }>('item 0', '127.0.0.1', server.port, 'embedding', '42', 5_000, call);
      setTimeout(() => server.put('embedding', '42', { n: 7 }), 100);
      expect(await waiting).toEqual({ n: 7 });
      const t = performance.now();
      await expect(fetchBootstrapRecord('the KV', '127.0.0.1', server.port, 'kv', '43', 300, call)).rejects.toThrow(
        `the KV: no KV from 127.0.0.1:${server.port} room 43 within 300 ms`,
      );
      expect(performance.now() - t).toBeLessThan(300 + 2_000);
    } finally {
      await server.close();
    }
    await expect(fetchBootstrapRecord('item 1', '127.0.0.1', server.port, 'embedding', '1', 300, call)).rejects.toThrow(
      `item 1: the bootstrap server 127.0.0.1:${server.port} cannot be reached`,
    );
  });
});
