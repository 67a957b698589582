// The names mmtc gives its files in /dev/shm: formatted and parsed here and nowhere else
// (docs/transport.md, "Writing a tensor" and "Orphan sweep").
//
//   tensor       smg-tokenspeed-<pid>-<unix nanos>-<seq>                      a request's tensor (shm-writer.ts), or a
//                                                                             request's hard link to a pixel-cache entry
//   probe        smg-tokenspeed-probe-<pid>-<unix nanos>                      the writability probe, unlinked at once
//   cache entry  smg-tokenspeed-cache-<pid namespace>-<pid>-<unix nanos>-<seq>  a pixel-cache entry (pixel-cache.ts), seq from 1
//   heartbeat    smg-tokenspeed-cache-<pid namespace>-<pid>-<unix nanos>-0    a pixel cache's sign of life (orphans.ts,
//                                                                             cache files rule 3)
//
// `smg-tokenspeed-` is SMG's historical prefix, kept so SMG-era workers and sweepers recognise
// our files. The router's pid is in every name (the orphan sweep asks /proc about it), the pid
// namespace's inode number in a cache name (whether /proc can see that pid at all), and the
// nanoseconds since the epoch when the name was made (a name no one can take ahead of us: the
// pid alone is predictable; and the file's age when its mtime says less). A parsed name is one
// of these shapes exactly, every field decimal digits (any number of them), nothing before or
// after: no '/' and no '..', so a parsed name always stays in its directory.
import { readlinkSync } from 'node:fs';

/** The prefix of every name of ours. */
export const SHM_PREFIX = 'smg-tokenspeed-';
/** The prefix of the pixel cache's entries and heartbeats. */
export const CACHE_PREFIX = `${SHM_PREFIX}cache-`;
/** A tensor's name: pid, nanos, seq. */
export const TENSOR_NAME = /^smg-tokenspeed-(\d+)-(\d+)-(\d+)$/;
/** A cache entry's or heartbeat's name: pid namespace, pid, nanos, seq ('0': the heartbeat). */
export const CACHE_NAME = /^smg-tokenspeed-cache-(\d+)-(\d+)-(\d+)-(\d+)$/;
/** The probe's name: pid, nanos. */
const PROBE_NAME = /^smg-tokenspeed-probe-(\d+)-(\d+)$/;

/** One of our names, by its fields. */
export type ShmName =
  | { kind: 'tensor'; pid: number; stampNanos: bigint; seq: number }
  | { kind: 'probe'; pid: number; stampNanos: bigint }
  | { kind: 'cache-entry'; pidNamespace: string; pid: number; stampNanos: bigint; seq: number }
  | { kind: 'cache-heartbeat'; pidNamespace: string; pid: number; stampNanos: bigint };

/**
 * A name parsed, with its pid as the name spells it: the sweep's groups are by that text, as
 * they always were (a planted `smg-tokenspeed-007-…` is pid 7's file, in a group of its own).
 */
export type ParsedShmName = ShmName & { pidText: string };

/** Our pid namespace's inode number, as cache names carry it ('0' when /proc cannot say). */
export function ourPidNamespace(): string {
  try {
    return /\[(\d+)\]/.exec(readlinkSync('/proc/self/ns/pid'))?.[1] ?? '0';
  } catch {
    return '0'; // unreadable (no /proc, or not Linux): names carry '0', which the sweep compares as it compares any namespace
  }
}

/** The name for now: nanoseconds since the epoch (the clock's milliseconds, with hrtime's sub-millisecond part). */
export function shmStampNanos(): bigint {
  return BigInt(Date.now()) * 1_000_000n + (process.hrtime.bigint() % 1_000_000n);
}

/** The name's time in milliseconds since the epoch (what the sweep compares with file times). */
export function stampMs(name: { stampNanos: bigint }): number {
  return Number(name.stampNanos / 1_000_000n);
}

export function formatShmName(name: ShmName): string {
  switch (name.kind) {
    case 'tensor':
      return `${SHM_PREFIX}${name.pid}-${name.stampNanos}-${name.seq}`;
    case 'probe':
      return `${SHM_PREFIX}probe-${name.pid}-${name.stampNanos}`;
    case 'cache-entry':
      return `${CACHE_PREFIX}${name.pidNamespace}-${name.pid}-${name.stampNanos}-${name.seq}`;
    case 'cache-heartbeat':
      return `${CACHE_PREFIX}${name.pidNamespace}-${name.pid}-${name.stampNanos}-0`;
  }
}

/** The fields of one of our names; null for any other name (another program's, or a shape we never make). */
export function parseShmName(name: string): ParsedShmName | null {
  if (!name.startsWith(SHM_PREFIX)) return null;
  const tensor = TENSOR_NAME.exec(name);
  if (tensor) return { kind: 'tensor', pid: Number(tensor[1]), pidText: tensor[1]!, stampNanos: BigInt(tensor[2]!), seq: Number(tensor[3]) };
  const cache = CACHE_NAME.exec(name);
  if (cache) {
    const fields = { pidNamespace: cache[1]!, pid: Number(cache[2]), pidText: cache[2]!, stampNanos: BigInt(cache[3]!) };
    // The heartbeat's seq is exactly '0' (an entry's seq counts from 1).
    return cache[4] === '0' ? { kind: 'cache-heartbeat', ...fields } : { kind: 'cache-entry', ...fields, seq: Number(cache[4]) };
  }
  const probe = PROBE_NAME.exec(name);
  if (probe) return { kind: 'probe', pid: Number(probe[1]), pidText: probe[1]!, stampNanos: BigInt(probe[2]!) };
  return null;
}

/** A request's tensor name (the only names a request scope ever unlinks). */
export function isOurTensorName(name: string): boolean {
  return TENSOR_NAME.test(name);
}
