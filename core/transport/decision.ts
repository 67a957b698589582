// Whether a request's large tensors may go through /dev/shm, and the reason in words an
// operator understands (SPEC §1, §3). The reason is one of a closed set, so the console,
// `mmtc doctor` and the traffic stream name the same causes.
//
// auto is verified only when the worker's advertised shm_namespace_id is present, non-empty
// and byte-equal to the router's token. Under disaggregation every encode worker of the
// request must share /dev/shm; without encode workers, both prefill and decode must.
import type { TransportMode, WorkerType } from '../config/schema.ts';
import { parseNamespaceToken } from './namespace.ts';

export const DECISION_REASONS = {
  mode_inline: 'mode inline: tensors travel inside the gRPC message',
  mode_rdma: 'mode rdma: this router has no RDMA lane yet, tensors travel inline',
  shm_writable: 'mode shm and /dev/shm is writable',
  shm_not_writable: 'mode shm but /dev/shm is not writable by the router: inline',
  auto_tokens_equal: "auto: the worker shares the router's /dev/shm (namespace tokens equal)",
  auto_shm_not_writable: 'auto but /dev/shm is not writable by the router: inline',
  auto_router_no_token: 'auto but the router has no /dev/shm namespace token (boot_id or /dev/shm unreadable): inline',
  auto_worker_no_token: 'auto but the worker advertised no /dev/shm namespace token (too old, or it could not compute one): inline',
  auto_different_host: 'auto but the worker is on a different host (boot_id differs): inline',
  auto_different_shm: 'auto but the worker is on the same host with a different /dev/shm (st_dev differs: a container without a shared /dev/shm): inline',
  auto_worker_unreachable: 'auto but the worker could not be reached to read its namespace token: inline',
} as const;
export type DecisionReason = keyof typeof DECISION_REASONS;

export const DECISION_ADVICE: Partial<Record<DecisionReason, string>> = {
  shm_not_writable: 'make /dev/shm writable for the router user, or use mode inline',
  auto_shm_not_writable: 'make /dev/shm writable for the router user, or use mode inline',
  auto_router_no_token: 'run the router where /proc/sys/kernel/random/boot_id and /dev/shm are readable',
  auto_worker_no_token: "upgrade the worker to one that advertises shm_namespace_id, or set the worker label shm_namespace_id to the router's token if you know it shares /dev/shm",
  auto_different_host: 'nothing to do if the worker is remote: inline is right; co-locate it to use /dev/shm',
  auto_different_shm: "run the worker container with --ipc=host or mount the host's /dev/shm into it",
  auto_worker_unreachable: 'check the worker URL and that the worker is running',
};

export interface TransportDecision {
  shmEnabled: boolean;
  reason: DecisionReason;
  /** The worker the reason is about, for auto verdicts over several workers. */
  worker?: string;
}

export interface DecisionWorker {
  url: string;
  worker_type: WorkerType;
  /** Advertised (or operator-labelled) token; undefined when none. */
  shm_namespace_id?: string | undefined;
  /** False when discovery could not reach it. */
  reachable?: boolean;
}

export interface DecisionInput {
  mode: TransportMode;
  shmWritable: boolean;
  routerToken: string | undefined;
  /** The workers a request's tensors depend on (one, or the disaggregated set). */
  workers: readonly DecisionWorker[];
}

/** The verdict of `auto` for one worker. */
export function autoVerdict(routerToken: string | undefined, worker: DecisionWorker): DecisionReason {
  if (!routerToken) return 'auto_router_no_token';
  if (worker.reachable === false && !worker.shm_namespace_id) return 'auto_worker_unreachable';
  const theirs = worker.shm_namespace_id;
  if (theirs === undefined || theirs === '') return 'auto_worker_no_token';
  if (theirs === routerToken) return 'auto_tokens_equal';
  const mine = parseNamespaceToken(routerToken);
  const other = parseNamespaceToken(theirs);
  if (mine && other && mine.bootId === other.bootId) return 'auto_different_shm';
  return 'auto_different_host';
}

/** The workers whose /dev/shm must match for auto (SPEC §2 disaggregation). */
export function workersThatMustShareShm(workers: readonly DecisionWorker[]): readonly DecisionWorker[] {
  const encode = workers.filter((w) => w.worker_type === 'encode');
  if (encode.length > 0) return encode;
  return workers;
}

export function decideTransport(input: DecisionInput): TransportDecision {
  switch (input.mode) {
    case 'inline':
      return { shmEnabled: false, reason: 'mode_inline' };
    case 'rdma':
      return { shmEnabled: false, reason: 'mode_rdma' };
    case 'shm':
      return input.shmWritable ? { shmEnabled: true, reason: 'shm_writable' } : { shmEnabled: false, reason: 'shm_not_writable' };
    case 'auto': {
      if (!input.shmWritable) return { shmEnabled: false, reason: 'auto_shm_not_writable' };
      for (const worker of workersThatMustShareShm(input.workers)) {
        const verdict = autoVerdict(input.routerToken, worker);
        if (verdict !== 'auto_tokens_equal') return { shmEnabled: false, reason: verdict, worker: worker.url };
      }
      if (input.workers.length === 0) return { shmEnabled: false, reason: 'auto_worker_no_token' };
      return { shmEnabled: true, reason: 'auto_tokens_equal' };
    }
  }
}
