// /dev/shm for the suite. The whole run happens in a private mount namespace with a fresh
// tmpfs on /dev/shm (run.ts), so it sees, sweeps and checks only files it created and never
// touches anyone else's; scenarios that need a small, full or read-only /dev/shm get a nested
// namespace of their own: a holder process (unshare --mount, then sleep) whose namespace the
// router and the workers enter with nsenter, and whose /dev/shm the suite reads through
// /proc/<holder>/root/dev/shm.
import { lstatSync, readdirSync, statfsSync } from 'node:fs';
import path from 'node:path';
import { privateShm, spawnedPids, spawnProc, type Proc } from './procs.ts';

export const TENSOR_FILE = /^smg-tokenspeed-(\d+)-(\d+)-(\d+)$/;
/**
 * How long a holder lives if nothing stops it: longer than any scenario that uses one may run
 * (their bounds are at most 180 s), short enough that a holder of a run killed outright (SIGKILL,
 * which no handler sees) does not linger. A stopped or interrupted run kills it at once.
 */
const HOLDER_SECONDS = 600;

export interface ShmNamespace {
  holder: Proc;
  /** The namespace's /dev/shm as the suite reaches it. */
  dir: string;
  /** Run a command inside: prefix for spawnMmtc. */
  prefix: string[];
  entries(): string[];
  usedBytes(): number;
  stop(): Promise<void>;
}

export async function shmNamespace(options: { sizeBytes?: number; readOnly?: boolean; name?: string } = {}): Promise<ShmNamespace> {
  const size = options.sizeBytes ?? 256 * 1024 * 1024;
  const opts = [`size=${size}`, 'mode=1777', ...(options.readOnly ? ['ro'] : [])].join(',');
  const holder = spawnProc(
    [
      'unshare',
      '--mount',
      '--propagation',
      'private',
      'sh',
      '-c',
      `mount -t tmpfs -o ${opts} mmtc-reliability /dev/shm && echo ready && exec sleep ${HOLDER_SECONDS}`,
    ],
    { name: `shm namespace ${options.name ?? ''}`.trim() },
  );
  await holder.waitFor(/^ready$/m, 10_000);
  const dir = `/proc/${holder.pid}/root/dev/shm`;
  return {
    holder,
    dir,
    prefix: ['nsenter', `--mount=/proc/${holder.pid}/ns/mnt`, '--'],
    entries: () => readdirSync(dir).sort(),
    usedBytes: () => {
      const s = statfsSync(dir);
      return (s.blocks - s.bfree) * s.bsize;
    },
    stop: async () => {
      await holder.stop('SIGKILL');
    },
  };
}

/**
 * Our tensor files in `dir` (the probe too), with their sizes: every one in a /dev/shm of our
 * own, only those of processes this run started on the host's.
 */
export function ourFiles(dir = '/dev/shm', pid?: number): Array<{ name: string; size: number; type: string }> {
  const onlyOurs = dir === '/dev/shm' && !privateShm();
  const out: Array<{ name: string; size: number; type: string }> = [];
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return out; // no such directory (a private /dev/shm already removed): no files of ours in it
  }
  for (const name of names) {
    const m = TENSOR_FILE.exec(name);
    const probe = /^smg-tokenspeed-probe-(\d+)(?:-\d+)?$/.exec(name);
    if (!m && !probe) continue;
    const owner = Number((m ?? probe)![1]);
    if (pid !== undefined && owner !== pid) continue;
    if (onlyOurs && !spawnedPids.has(owner)) continue;
    try {
      const s = lstatSync(path.join(dir, name));
      out.push({ name, size: s.size, type: s.isFile() ? 'file' : s.isSymbolicLink() ? 'symlink' : s.isFIFO() ? 'fifo' : 'other' });
    } catch {
      /* read and unlinked meanwhile */
    }
  }
  return out;
}

export function usedBytes(dir = '/dev/shm'): number {
  const s = statfsSync(dir);
  return (s.blocks - s.bfree) * s.bsize;
}

/** A name our writer would have given a file of `pid` at `atMs`. */
export function tensorName(pid: number, atMs: number, seq = 1): string {
  return `smg-tokenspeed-${pid}-${BigInt(Math.round(atMs)) * 1_000_000n}-${seq}`;
}

/** A pid that cannot be running: above the kernel's pid_max. */
export function deadPid(rngInt: (lo: number, hi: number) => number): number {
  return 4_194_304 + rngInt(1000, 900_000);
}
