// `mmtc doctor`: can this router hand tensors through /dev/shm, and to this worker?
// Read-only unless asked to sweep: it reports the namespace token, whether /dev/shm is
// writable and how full it is, tensor files by pid (dead pids are orphans), and with a
// worker URL the worker's advertised token, the verdict of `auto`, and what to do about it.
import { probeWorker, type WireRuntime } from '../workers/client.ts';
import { autoVerdict, DECISION_ADVICE, DECISION_REASONS, type DecisionReason } from './decision.ts';
import { readNamespaceToken, SHM_DIR } from './namespace.ts';
import { listTensorFiles, shmFreeBytes, ShmWriter } from './shm-writer.ts';

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
    tensor_files: Array<{ pid: number; files: number; bytes: number; alive: boolean }>;
    orphan_files: number;
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
  let files: DoctorReport['router']['tensor_files'] = [];
  try {
    files = listTensorFiles(dir);
  } catch {
    files = [];
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
      orphan_files: files.filter((f) => !f.alive).reduce((n, f) => n + f.files, 0),
      ...(swept !== undefined ? { swept } : {}),
    },
  };
  if (options.worker) {
    const w = await probeWorker(options.worker, options.runtime ? { runtime: options.runtime } : {});
    const token = w.labels.shm_namespace_id;
    const reason: DecisionReason = probe.writable ? autoVerdict(ns.token, { url: w.url, worker_type: 'regular', shm_namespace_id: token, reachable: w.reachable }) : 'auto_shm_not_writable';
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

function mib(n: number | null): string {
  return n === null ? 'unknown' : `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

export function formatDoctorReport(r: DoctorReport): string {
  const lines: string[] = [];
  const R = r.router;
  lines.push('router host');
  lines.push(`  namespace token   ${R.token ?? `none (${R.token_problem ?? 'unknown'})`}`);
  lines.push(`  ${R.shm_dir} writable  ${R.shm_writable ? 'yes' : `NO: ${R.shm_error}`}`);
  lines.push(`  ${R.shm_dir} free      ${mib(R.shm_free_bytes)} of ${mib(R.shm_total_bytes)}`);
  if (R.tensor_files.length === 0) lines.push('  tensor files      none');
  for (const f of R.tensor_files) lines.push(`  tensor files      pid ${f.pid}: ${f.files} file${f.files === 1 ? '' : 's'}, ${mib(f.bytes)} (${f.alive ? 'running' : 'ORPHANED: process is gone'})`);
  if (R.orphan_files > 0 && R.swept === undefined) lines.push(`  ${R.orphan_files} orphaned file(s): run 'mmtc doctor --sweep-orphans' (a router also sweeps them before its first write)`);
  if (R.swept !== undefined) lines.push(`  swept             ${R.swept} orphaned file(s) removed`);
  if (r.worker) {
    const W = r.worker;
    lines.push('', `worker ${W.url}`);
    lines.push(`  reachable         ${W.reachable ? `yes (${W.runtime ?? 'runtime unknown'}${W.healthy === false ? ', reports unhealthy' : ''})` : 'no'}`);
    if (W.error) lines.push(`  error             ${W.error}`);
    lines.push(`  namespace token   ${W.token ?? 'none advertised'}`);
    lines.push(`  auto verdict      ${W.auto_uses_shm ? 'SHM' : 'inline'}: ${W.explanation}`);
    if (W.advice) lines.push(`  what to do        ${W.advice}`);
  }
  return `${lines.join('\n')}\n`;
}
