import { describe, expect, it } from 'vitest';
import { runMmtc, startMmtc } from '../test/cli.ts';
import { readNamespaceToken } from '../transport/namespace.ts';

describe('mmtc doctor and mmtc worker as processes', () => {
  it('doctor explains why auto stays inline for a worker with its own /dev/shm', async () => {
    const token = readNamespaceToken().token!;
    const otherShm = `${token.slice(0, token.lastIndexOf(':'))}:4242424242`;
    const worker = await startMmtc(['worker', '--runtime', 'vllm', '--port', '0', '--shm-namespace-id', otherShm, '--no-fingerprint'], /listening on grpc:\/\//);
    try {
      const url = worker.line.match(/grpc:\/\/\S+/)![0];
      const text = runMmtc(['doctor', '--worker', url]);
      expect(text.status).toBe(0);
      expect(text.stdout).toContain(`namespace token   ${token}`);
      expect(text.stdout).toContain(`reachable         yes (vllm)`);
      expect(text.stdout).toContain('auto verdict      inline: auto but the worker is on the same host with a different /dev/shm (st_dev differs: a container without a shared /dev/shm): inline');
      expect(text.stdout).toContain("what to do        run the worker container with --ipc=host or mount the host's /dev/shm into it");
      const json = JSON.parse(runMmtc(['doctor', '--worker', url, '--json']).stdout);
      expect(json.worker).toMatchObject({ token: otherShm, reason: 'auto_different_shm', auto_uses_shm: false });
    } finally {
      expect(await worker.stop()).toBe(0);
    }
  });

  it('doctor on an SGLang worker: inline whatever the tokens say, because its protocol has no /dev/shm lane', async () => {
    const worker = await startMmtc(['worker', '--runtime', 'sglang', '--port', '0'], /listening on grpc:\/\//);
    try {
      const url = worker.line.match(/grpc:\/\/\S+/)![0];
      const text = runMmtc(['doctor', '--worker', url]);
      expect(text.stdout).toContain('reachable         yes (sglang)');
      expect(text.stdout).toContain("auto verdict      inline: this worker's protocol carries tensors inline only");
      const json = JSON.parse(runMmtc(['doctor', '--worker', url, '--json']).stdout);
      expect(json.worker).toMatchObject({ runtime: 'sglang', reason: 'runtime_inline_only', auto_uses_shm: false, token: null });
    } finally {
      expect(await worker.stop()).toBe(0);
    }
  });

  it('worker refuses a bad port with the flag and value', () => {
    const r = runMmtc(['worker', '--runtime', 'tokenspeed', '--port', 'http']);
    expect(r.status).toBe(2);
    expect(r.stderr.trim()).toBe("error: invalid value 'http' for --port: expected an integer port 0-65535 (0 picks a free one)");
  });
});
