// The closed sets of words the transport speaks: the paths a tensor can take, the wire
// dtypes, and every reason a tensor went the way it went. Placement, traffic
// events, metrics, `mmtc doctor`, the CLI and the console contract all name the same causes
// from this one module, so a reason can never be spelled two ways. It imports nothing (no
// `node:`), so the renderer can use it through the console contract. (The runtimes' names are
// configuration values: core/config/schema.ts.)
//
// The rules behind each reason are in docs/transport.md ("Decision reasons").

export const TENSOR_PATHS = ['inline', 'shm', 'remote'] as const;
/** How one tensor reached the worker. */
export type TensorPath = (typeof TENSOR_PATHS)[number];

export const ENCODER_DTYPES = ['float32', 'bfloat16', 'float16'] as const;
/** The dtypes an encoder input may travel in. */
export type EncoderDtype = (typeof ENCODER_DTYPES)[number];

export const WIRE_DTYPES = [...ENCODER_DTYPES, 'int64'] as const;
/** Every dtype this router puts on the wire (int64 for grids and patch counts). */
export type WireDtype = (typeof WIRE_DTYPES)[number];

/** Why a request may or may not use /dev/shm for a worker: the per-request decision. */
export const DECISION_REASONS = {
  mode_inline: 'mode inline: tensors travel inside the gRPC message',
  mode_rdma: 'mode rdma: this router has no RDMA lane yet, tensors travel inline',
  runtime_inline_only: "this worker's protocol carries tensors inline only (its TensorData has no /dev/shm handle): inline, whatever the mode",
  shm_writable: 'mode shm and /dev/shm is writable',
  shm_worker_other_shm:
    'mode shm, but this worker advertises another /dev/shm on this host (st_dev differs): SHM will be attempted, the worker will not find the files, and the request goes again inline (then its lane stays inline)',
  shm_worker_other_host:
    'mode shm, but this worker advertises another host (boot_id differs): SHM will be attempted, the worker will not find the files, and the request goes again inline (then its lane stays inline)',
  shm_worker_read_failed:
    "mode shm, but the worker could not read the router's /dev/shm files (the error is kept): inline until the worker is rediscovered, its mode changes or the lane is reset",
  shm_not_writable: 'mode shm but /dev/shm is not writable by the router: inline',
  auto_tokens_equal: "auto: the worker shares the router's /dev/shm (namespace tokens equal)",
  auto_shm_not_writable: 'auto but /dev/shm is not writable by the router: inline',
  auto_router_no_token: 'auto but the router has no /dev/shm namespace token (boot_id or /dev/shm unreadable): inline',
  auto_worker_no_token: 'auto but the worker advertised no /dev/shm namespace token (too old, or it could not compute one): inline',
  auto_different_host: 'auto but the worker is on a different host (boot_id differs): inline',
  auto_different_shm: 'auto but the worker is on the same host with a different /dev/shm (st_dev differs: a container without a shared /dev/shm): inline',
  auto_worker_unreachable: 'auto but the worker could not be reached to read its namespace token: inline',
  auto_worker_read_failed:
    "auto, but the worker could not read the router's /dev/shm files (the error is kept): inline until the worker is rediscovered, its mode changes or the lane is reset",
  worker_not_healthy:
    'the worker is not healthy (down, not yet discovered, or removed): no request will reach it until it answers its health check again, whatever the mode',
  worker_drained: 'the operator drained the worker (Workers: Drain): no new request will reach it until it is returned to rotation, whatever the mode',
  route_not_healthy:
    'another role its requests need has no healthy worker (the critical banner and /health name it): its next request with an image fails with 503 before it reaches this worker',
} as const;
export type DecisionReason = keyof typeof DECISION_REASONS;
export const DECISION_REASON_NAMES = Object.keys(DECISION_REASONS) as [DecisionReason, ...DecisionReason[]];

/**
 * What a decision will do to the worker's next request: SHM, inline, or SHM attempted when
 * the worker is known not to share /dev/shm (mode shm asserts it does), so its read fails and
 * the request is sent again inline; no_request: the worker is not healthy, so no request goes to it.
 */
export const DECISION_OUTCOMES = ['shm', 'inline', 'shm_then_inline', 'no_request'] as const;
export type DecisionOutcome = (typeof DECISION_OUTCOMES)[number];

/** Reasons under which no request reaches the worker now (outcome no_request): it is not healthy, or a role its requests need has no healthy worker. */
export const NO_REQUEST: ReadonlySet<DecisionReason> = new Set(['worker_not_healthy', 'worker_drained', 'route_not_healthy']);

/** Reasons whose SHM attempt is known in advance to fail over to inline. */
export const SHM_ATTEMPT_FAILS: ReadonlySet<DecisionReason> = new Set(['shm_worker_other_shm', 'shm_worker_other_host']);

