// core/test/oversized-worker.ts as a process of its own (its event loop is busy while it sends
// hundreds of MB, which must not hold the suite's): `tsx reliability/lib/oversized-worker.ts
// BYTES` prints `oversized worker on grpc://127.0.0.1:PORT` and serves until SIGTERM.
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { startOversizedWorker } from '../../core/test/oversized-worker.ts';
import { ROOT, spawnProc, type Proc } from './procs.ts';

/** Start one; its URL once it listens. */
export async function startOversizedWorkerProcess(padBytes: number): Promise<{ proc: Proc; url: string }> {
  const tsx = path.join(ROOT, 'node_modules', 'tsx', 'dist', 'cli.mjs');
  const proc = spawnProc([process.execPath, tsx, path.join(ROOT, 'reliability', 'lib', 'oversized-worker.ts'), String(padBytes)], {
    name: `oversized worker (${padBytes} bytes a reply)`,
  });
  const m = await proc.waitFor(/oversized worker on (grpc:\/\/\S+)/, 30_000);
  return { proc, url: m[1]! };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const bytes = Number(process.argv[2]);
  if (!Number.isSafeInteger(bytes) || bytes < 0) throw new Error(`expected the padding in bytes, not ${process.argv[2]}`);
  const w = await startOversizedWorker(bytes);
  process.stdout.write(`oversized worker on ${w.url}\n`);
  const stop = () => void w.close().then(() => process.exit(0));
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}
