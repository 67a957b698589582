// Whether a request's large tensors may go through /dev/shm, and the reason in words an
// operator understands (docs/transport.md, "Modes and the per-tensor rule", "Decision
// reasons"). The reason is one of a closed set, so the console,
// `mmtc doctor` and the traffic stream name the same causes.
//
// auto is verified only when the worker's advertised shm_namespace_id is present, non-empty
// and byte-equal to the router's token. Under disaggregation every encode worker of the
// request must share /dev/shm; without encode workers, both prefill and decode must.
import type { TransportMode, WorkerType } from '../config/schema.ts';
import { parseNamespaceToken } from './namespace.ts';
import type { DecisionReason } from './vocabulary.ts';

export interface TransportDecision {
  shmEnabled: boolean;
  reason: DecisionReason;
  /** The worker the reason is about, for auto verdicts over several workers. */
  worker?: string;
  /** What the worker said when it could not read our files (auto_worker_read_failed). */
  detail?: string;
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

/** The workers whose /dev/shm must match for auto (disaggregation: docs/transport.md, "Modes and the per-tensor rule"). */
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
