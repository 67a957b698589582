// Everything `mmtc` prints for people, in one place: the resolution table of `mmtc config
// resolve`, the report of `mmtc doctor` and the image report of `mmtc preprocess`. The
// commands compute; these functions only lay the results out (`--json` prints the same
// objects unformatted).
import { formatValue } from '../config/errors.ts';
import { CACHE_HEARTBEAT_STALE_MS, type TensorFilesOfPid } from '../transport/orphans.ts';
import type { DoctorReport } from './doctor.ts';
import type { LayerReading, ResolvedKnob, ResolvedWorkerTransport } from '../transport/resolution-schema.ts';
import { formatBytes } from '../util/bytes.ts';

export interface PreprocessReport {
  image: string;
  width: number;
  height: number;
  /** The model family (families/index.ts) whose processor ran. */
  family: string;
  /** [height, width] after the processor's resize (smart_resize; CLIP's shortest edge, before its crop). */
  resized: [number, number];
  /** The image's encoder input, as the gateway slices it per item (Qwen [patches, features]; CLIP [1, 3, H, W]). */
  shape: number[];
  /** Qwen's grid (absent for a family without one). */
  grid_thw?: [number, number, number];
  /** Phi-3-vision's image_sizes row: the HD image's height and width. */
  image_sizes?: [number, number];
  /** Llama 4's aspect_ratios row: the canvas's tiles, rows and columns. */
  aspect_ratios?: [number, number];
  tokens: number;
  dtype: string;
  nbytes: number;
  fingerprint: string;
  ms: { read: number; decode: number; preprocess: number };
  /** The decoder that gave the pixels: libjpeg-turbo (the native JPEG decoder) or sharp. */
  decoder: string;
  /** Threads that decoded it (2: a lone JPEG shared with a helper). */
  decodeThreads: number;
  /** Threads that resized and scattered the image (2 when a free pool thread helped). */
  threads: number;
}

function rawText(raw: string | number | null): string {
  return raw === null ? '-' : formatValue(raw);
}

function layerLine(l: LayerReading<unknown>, widths: [number, number]): string {
  const state = l.state === 'won' ? 'WON' : l.state.replace('_', ' ');
  const origin = l.origin ? `  ${l.origin}` : '';
  return `      ${l.layer.padEnd(11)}${l.name.padEnd(widths[0])}${rawText(l.raw).padEnd(widths[1])}${state}${origin}`;
}

function knobBlock(name: string, knob: ResolvedKnob<unknown>): string[] {
  const won = knob.layers.find((l) => l.state === 'won');
  const from = won ? `${won.layer}${won.origin ? ` (${won.origin})` : won.layer === 'env' || won.layer === 'env_legacy' ? ` (${won.name})` : ''}` : knob.source;
  const nameWidth = Math.max(...knob.layers.map((l) => l.name.length)) + 2;
  const rawWidth = Math.max(8, ...knob.layers.map((l) => rawText(l.raw).length)) + 2;
  return [
    `  ${name} = ${formatValue(knob.value)}   from ${from}`,
    ...knob.layers.map((l) => layerLine(l, [nameWidth, rawWidth])),
    ...knob.warnings.map((w) => `      warning: ${w}`),
  ];
}

export function formatResolutionTable(resolved: ResolvedWorkerTransport[]): string {
  const out: string[] = [];
  for (const w of resolved) {
    out.push(`worker ${w.url} (${w.worker_type}${w.origin ? `, ${w.origin}` : ''})`);
    for (const note of w.notes) out.push(`  note: ${note}`);
    out.push(...knobBlock('multimodal_tensor_transport', w.multimodal_tensor_transport));
    out.push(...knobBlock('multimodal_shm_min_bytes', w.multimodal_shm_min_bytes));
    out.push('');
  }
  return `${out.join('\n')}\n`;
}

const PROCESS_WORDS: Record<TensorFilesOfPid['process'], string> = {
  alive: 'running',
  dead: 'process is gone',
  reused: 'pid reused by a newer process',
  'other-namespace': "another pid namespace's (/proc cannot see its router)",
};

/** What becomes of a row's pixel-cache entries, by the sweep's rule (core/transport/orphans.ts). */
function cacheEntriesFate(f: TensorFilesOfPid): string {
  if (f.process === 'alive') return 'kept while that router runs';
  if (f.process !== 'other-namespace') return 'its router is gone: the next sweep removes them';
  const age = f.heartbeatAgeMs;
  if (age !== null && age <= CACHE_HEARTBEAT_STALE_MS) return `kept while its router's heartbeat goes on (touched ${Math.round(age / 1000)} s ago)`;
  return `${age === null ? 'no heartbeat of their owner' : `its router's heartbeat stopped ${Math.round(age / 60_000)} min ago`}: each goes at the sweep after it is 5 minutes old`;
}

