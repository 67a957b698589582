// The overview: the host's /dev/shm (token, writability, space, our files), the router, the
// configuration's sync state (drift, what a restart would change), every worker's verdict for
// its next request, counts of workers by health, the pixel cache (handlers/pixel-cache.ts),
// the warnings an operator must act on, and the critical states (core/router/critical.ts: /health's),
// each with its remedy. The overview stream (feeds.ts) pushes the same computation.
import { familyById } from '../../multimodal/families/index.ts';
import { readsPixelTensors } from '../../config/schema.ts';
import { criticalStates, healthStatus } from '../../router/critical.ts';
import type { ConfigSnapshot } from '../../config/store.ts';
import { TensorFileListing, type TensorFilesOfPid } from '../../transport/orphans.ts';
import { SHM_PREFIX } from '../../transport/shm-names.ts';
import { shmFreeBytes } from '../../transport/shm-writer.ts';
import { DECISION_ADVICE, readFailedReason } from '../../transport/vocabulary.ts';
import { restartChangeText, type CommandOutput, type DiffEntry, type WorkerView } from '../contract.ts';
import { flagCausedChanges } from '../restart.ts';
import type { ConsoleState, HandlerGroup } from '../state.ts';
import { fileView, workerHealth, workerView } from '../views.ts';
import { pixelCacheView } from './pixel-cache.ts';

type Overview = CommandOutput<'overview'>;
type Warning = Overview['warnings'][number];

/** Warnings about the environment layer: deprecated aliases and values that are ignored. */
function environmentWarnings(s: ConfigSnapshot): Warning[] {
  const warnings: Warning[] = [];
  for (const knob of ['multimodal_tensor_transport', 'multimodal_shm_min_bytes'] as const) {
    const r = s.env[knob];
    if (r.source === 'env_legacy')
      warnings.push({
        kind: 'deprecated_env',
        message: `${r.legacy.name} is deprecated (set to ${JSON.stringify(r.legacy.raw)})`,
        remedy: `set ${r.canonical.name} instead and unset ${r.legacy.name}`,
      });
    for (const v of [r.canonical, r.legacy]) {
      if (v.state === 'invalid')
        warnings.push({
          kind: 'invalid_env',
          message: `${v.name}=${JSON.stringify(v.raw)} is not a valid value and is ignored`,
          remedy: `fix or unset ${v.name} and restart the router`,
        });
    }
  }
  return warnings;
}

/** Warnings about /dev/shm on this host: our files, the budget, writability, the token. */
function shmWarnings(state: ConsoleState, files: readonly TensorFilesOfPid[]): Warning[] {
  const ctx = state.running.context;
  const dir = ctx.writer.dir;
  const warnings: Warning[] = [];
  const orphans = files.reduce((n, f) => n + f.orphans, 0);
  if (orphans > 0)
    warnings.push({
      kind: 'orphan_files',
      message: `${orphans} orphaned tensor file(s) in ${dir}`,
      remedy: 'the router sweeps them every minute; mmtc doctor --sweep-orphans removes them now',
    });
  const suspicious = files.reduce((n, f) => n + f.suspicious, 0);
  if (suspicious > 0)
    warnings.push({
      kind: 'suspicious_files',
      message: `${suspicious} entr${suspicious === 1 ? 'y' : 'ies'} under our file names in ${dir} are not regular files`,
      remedy: `inspect them (ls -l ${dir}/${SHM_PREFIX}*) and remove what you did not create`,
    });
  if (!ctx.host.shmWritable)
    warnings.push({
      kind: 'shm_not_writable',
      message: `${dir} is not writable by the router: shm and auto stay inline`,
      remedy: DECISION_ADVICE.shm_not_writable!,
    });
  const maxOutstanding = ctx.writer.maxOutstanding();
  // The pixel cache's idle entries give way to a tensor that needs the room; those in use do not.
  const blocking = ctx.writer.outstanding + (ctx.pixelCache?.pinnedBytes() ?? 0);
  if (maxOutstanding !== undefined && blocking >= maxOutstanding * 0.9) {
    warnings.push({
      kind: 'shm_budget',
      message: `this router's files in ${dir} are at ${Math.round((100 * blocking) / maxOutstanding)}% of multimodal_shm_max_outstanding_bytes (requests' files and pixel-cache entries in use)`,
      remedy: DECISION_ADVICE.shm_budget_exceeded!,
    });
  }
  if (!ctx.host.routerToken)
    warnings.push({
      kind: 'no_token',
      message: 'the router has no /dev/shm namespace token: auto stays inline',
      remedy: DECISION_ADVICE.auto_router_no_token!,
    });
  return warnings;
}

