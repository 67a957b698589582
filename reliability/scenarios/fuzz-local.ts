// Fuzzing of the parsers and of the worker-side reader, in child processes with a watchdog
// (fuzz/harness.ts): the YAML loader, the env parser, the CLI flags (in process, plus a sample
// through the real `mmtc config …`), and the reader as root and as nobody against planted
// entries. Seeded, bounded in count and time.
import { execFileSync } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fuzzInChild, reportFuzz } from '../fuzz/harness.ts';
import type { ReaderFixture } from '../fuzz/targets/reader.ts';
import type { Suite } from '../lib/suite.ts';

const isRoot = process.getuid?.() === 0;

export async function localFuzzGroup(suite: Suite): Promise<void> {
  const names = ['yaml', 'env', 'cli-flags', 'reader'];
  await suite.group('fuzz', names, async () => {
    const n = (short: number, full: number) => (suite.short ? short : full);
    const seconds = n(20, 120);
    await suite.run(
      'fuzz/yaml',
      async (t) => reportFuzz(t, await fuzzInChild({ target: 'yaml', seed: t.seed, count: n(600, 8000), seconds }), 'YAML documents'),
      { seeded: true, maxSeconds: seconds + 60 },
    );
    await suite.run('fuzz/env', async (t) => reportFuzz(t, await fuzzInChild({ target: 'env', seed: t.seed, count: n(500, 5000), seconds }), 'environments'), {
      seeded: true,
      maxSeconds: seconds + 60,
    });
    await suite.run(
      'fuzz/cli-flags',
      async (t) =>
        reportFuzz(
          t,
          await fuzzInChild({
            target: 'flags',
            seed: t.seed,
            count: n(300, 3000),
            seconds: n(40, 180),
            env: { MMTC_FUZZ_CLI_RUNS: String(n(6, 40)) },
            caseTimeoutMs: 40_000,
          }),
          'flag sets (a sample through the real CLI)',
        ),
      { seeded: true, maxSeconds: n(40, 180) + 60 },
    );
    await suite.run(
      'fuzz/reader',
      async (t) => {
        // The directory stands for /dev/shm (sticky, world-writable, in our own tmpfs); the canary is outside it.
        const dir = mkdtempSync('/dev/shm/mmtc-rel-reader-');
        chmodSync(dir, 0o1777);
        const outside = mkdtempSync(path.join(tmpdir(), 'mmtc-rel-canary-'));
        chmodSync(outside, 0o755);
        const canary = path.join(outside, 'canary.txt');
        writeFileSync(canary, 'outside /dev/shm: never read, written or removed\n', { mode: 0o644 });
        const link = 'smg-tokenspeed-1-1000000-1';
        const fifo = 'smg-tokenspeed-1-1000000-2';
        const sub = 'smg-tokenspeed-1-1000000-3';
        const sock = 'smg-tokenspeed-1-1000000-4';
        const foreign = 'smg-tokenspeed-1-1000000-5';
        symlinkSync(canary, path.join(dir, link));
        execFileSync('mkfifo', [path.join(dir, fifo)]);
        mkdirSync(path.join(dir, sub));
        const server = net.createServer();
        await new Promise<void>((resolve) => server.listen(path.join(dir, sock), () => resolve()));
        try {
          const count = n(400, 4000);
          const asRoot = await fuzzInChild({
            target: 'reader',
            seed: t.seed,
            count,
            seconds,
            args: [JSON.stringify({ dir, canary, keep: [link, fifo, sub, sock] } satisfies ReaderFixture)],
          });
          let asNobody: Awaited<ReturnType<typeof fuzzInChild>> | undefined;
          if (isRoot) {
            writeFileSync(path.join(dir, foreign), Buffer.alloc(4096, 1), { mode: 0o600 });
            chownSync(path.join(dir, foreign), 0, 0);
            asNobody = await fuzzInChild({
              target: 'reader',
              seed: t.seed + 1,
              count,
              seconds,
              env: { HOME: '/tmp', MMTC_FUZZ_AS_USER: 'nobody' },
              args: [JSON.stringify({ dir, canary, keep: [link, fifo, sub, sock, foreign] } satisfies ReaderFixture)],
            });
          }
          const merged = {
            tried: asRoot.tried + (asNobody?.tried ?? 0),
            accepted: asRoot.accepted + (asNobody?.accepted ?? 0),
            rejected: asRoot.rejected + (asNobody?.rejected ?? 0),
            labels: {
              ...Object.fromEntries(Object.entries(asRoot.labels).map(([k, v]) => [`root ${k}`, v])),
              ...Object.fromEntries(Object.entries(asNobody?.labels ?? {}).map(([k, v]) => [`nobody ${k}`, v])),
            },
            failures: [
              ...asRoot.failures.map((f) => ({ ...f, problem: `as root: ${f.problem}` })),
              ...(asNobody?.failures ?? []).map((f) => ({ ...f, problem: `as nobody (seed ${t.seed + 1}): ${f.problem}` })),
            ],
            slowest: asRoot.slowest.ms >= (asNobody?.slowest.ms ?? 0) ? asRoot.slowest : asNobody!.slowest,
            stoppedBy: asRoot.stoppedBy,
            ...((asRoot.hang ?? asNobody?.hang) ? { hang: (asRoot.hang ?? asNobody?.hang)! } : {}),
          };
          reportFuzz(t, merged, isRoot ? 'handles (half as root, half as nobody)' : 'handles');
        } finally {
          await new Promise<void>((resolve) => server.close(() => resolve()));
          rmSync(dir, { recursive: true, force: true });
          rmSync(outside, { recursive: true, force: true });
        }
      },
      { seeded: true, maxSeconds: 2 * seconds + 60 },
    );
  });
}
