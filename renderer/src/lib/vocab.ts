// Words the screens use for the transport's vocabulary. The closed sets come from the
// contract (TRANSPORT_MODES, TRANSPORT_KNOBS, describeReason); this only adds the one-line
// explanation of each mode shown next to the choice (docs/configuration.md, "Transport modes").
import { TRANSPORT_KNOBS, TRANSPORT_MODES, type Overview, type WorkerView } from '../../../core/console/contract.ts';
import type { Tone } from '../components/ui.tsx';

export type Mode = (typeof TRANSPORT_MODES)[number];

export const MODE_HELP: Record<Mode, string> = {
  inline: 'Tensor bytes ride inside the gRPC message. Always works, copies every byte through the socket.',
  shm: 'Tensors at or above the threshold go through /dev/shm whenever the router can write there: you assert the worker shares it.',
  auto: 'Like shm, but only for workers that prove they share this /dev/shm (same namespace token); others stay inline.',
  rdma: 'Accepted for compatibility with the gateway; there is no RDMA lane yet, so tensors travel inline.',
};

export const HEALTH_TONE: Record<WorkerView['health'], Tone> = { healthy: 'ok', unhealthy: 'bad', discovering: 'info', draining: 'warn' };

/** How a worker's advertised /dev/shm token compares with the router's, as a badge. */
export const TOKEN_WORDS: Record<WorkerView['tokenMatch'], { tone: Tone; word: string }> = {
  equal: { tone: 'ok', word: 'same /dev/shm' },
  different_shm: { tone: 'bad', word: 'other /dev/shm' },
  different_host: { tone: 'warn', word: 'other host' },
  missing: { tone: 'warn', word: 'no token' },
  router_has_none: { tone: 'bad', word: 'router has none' },
};

export const KNOB_LABEL: Record<keyof typeof TRANSPORT_KNOBS, string> = {
  multimodal_tensor_transport: 'Transport mode',
  multimodal_shm_min_bytes: 'SHM threshold',
};

export const LAYER_LABEL: Record<string, string> = {
  worker: 'worker override',
  router: 'router config',
  env: 'environment',
  env_legacy: 'environment (deprecated alias)',
  default: 'built-in default',
};

/** Reasons that mean the SHM lane failed, was full or will fail for a tensor that would have used it (shown in the warning colour). */
export const FALLBACK_REASONS: ReadonlySet<string> = new Set([
  'shm_write_failed',
  'shm_budget_exceeded',
  'auto_worker_read_failed',
  'shm_worker_read_failed',
  'shm_worker_other_shm',
  'shm_worker_other_host',
]);

type WarningKind = Overview['warnings'][number]['kind'];
// Overview warnings: every kind the contract names has a tone and a word; a kind added to
// the backend later still shows (as a warning, under its own name) until it gets one here.
const WARNING_TONE: Record<WarningKind, Tone> = {
  unhealthy_worker: 'bad',
  shm_not_writable: 'bad',
  no_token: 'bad',
  invalid_env: 'bad',
  shm_read_failed: 'bad',
  suspicious_files: 'warn',
  orphan_files: 'warn',
  deprecated_env: 'warn',
  config_drift: 'warn',
  shm_budget: 'warn',
  shm_will_fail: 'warn',
  until_restart: 'warn',
  encode_shm_split: 'warn',
  encoder_dtype_unknown: 'warn',
};
const WARNING_WORD: Record<WarningKind, string> = {
  unhealthy_worker: 'Unhealthy worker',
  shm_not_writable: '/dev/shm',
  no_token: 'No token',
  invalid_env: 'Invalid env',
  suspicious_files: 'Suspicious files',
  orphan_files: 'Orphan files',
  deprecated_env: 'Deprecated env',
  config_drift: 'File drift',
  shm_read_failed: 'SHM lane broken',
  shm_budget: 'SHM budget',
  shm_will_fail: 'SHM will fail',
  until_restart: 'Lost on restart',
  encode_shm_split: 'Encode workers split',
  encoder_dtype_unknown: 'Encoder dtype',
};
export const warningTone = (kind: string): Tone => (WARNING_TONE as Record<string, Tone>)[kind] ?? 'warn';
export const warningWord = (kind: string): string => (WARNING_WORD as Record<string, string>)[kind] ?? kind.replaceAll('_', ' ');

export { TRANSPORT_KNOBS, TRANSPORT_MODES };
