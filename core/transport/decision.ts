// Whether a request's large tensors may go through /dev/shm, and the reason in words an
// operator understands (docs/transport.md, "Modes and the per-tensor rule", "Decision
// reasons"). The reason is one of a closed set, so the console,
// `mmtc doctor` and the traffic stream name the same causes.
//
// auto is verified only when the worker's advertised shm_namespace_id is present, non-empty
// and byte-equal to the router's token. Under disaggregation every encode worker of the
// request must share /dev/shm; without encode workers, both prefill and decode must.
//
// A worker whose protocol has no /dev/shm lane (its engine says so: its TensorData carries
// inline bytes only) is inline under every mode, with the reason runtime_inline_only.
//
// shm asserts co-location and is attempted whenever /dev/shm is writable; but when the worker
// advertises a token that proves it does not share /dev/shm, the decision says so
// (shm_worker_other_shm / _host, outcome shm_then_inline): the attempt will fail and the
// request will be sent again inline. No screen may promise SHM for such a worker.
import type { TransportMode, WorkerType } from '../config/schema.ts';
import { compareNamespaceTokens } from './namespace.ts';
import { NO_REQUEST, SHM_ATTEMPT_FAILS, type DecisionOutcome, type DecisionReason } from './vocabulary.ts';

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
  /** Whether the worker's protocol can carry a /dev/shm handle at all (its engine says; false: runtime_inline_only). */
  shmLane: boolean;
  shmWritable: boolean;
  routerToken: string | undefined;
  /** The workers a request's tensors depend on (one, or the disaggregated set). */
  workers: readonly DecisionWorker[];
}

/** The verdict of `auto` for one worker. */
export function autoVerdict(routerToken: string | undefined, worker: DecisionWorker): DecisionReason {
  const { match } = compareNamespaceTokens(routerToken, worker.shm_namespace_id);
  if (match === 'router_has_none') return 'auto_router_no_token';
  if (match === 'missing') return worker.reachable === false ? 'auto_worker_unreachable' : 'auto_worker_no_token';
  if (match === 'equal') return 'auto_tokens_equal';
  return match === 'different_shm' ? 'auto_different_shm' : 'auto_different_host';
}

/** The workers whose /dev/shm must match for auto (disaggregation: docs/transport.md, "Modes and the per-tensor rule"). */
export function workersThatMustShareShm(workers: readonly DecisionWorker[]): readonly DecisionWorker[] {
  const encode = workers.filter((w) => w.worker_type === 'encode');
  if (encode.length > 0) return encode;
  return workers;
}

export function decideTransport(input: DecisionInput): TransportDecision {
  // A protocol without a /dev/shm handle is inline under shm and auto too, and says so.
  if (!input.shmLane && (input.mode === 'shm' || input.mode === 'auto')) return { shmEnabled: false, reason: 'runtime_inline_only' };
  switch (input.mode) {
    case 'inline':
      return { shmEnabled: false, reason: 'mode_inline' };
    case 'rdma':
      return { shmEnabled: false, reason: 'mode_rdma' };
    case 'shm': {
      if (!input.shmWritable) return { shmEnabled: false, reason: 'shm_not_writable' };
      // A worker whose advertised token proves another /dev/shm: attempted, known to fail.
      for (const worker of workersThatMustShareShm(input.workers)) {
        if (!input.routerToken || !worker.shm_namespace_id) continue;
        const verdict = autoVerdict(input.routerToken, worker);
        if (verdict === 'auto_different_shm') return { shmEnabled: true, reason: 'shm_worker_other_shm', worker: worker.url };
        if (verdict === 'auto_different_host') return { shmEnabled: true, reason: 'shm_worker_other_host', worker: worker.url };
      }
      return { shmEnabled: true, reason: 'shm_writable' };
    }
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

/** What the decision does to the next request (docs/transport.md, "Decision reasons"). */
export function decisionOutcome(decision: Pick<TransportDecision, 'shmEnabled' | 'reason'>): DecisionOutcome {
  if (NO_REQUEST.has(decision.reason)) return 'no_request';
  if (!decision.shmEnabled) return 'inline';
  return SHM_ATTEMPT_FAILS.has(decision.reason) ? 'shm_then_inline' : 'shm';
}
