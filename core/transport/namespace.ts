// The /dev/shm namespace token (docs/transport.md, "The namespace token"): `<boot_id>:<st_dev>`.
//
// boot_id pins the running kernel (another host or VM has another one); st_dev is the
// device number of the tmpfs mounted at /dev/shm, equal for containers that share it
// (--ipc=host or a bind mount) and different for a container with its own. Two processes
// with equal tokens can hand each other files in /dev/shm. st_dev is read as a bigint:
// device numbers can exceed 2^53 and a float would silently merge distinct devices.
import { readFileSync, statSync } from 'node:fs';

export const SHM_DIR = '/dev/shm';
export const BOOT_ID_PATH = '/proc/sys/kernel/random/boot_id';

export interface NamespaceTokenReading {
  token: string | undefined;
  bootId: string | undefined;
  stDev: string | undefined;
  /** Why the token is absent, in words. */
  problem?: string;
}

export function readNamespaceToken(shmDir = SHM_DIR, bootIdPath = BOOT_ID_PATH): NamespaceTokenReading {
  let bootId: string | undefined;
  let stDev: string | undefined;
  const problems: string[] = [];
  try {
    bootId = readFileSync(bootIdPath, 'utf8').trim() || undefined;
    if (!bootId) problems.push(`${bootIdPath} is empty`);
  } catch (err) {
    problems.push(`cannot read ${bootIdPath}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  try {
    stDev = statSync(shmDir, { bigint: true }).dev.toString(10);
  } catch (err) {
    problems.push(`cannot stat ${shmDir}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  const token = bootId !== undefined && stDev !== undefined ? `${bootId}:${stDev}` : undefined;
  return problems.length ? { token, bootId, stDev, problem: problems.join('; ') } : { token, bootId, stDev };
}

/** Split a token into its boot_id and st_dev parts (the last colon separates them). */
export function parseNamespaceToken(token: string): { bootId: string; stDev: string } | undefined {
  const at = token.lastIndexOf(':');
  if (at <= 0 || at === token.length - 1) return undefined;
  return { bootId: token.slice(0, at), stDev: token.slice(at + 1) };
}