function describePidFiles(f: TensorFilesOfPid): string {
  const parts = [PROCESS_WORDS[f.process]];
  if (f.orphans > 0) parts.push(`${f.orphans} ORPHANED`);
  if (f.young > 0 && f.process !== 'alive') parts.push(`${f.young} too recent to judge`);
  if (f.suspicious > 0) parts.push(`${f.suspicious} NOT A REGULAR FILE (planted under our name; left alone)`);
  if (f.cacheFiles > 0)
    parts.push(`${f.cacheFiles} of them pixel-cache entr${f.cacheFiles === 1 ? 'y' : 'ies'} (${size(f.cacheBytes)}; ${cacheEntriesFate(f)})`);
  return parts.join(', ');
}

function size(n: number | null): string {
  return n === null ? 'unknown' : formatBytes(n);
}

export function formatDoctorReport(r: DoctorReport): string {
  const lines: string[] = [];
  const R = r.router;
  lines.push('router host');
  lines.push(`  namespace token   ${R.token ?? `none (${R.token_problem ?? 'unknown'})`}`);
  lines.push(`  ${R.shm_dir} writable  ${R.shm_writable ? 'yes' : `NO: ${R.shm_error}`}`);
  lines.push(`  ${R.shm_dir} free      ${size(R.shm_free_bytes)} of ${size(R.shm_total_bytes)}`);
  if (R.tensor_files.length === 0) lines.push('  tensor files      none');
  for (const f of R.tensor_files)
    lines.push(
      `  tensor files      pid ${f.pid}${f.pidNamespace ? ` of pid namespace ${f.pidNamespace}` : ''}: ${f.files} file${f.files === 1 ? '' : 's'}, ${size(f.bytes)} (${describePidFiles(f)})`,
    );
  if (R.cache_files > 0)
    lines.push(
      `  pixel cache       ${R.cache_files} entr${R.cache_files === 1 ? 'y' : 'ies'}, ${size(R.cache_bytes)} (read-only files no worker is given; a request gets a hard link)`,
    );
  if (R.orphan_files > 0 && R.swept === undefined)
    lines.push(
      `  ${R.orphan_files} orphaned file(s): run 'mmtc doctor --sweep-orphans' (a running router also sweeps them, at start and every minute, or every MMTC_ORPHAN_SWEEP_SECS)`,
    );
  if (R.swept !== undefined) lines.push(`  swept             ${R.swept} orphaned file(s) removed`);
  if (r.worker) {
    const W = r.worker;
    lines.push('', `worker ${W.url}`);
    lines.push(`  reachable         ${W.reachable ? `yes (${W.runtime ?? 'runtime unknown'}${W.healthy === false ? ', reports unhealthy' : ''})` : 'no'}`);
    if (W.error) lines.push(`  error             ${W.error}`);
    lines.push(`  namespace token   ${W.token ?? 'none advertised'}`);
    // The verdict, then its reason on a line of its own (as the console shows a badge and the
    // sentence): most reasons end with their verdict, which one line would then say twice.
    lines.push(`  auto verdict      ${W.auto_uses_shm ? 'SHM' : 'inline'}`);
    lines.push(`  why               ${W.explanation}`);
    if (W.advice) lines.push(`  what to do        ${W.advice}`);
  }
  return `${lines.join('\n')}\n`;
}

export function formatPreprocessReport(r: PreprocessReport): string {
  return [
    `${r.image}`,
    `  input       ${r.width}x${r.height}`,
    `  resized     ${r.resized[1]}x${r.resized[0]}`,
    `  family      ${r.family}`,
    `  shape       [${r.shape.join(', ')}]${r.grid_thw ? `  grid_thw [${r.grid_thw.join(', ')}]` : ''}${r.image_sizes ? `  image_sizes [${r.image_sizes.join(', ')}]` : ''}${r.aspect_ratios ? `  aspect_ratios [${r.aspect_ratios.join(', ')}]` : ''}  ${r.tokens} tokens`,
    `  encoder     ${r.dtype}, ${r.nbytes} bytes (${(r.nbytes / 1e6).toFixed(1)} MB)`,
    `  time        read ${r.ms.read} ms, decode ${r.ms.decode} ms (${r.decoder}${r.decodeThreads === 2 ? ', 2 threads' : ''}), resize+normalize+layout ${r.ms.preprocess} ms (${r.threads} thread${r.threads === 1 ? '' : 's'})`,
    `  fingerprint ${r.fingerprint}`,
    '',
  ].join('\n');
}