/** Warnings about workers: down, a broken lane, a next request known to fail over /dev/shm. */
function workerWarnings(state: ConsoleState, views: readonly WorkerView[]): Warning[] {
  const warnings: Warning[] = [];
  for (const v of views) {
    if (v.health === 'unhealthy')
      warnings.push({
        kind: 'unhealthy_worker',
        message: `worker ${v.url} is unhealthy: ${v.lastError ?? 'no answer'}`,
        remedy: 'check that the worker runs and its URL is right (Doctor shows each step)',
      });
    // The remedy of the mode it runs under (shm: the operator's assertion is wrong; auto: the token lied).
    if (v.shmLane)
      warnings.push({
        kind: 'shm_read_failed',
        message: `worker ${v.url} could not read the router's /dev/shm files (${v.shmLane.error}); its requests go inline`,
        remedy: DECISION_ADVICE[readFailedReason(v.resolution.multimodal_tensor_transport.value)]!,
      });
    if (v.encoderDtype?.warning)
      warnings.push({
        kind: 'encoder_dtype_unknown',
        message: `worker ${v.url}: ${v.encoderDtype.warning}`,
        remedy:
          v.encoderDtype.source === 'label multimodal_encoder_dtype'
            ? "set the worker's label multimodal_encoder_dtype (on Workers, or its GetModelInfo) to float32, bfloat16 or float16"
            : `set ${v.encoderDtype.source} to float32, bfloat16 or float16 (or unset it) and restart the router`,
      });
  }
  for (const v of views) {
    if (v.decision.outcome === 'shm_then_inline')
      warnings.push({
        kind: 'shm_will_fail',
        message: `worker ${v.url}: ${v.decision.explanation}`,
        remedy: v.decision.advice ?? DECISION_ADVICE.auto_different_shm!,
      });
  }
  const split = encodeShmSplit(state, views);
  if (split) warnings.push(split);
  return warnings;
}

/**
 * Under EPD, encode workers that disagree about /dev/shm: some of them get their images by
 * SHM and others inline (each by its own lane), so the same image costs more on some of them.
 */
function encodeShmSplit(state: ConsoleState, views: readonly WorkerView[]): Warning | undefined {
  if (state.store.current().config.disaggregation !== 'epd') return undefined;
  const encoders = views.filter((v) => v.spec.worker_type === 'encode' && v.health === 'healthy');
  const bySHM = encoders.filter((v) => v.decision.outcome === 'shm').map((v) => v.url);
  const inline = encoders.filter((v) => v.decision.outcome !== 'shm').map((v) => v.url);
  if (bySHM.length === 0 || inline.length === 0) return undefined;
  return {
    kind: 'encode_shm_split',
    message: `encode workers disagree about /dev/shm: ${bySHM.join(', ')} get${bySHM.length === 1 ? 's its' : ' their'} images by SHM, ${inline.join(', ')} inline (each by its own lane)`,
    remedy: `to send every image by SHM, give ${inline.join(', ')} the router's /dev/shm (a container started with --ipc=host or the same tmpfs mounted), or see each one's reason on Workers`,
  };
}

/** The warning that a restart with the start flags would set running settings back. */
function untilRestartWarning(state: ConsoleState, restartChanges: readonly DiffEntry[] | null): Warning[] {
  const { changes, flags } = flagCausedChanges(restartChanges ?? [], state.startFlags);
  if (changes.length === 0) return [];
  return [
    {
      kind: 'until_restart',
      message: `${changes.length} running setting${changes.length === 1 ? '' : 's'} would be set back by a restart with the flags the router started with (${flags.join(' ')}): ${changes.map(restartChangeText).join('; ')}`,
      remedy: 'the file has your change; restart the router without those flags to keep it, or apply the flag values again',
    },
  ];
}

