// What the console shows of a worker and of the configuration file, computed from the state
// that decides: a worker's verdict is transportForWorker over the revision its next request
// reads, with what discovery knows of it (labels, health, a broken lane) and what its engine says
// of its protocol; the file's drift is what a reload of the text on disk would change.
import { ConfigError } from '../config/errors.ts';
import { bootstrapAddress, type RouterConfig, type WorkerSpec } from '../config/schema.ts';
import { SAMPLING_DEFAULTS_LABEL, samplingDefaultsOf } from '../engines/sampling.ts';
import { familyById, familyOfModelType } from '../multimodal/families/index.ts';
import { EMBEDDED_DEFAULT_ORIGIN, type ConfigSnapshot } from '../config/store.ts';
import { capabilitiesOf, declaredRuntime, engineFor, laneFacts } from '../engines/table.ts';
import { compareNamespaceTokens } from '../transport/namespace.ts';
import { transportForWorker } from '../transport/resolve.ts';
import { inRotation, type WorkerState } from '../workers/registry.ts';
import type { ConfigView, WorkerView, WorkerWarning } from './contract.ts';
import { decisionView } from './decision-view.ts';
import { diffConfigs } from './diff.ts';
import { draftOrigins } from './drafts.ts';
import type { ConsoleState } from './state.ts';

export function workerHealth(w: WorkerState): WorkerView['health'] {
  if (w.removed) return 'draining';
  if (w.healthy) return 'healthy';
  return w.lastCheckedAt === undefined ? 'discovering' : 'unhealthy';
}

/** Tensors per worker over the last `seconds`, from the event ring (API traffic only). */
export function trafficShares(events: readonly { time: number; worker: string; source: string }[], seconds = 60): Map<string, number> {
  const since = Date.now() - seconds * 1000;
  const counts = new Map<string, number>();
  let total = 0;
  for (const e of events) {
    if (e.time < since || e.source !== 'api') continue;
    counts.set(e.worker, (counts.get(e.worker) ?? 0) + 1);
    total += 1;
  }
  return new Map([...counts].map(([url, n]) => [url, total ? n / total : 0]));
}

/**
 * The worker's transport for its next request under `config` (the running one, or a draft's);
 * `laneReset`: as if its broken lane were reset. A known worker that takes no request now (not
 * healthy, not yet discovered, removed, drained: the registry's inRotation, the rule the router picks
 * by) gets no_request (worker_not_healthy, or worker_drained), never the verdict its last advertised token would
 * give: its next request does not exist until it is back.
 */
export function workerTransport(
  state: ConsoleState,
  spec: WorkerSpec,
  config: RouterConfig,
  s: ConfigSnapshot,
  origins: ConfigSnapshot['origins'],
  w: WorkerState | undefined,
  laneReset = false,
) {
  const ctx = state.running.context;
  const transport = transportForWorker({
    spec,
    config,
    env: s.env,
    origins,
    // An operator label overrides what the worker advertises, as in discovery.
    labels: w ? { ...w.discoveredLabels, ...spec.labels } : spec.labels,
    reachable: w?.healthy ?? false,
    host: ctx.host,
    runtime: laneFacts(w?.runtime ?? declaredRuntime(spec.runtime)),
    shmLaneBroken: laneReset ? undefined : w?.shmLane?.error,
  });
  if (w && !inRotation(w))
    return {
      ...transport,
      decision: {
        shmEnabled: false,
        reason: w.drainedAt !== undefined && w.healthy && !w.removed ? ('worker_drained' as const) : ('worker_not_healthy' as const),
      },
    };
  return transport;
}

export function workerView(state: ConsoleState, snapshot: ConfigSnapshot, w: WorkerState, shares: ReadonlyMap<string, number>): WorkerView {
  const index = snapshot.config.workers.findIndex((s) => s.url === w.spec.url);
  const spec = index >= 0 ? snapshot.config.workers[index]! : w.spec;
  const { decision, resolved } = workerTransport(state, spec, snapshot.config, snapshot, snapshot.origins, w);
  const origin = index >= 0 ? (snapshot.origins[`workers[${index}]`] ?? snapshot.origins[`workers[${index}].url`] ?? null) : null;
  return {
    url: spec.url,
    spec,
    origin,
    embedded: origin === EMBEDDED_DEFAULT_ORIGIN,
    runtime: w.runtime ?? null,
    health: workerHealth(w),
    lastError: w.lastError ?? null,
    lastCheckedAt: w.lastCheckedAt ?? null,
    discoveredLabels: w.discoveredLabels,
    labels: w.labels,
    token: w.labels.shm_namespace_id ?? null,
    tokenMatch: compareNamespaceTokens(state.running.context.host.routerToken, w.labels.shm_namespace_id).match,
    inFlight: w.inFlight,
    drainedAt: w.drainedAt ?? null,
    trafficShare: shares.get(spec.url) ?? 0,
    resolution: resolved,
    decision: decisionView(decision),
    shmLane: w.shmLane ?? null,
    samplingDefaults: samplingDefaultsView(w.labels),
    encoderDtype: encoderDtypeView(state, w),
    kvHandoff: kvHandoffView(snapshot.config, spec, w),
    model: modelView(state, w.labels),
  };
}