/** The reason a worker that could not read our files gets, in its mode's words. */
export function readFailedReason(mode: string): 'shm_worker_read_failed' | 'auto_worker_read_failed' {
  return mode === 'shm' ? 'shm_worker_read_failed' : 'auto_worker_read_failed';
}

/** Why one tensor of a request that may use /dev/shm still went inline. */
export const TENSOR_REASONS = {
  below_threshold: 'smaller than multimodal_shm_min_bytes: inline',
  shm_write_failed: 'the /dev/shm write failed: inline (the event carries the error)',
  shm_budget_exceeded: "this router's files in /dev/shm are at multimodal_shm_max_outstanding_bytes: inline until workers read what is there",
} as const;
export type TensorOnlyReason = keyof typeof TENSOR_REASONS;

/** The reason carried by every traffic event. */
export type TensorReason = DecisionReason | TensorOnlyReason;
export const TENSOR_REASON_NAMES = [...DECISION_REASON_NAMES, ...(Object.keys(TENSOR_REASONS) as TensorOnlyReason[])] as [TensorReason, ...TensorReason[]];

/** Every reason in a few plain words, for a table cell (the sentence above says it whole). */
export const REASON_WORDS: Record<TensorReason, string> = {
  mode_inline: 'mode inline',
  mode_rdma: 'rdma: no lane yet',
  runtime_inline_only: 'protocol is inline only',
  shm_writable: 'mode shm',
  shm_worker_other_shm: 'shm, but worker has another /dev/shm',
  shm_worker_other_host: 'shm, but worker is on another host',
  shm_worker_read_failed: 'worker cannot read /dev/shm',
  shm_not_writable: '/dev/shm not writable',
  auto_tokens_equal: 'auto: shares /dev/shm',
  auto_shm_not_writable: 'auto: /dev/shm not writable',
  auto_router_no_token: 'auto: router has no token',
  auto_worker_no_token: 'auto: worker sent no token',
  auto_different_host: 'auto: worker on another host',
  auto_different_shm: 'auto: worker has another /dev/shm',
  auto_worker_unreachable: 'auto: worker unreachable',
  auto_worker_read_failed: 'worker cannot read /dev/shm',
  worker_not_healthy: 'worker not healthy: no request',
  worker_drained: 'worker drained: no request',
  route_not_healthy: 'a role it needs has no healthy worker',
  below_threshold: 'below the threshold',
  shm_write_failed: '/dev/shm write failed',
  shm_budget_exceeded: '/dev/shm budget full',
};

export function describeReason(reason: TensorReason): string {
  return reason in DECISION_REASONS ? DECISION_REASONS[reason as DecisionReason] : TENSOR_REASONS[reason as TensorOnlyReason];
}

/** What an operator can do about a reason that keeps tensors inline. */
export const DECISION_ADVICE: Partial<Record<TensorReason, string>> = {
  shm_not_writable: 'make /dev/shm writable for the router user, or use mode inline',
  auto_shm_not_writable: 'make /dev/shm writable for the router user, or use mode inline',
  auto_router_no_token: 'run the router where /proc/sys/kernel/random/boot_id and /dev/shm are readable',
  auto_worker_no_token:
    "upgrade the worker to one that advertises shm_namespace_id, or set the worker label shm_namespace_id to the router's token if you know it shares /dev/shm",
  auto_different_host: 'nothing to do if the worker is remote: inline is right; co-locate it to use /dev/shm',
  auto_different_shm: "run the worker container with --ipc=host or mount the host's /dev/shm into it",
  auto_worker_unreachable: 'check the worker URL and that the worker is running',
  shm_write_failed: 'see the error: free space in /dev/shm (df /dev/shm) or fix its permissions',
  auto_worker_read_failed:
    "let the worker read the router's files: the same /dev/shm (--ipc=host) and a user that may open them (the router's uid, or root); then reset the lane (Doctor) or restart the worker",
  shm_worker_read_failed:
    "let the worker read the router's files: the same /dev/shm (--ipc=host) and a user that may open them (the router's uid, or root); then reset the lane (Doctor) or restart the worker; or use mode auto, which checks the worker's /dev/shm first",
  shm_worker_other_shm:
    "run the worker container with --ipc=host or mount the host's /dev/shm into it; or set this worker's mode to auto (it would go inline at once) or inline",
  shm_worker_other_host: 'this worker cannot share /dev/shm: set its mode to inline (or auto, which goes inline at once)',
  runtime_inline_only: 'nothing to do: this protocol has no /dev/shm lane, so its tensors always travel inline (set the mode to inline to say so)',
  worker_not_healthy: 'restart or bring back the worker (Doctor shows why it is out); its verdict comes back once it answers its health check',
  worker_drained: 'return it to rotation on Workers when its maintenance is done; its verdict comes back at once',
  route_not_healthy: 'restart or bring back the workers the critical banner names; this worker needs nothing',
  shm_budget_exceeded: 'raise multimodal_shm_max_outstanding_bytes or /dev/shm itself (docker --shm-size), or check that workers read (and unlink) their files',
};
