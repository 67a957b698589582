// `mmtc doctor`: can this router hand tensors through /dev/shm, and to this worker?
// Read-only unless asked to sweep: it reports the namespace token, whether /dev/shm is
// writable and how full it is, tensor files by pid (judged by the sweep's own rule), and with a
// worker URL the worker's advertised token, the verdict of `auto`, and what to do about it.
import { capabilitiesOf } from '../engines/table.ts';
import { autoVerdict } from '../transport/decision.ts';
import { readNamespaceToken, SHM_DIR } from '../transport/namespace.ts';
import { listTensorFiles, type TensorFilesOfPid } from '../transport/orphans.ts';
import { shmFreeBytes, ShmWriter } from '../transport/shm-writer.ts';
import { DECISION_ADVICE, DECISION_REASONS, type DecisionReason } from '../transport/vocabulary.ts';
import { type WireRuntime } from '../config/schema.ts';
import { probeWorker } from '../workers/discovery.ts';

export interface DoctorReport {
  router: {
    token: string | null;
    boot_id: string | null;
    st_dev: string | null;
    token_problem?: string;
    shm_dir: string;
    shm_writable: boolean;
    shm_error?: string;
    shm_free_bytes: number | null;
    shm_total_bytes: number | null;
    tensor_files: TensorFilesOfPid[];
    orphan_files: number;
    /** Of the tensor files, pixel-cache entries (transport/pixel-cache.ts), and their bytes. */
    cache_files: number;
    cache_bytes: number;
    swept?: number;
  };
  worker?: {
    url: string;
    reachable: boolean;
    runtime: WireRuntime | null;
    healthy: boolean | null;
    error?: string;
    token: string | null;
    auto_uses_shm: boolean;
    reason: DecisionReason;
    explanation: string;
    advice?: string;
  };
}

export async function runDoctor(options: { worker?: string; runtime?: WireRuntime; sweep?: boolean; dir?: string } = {}): Promise<DoctorReport> {
  const dir = options.dir ?? SHM_DIR;
  const ns = readNamespaceToken(dir);
  const writer = new ShmWriter({ dir });
  const probe = writer.probe();
  const swept = options.sweep ? writer.sweepOrphans().removed : undefined;
  let files: DoctorReport['router']['tensor_files'];
  try {
    files = listTensorFiles(dir);
  } catch {
    files = []; // /dev/shm cannot be listed: the probe above says why
  }
  const space = await shmFreeBytes(dir);
  const report: DoctorReport = {
    router: {
      token: ns.token ?? null,
      boot_id: ns.bootId ?? null,
      st_dev: ns.stDev ?? null,
      ...(ns.problem ? { token_problem: ns.problem } : {}),
      shm_dir: dir,
      shm_writable: probe.writable,
      ...(probe.error ? { shm_error: probe.error } : {}),
      shm_free_bytes: space?.free ?? null,
      shm_total_bytes: space?.total ?? null,
      tensor_files: files,
      orphan_files: files.reduce((n, f) => n + f.orphans, 0),
      cache_files: files.reduce((n, f) => n + f.cacheFiles, 0),
      cache_bytes: files.reduce((n, f) => n + f.cacheBytes, 0),
      ...(swept !== undefined ? { swept } : {}),
    },
  };
  if (options.worker) {
    const w = await probeWorker(options.worker, options.runtime ? { runtime: options.runtime } : {});
    const token = w.labels.shm_namespace_id;
    // A protocol without a /dev/shm lane is inline whatever the tokens say (its engine says so).
    const reason: DecisionReason =
      w.runtime && !capabilitiesOf(w.runtime).shmLane
        ? 'runtime_inline_only'
        : probe.writable
          ? autoVerdict(ns.token, { url: w.url, worker_type: 'regular', shm_namespace_id: token, reachable: w.reachable })
          : 'auto_shm_not_writable';
    const advice = DECISION_ADVICE[reason];
    report.worker = {
      url: w.url,
      reachable: w.reachable,
      runtime: w.runtime ?? null,
      healthy: w.healthy ?? null,
      ...(w.error ? { error: w.error } : {}),
      token: token ?? null,
      auto_uses_shm: reason === 'auto_tokens_equal',
      reason,
      explanation: DECISION_REASONS[reason],
      ...(advice ? { advice } : {}),
    };
  }
  return report;
}
