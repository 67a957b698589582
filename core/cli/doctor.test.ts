import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runMmtc, startMmtc } from '../test/cli.ts';
import { deadPid, makeShmTestDir, setMtime } from '../test/shm-dir.ts';
import { readNamespaceToken } from '../transport/namespace.ts';
import { CACHE_PREFIX } from '../transport/shm-names.ts';
import { runDoctor } from './doctor.ts';
import { formatDoctorReport } from './reports.ts';

describe('mmtc doctor and mmtc worker as processes', () => {
  it('doctor explains why auto stays inline for a worker with its own /dev/shm', async () => {
    const token = readNamespaceToken().token!;
    const otherShm = `${token.slice(0, token.lastIndexOf(':'))}:4242424242`;
    const worker = await startMmtc(
      ['worker', '--runtime', 'vllm', '--port', '0', '--shm-namespace-id', otherShm, '--no-fingerprint'],
      /listening on grpc:\/\//,
    );
    try {
      const url = worker.line.match(/grpc:\/\/\S+/)![0];
      const text = runMmtc(['doctor', '--worker', url]);
      expect(text.status).toBe(0);
      expect(text.stdout).toContain(`namespace token   ${token}`);
      expect(text.stdout).toContain(`reachable         yes (vllm)`);
      expect(text.stdout).toContain(
        'auto verdict      inline\n  why               auto but the worker is on the same host with a different /dev/shm (st_dev differs: a container without a shared /dev/shm): inline\n',
      );
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
      expect(text.stdout).toContain("auto verdict      inline\n  why               this worker's protocol carries tensors inline only");
      expect(text.stdout).not.toMatch(/inline: .*: inline/);
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

  it("doctor's words for another pid namespace's pixel-cache entries: that namespace's pid is not ours, a fresh heartbeat keeps them, a heartbeat is no entry", async () => {
    const shm = makeShmTestDir();
    try {
      const now = Date.now();
      const at = (ns: string, pid: number, seq: number, ms = now - 3_600_000) =>
        path.join(shm.dir, `${CACHE_PREFIX}${ns}-${pid}-${BigInt(ms) * 1_000_000n}-${seq}`);
      // Pid namespace 7's router has our own pid's number (in ours, some other process: a kworker on a host);
      // pid namespace 8's has a pid no process has here. Both routers' heartbeats were touched 30 s ago.
      const dead = deadPid();
      for (const [ns, pid] of [
        ['7', process.pid],
        ['8', dead],
      ] as const) {
        writeFileSync(at(ns, pid, 1), Buffer.alloc(1024), { mode: 0o400 });
        writeFileSync(at(ns, pid, 0), '', { mode: 0o400 });
        setMtime(at(ns, pid, 0), now - 30_000);
      }
      const report = await runDoctor({ dir: shm.dir });
      expect(report.router).toMatchObject({ orphan_files: 0, cache_files: 2, cache_bytes: 2048 });
      const text = formatDoctorReport(report);
      const kept = (pid: number, ns: string) =>
        `  tensor files      pid ${pid} of pid namespace ${ns}: 1 file, 1.00 KiB (another pid namespace's (/proc cannot see its router), 1 of them pixel-cache entry (1.00 KiB; kept while its router's heartbeat goes on (touched 30 s ago)))`;
      expect(text).toContain(kept(process.pid, '7'));
      expect(text).toContain(kept(dead, '8'));
      expect(text).not.toMatch(/running|the next sweep removes them/);
    } finally {
      shm.remove();
    }
  });
});