export function overviewHandlers(state: ConsoleState): HandlerGroup<'overview'> {
  const { store, running } = state;
  const ctx = running.context;
  // Paced, and a costly listing (a /dev/shm someone filled) reused a while: the overview is asked every second.
  const listing = new TensorFileListing();
  return {
    async overview() {
      const s = store.current();
      let files: TensorFilesOfPid[];
      try {
        files = await listing.get(ctx.writer.dir, { maxFileAgeMs: s.config.request_timeout_secs * 1000 });
      } catch {
        files = []; // /dev/shm cannot be listed: the host panel says it is not writable
      }
      // This router's rows (the pid its writer names files with, in its own pid namespace) apart from every other owner's.
      const isOurs = (f: TensorFilesOfPid) => f.pid === ctx.writer.pid && f.pidNamespace === null;
      const ours = files.filter(isOurs);
      const others = files.filter((f) => !isOurs(f));
      const space = await shmFreeBytes(ctx.writer.dir);
      const workers = ctx.registry.list();
      const health = workers.map(workerHealth);
      const drift = await fileView(state);
      const views = workers.map((w) => workerView(state, s, w, new Map()));
      const restartChanges = await state.restartChangesNow();
      const critical = criticalStates(ctx);
      const warnings = [
        ...environmentWarnings(s),
        ...shmWarnings(state, files),
        ...workerWarnings(state, views),
        ...untilRestartWarning(state, restartChanges),
      ];
      if (drift.drifted)
        warnings.push({
          kind: 'config_drift',
          message: `${drift.path} was changed on disk since the console loaded it`,
          remedy: 'review the change in YAML and reload the file (it is never overwritten silently)',
        });
      return {
        host: {
          token: ctx.host.routerToken ?? null,
          tokenProblem: running.namespace.problem ?? null,
          shmDir: ctx.writer.dir,
          shmWritable: ctx.host.shmWritable,
          shmError: running.shmProbe.error ?? null,
          shmFreeBytes: space?.free ?? null,
          shmTotalBytes: space?.total ?? null,
        },
        files: {
          count: ours.reduce((n, f) => n + f.files - f.cacheFiles, 0),
          bytes: ours.reduce((n, f) => n + f.bytes - f.cacheBytes, 0),
          cacheFiles: ours.reduce((n, f) => n + f.cacheFiles, 0),
          cacheBytes: ours.reduce((n, f) => n + f.cacheBytes, 0),
          otherFiles: others.reduce((n, f) => n + f.files, 0),
          otherBytes: others.reduce((n, f) => n + f.bytes, 0),
          orphans: files.reduce((n, f) => n + f.orphans, 0),
          orphanBytes: files.reduce((n, f) => n + f.orphanBytes, 0),
          suspicious: files.reduce((n, f) => n + f.suspicious, 0),
          outstandingBytes: ctx.writer.outstanding,
          maxOutstandingBytes: ctx.writer.maxOutstanding() ?? null,
        },
        router: { url: running.url, model: ctx.model.path, family: familyById(ctx.model.family).label, pid: process.pid },
        config: { file: state.file.path, revision: s.revision, drifted: drift.drifted, restartChanges },
        verdicts: views.map((v) => ({
          url: v.url,
          health: v.health,
          embedded: v.embedded,
          role: v.spec.worker_type,
          readsPixels: readsPixelTensors(s.config.disaggregation, v.spec.worker_type),
          mode: v.resolution.multimodal_tensor_transport.value,
          minBytes: v.resolution.multimodal_shm_min_bytes.value,
          decision: v.decision,
        })),
        workers: {
          total: workers.length,
          // A worker the operator drained is no serving capacity: counted with the draining ones.
          // Each worker counted once: a drained worker that is down is unhealthy (its health is what needs fixing).
          healthy: workers.filter((w, i) => health[i] === 'healthy' && w.drainedAt === undefined).length,
          unhealthy: health.filter((h) => h === 'unhealthy').length,
          discovering: health.filter((h) => h === 'discovering').length,
          draining: ctx.registry.drainingWorkers().length + workers.filter((w, i) => w.drainedAt !== undefined && health[i] === 'healthy').length,
        },
        pixelCache: pixelCacheView(state),
        warnings,
        health: healthStatus(critical).status,
        critical,
      };
    },
  };
}