/** The worker's model by its discovery labels, and whether it is the router's family. */
function modelView(state: ConsoleState, labels: Readonly<Record<string, string>>): WorkerView['model'] {
  const modelType = labels.model_type;
  if (modelType === undefined) return null;
  const family = familyOfModelType(modelType);
  const router = familyById(state.running.context.model.family);
  return {
    name: labels.served_model_name ?? labels.model_path ?? null,
    modelType,
    family: family?.label ?? null,
    sameFamily: family?.id === router.id,
    routerFamily: router.label,
  };
}

function samplingDefaultsView(labels: Readonly<Record<string, string>>): WorkerView['samplingDefaults'] {
  if (labels[SAMPLING_DEFAULTS_LABEL] === undefined) return null;
  const { defaults, warning } = samplingDefaultsOf(labels);
  return { values: defaults, warning: warning ?? null };
}

/** The encoder input's dtype as the router chooses it for this worker's next image (core/router/prepare.ts asks the same rule). */
function encoderDtypeView(state: ConsoleState, w: WorkerState): WorkerView['encoderDtype'] {
  if (w.runtime === undefined) return null;
  const choice = capabilitiesOf(w.runtime).encoderDtype('image', state.running.context.processEnv, w.labels);
  return { dtype: choice.dtype, source: choice.source, warning: choice.warning ?? null };
}

/** How a vLLM prefill worker's KV reaches the decode worker under PD (its engine's rule, from its labels). */
function kvHandoffView(config: RouterConfig, spec: WorkerSpec, w: WorkerState): WorkerView['kvHandoff'] {
  const runtime = w.runtime ?? declaredRuntime(spec.runtime);
  if (config.disaggregation !== 'pd' || spec.worker_type !== 'prefill' || runtime === undefined) return null;
  const engine = engineFor(runtime);
  const address = bootstrapAddress(spec);
  if (engine.capabilities.pd !== 'sequential' || !engine.kvHandoff || !address) return null;
  const { mode, connector, says } = engine.kvHandoff({ labels: w.labels, ...address });
  return { mode, connector: connector ?? null, says };
}

/** Each worker of `config` resolved as its next request would be, were `config` applied now (what discovery knows of the worker, its lane included). */
export function resolveDraft(state: ConsoleState, config: RouterConfig) {
  const s = state.store.current();
  const origins = draftOrigins(s, config); // once: it compares the whole list
  return config.workers.map((spec) => {
    const { decision, resolved } = workerTransport(state, spec, config, s, origins, state.running.context.registry.get(spec.url));
    return { url: spec.url, resolution: resolved, decision: decisionView(decision) };
  });
}

/** The workers `config` would send through /dev/shm they are known not to read, were it applied now. */
export function shmWillFailWarnings(state: ConsoleState, config: RouterConfig): WorkerWarning[] {
  return resolveDraft(state, config)
    .filter((w) => w.decision.outcome === 'shm_then_inline')
    .map((w) => ({ url: w.url, decision: w.decision, message: `${w.url}: ${w.decision.explanation}` }));
}

/** The configuration file: its path and, when it was changed by hand, what a reload would change and cause (or why it cannot be loaded). */
export async function fileView(state: ConsoleState): Promise<ConfigView['file']> {
  const file = state.file;
  const drift = await file.drift();
  if (!drift.drifted) return { path: file.path, drifted: false, driftDiff: [], driftIssues: [], driftWarnings: [] };
  try {
    const reloaded = state.asReloaded(file.parse(drift.text).config);
    return {
      path: file.path,
      drifted: true,
      driftDiff: diffConfigs(state.store.current().config, reloaded),
      driftIssues: [],
      driftWarnings: shmWillFailWarnings(state, reloaded),
    };
  } catch (err) {
    if (err instanceof ConfigError) return { path: file.path, drifted: true, driftDiff: [], driftIssues: err.issues, driftWarnings: [] };
    throw err;
  }
}
