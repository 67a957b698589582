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

/** How a worker's advertised token compares with the router's (docs/transport.md, "The namespace token"). */
export type TokenMatch = 'equal' | 'different_shm' | 'different_host' | 'missing' | 'router_has_none';

export interface TokenComparison {
  match: TokenMatch;
  /** Both tokens' parts, when both parse (for saying which part differs). */
  router?: { bootId: string; stDev: string };
  worker?: { bootId: string; stDev: string };
}

/**
 * The one comparison of two namespace tokens: equal only when byte-equal; the same boot_id with
 * another st_dev is another /dev/shm on this host; anything else (another boot_id, or a token
 * that does not parse) is another host.
 */
export function compareNamespaceTokens(routerToken: string | undefined, workerToken: string | undefined): TokenComparison {
  if (!routerToken) return { match: 'router_has_none' };
  if (workerToken === undefined || workerToken === '') return { match: 'missing' };
  const router = parseNamespaceToken(routerToken);
  const worker = parseNamespaceToken(workerToken);
  const parts = { ...(router ? { router } : {}), ...(worker ? { worker } : {}) };
  if (workerToken === routerToken) return { match: 'equal', ...parts };
  return { match: router && worker && router.bootId === worker.bootId ? 'different_shm' : 'different_host', ...parts };
}
