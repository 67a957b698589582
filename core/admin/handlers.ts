// One handler per command of the console contract (contract.ts), over the running router and
// the config store. Handlers get inputs already checked against the contract and return
// plain data the backend checks against the output schema; they throw ContractError (or the
// config errors the backend translates) for what the operator must fix.
import { ConfigError } from '../config/errors.ts';
import { RouterConfigSchema, WorkerSpecSchema, type RouterConfig, type WorkerSpec } from '../config/schema.ts';
import { carryOrigins, EMBEDDED_DEFAULT_ORIGIN, RESTART_ONLY_KEYS, type ConfigSnapshot } from '../config/store.ts';
import { checkRouterConfig } from '../config/validate.ts';
import { exportConfigYaml, parseConfigYaml } from '../config/yaml.ts';
import { runChatInMemory } from '../router/pipeline.ts';
import { parseNamespaceToken } from '../transport/namespace.ts';
import { listTensorFiles, type TensorFilesOfPid } from '../transport/orphans.ts';
import { transportForWorker } from '../transport/resolve.ts';
import { shmFreeBytes } from '../transport/shm-writer.ts';
import { DECISION_ADVICE } from '../transport/vocabulary.ts';
import { decisionView } from './decision-view.ts';
import type { WorkerState } from '../workers/registry.ts';
import type { CallMeta } from './backend.ts';
import { calibrateWorker, calibrationPlan, DEFAULT_CALIBRATION_SAMPLES, minSamplesForWinner } from './calibrate.ts';
import type { ConsoleState } from './console.ts';
import { ContractError, type CommandName, type CommandOutput, type ConfigIssue, type Draft, type WorkerView } from './contract.ts';
import { diagnoseWorker } from './diagnose.ts';
import { diffConfigs } from './diff.ts';
import { exportForGateway } from './gateway-export.ts';
import { syntheticChat } from './test-image.ts';

type Handler<C extends CommandName> = (input: never, meta: CallMeta) => Promise<CommandOutput<C>>;
type Handlers = { [C in CommandName]: Handler<C> };

/** A draft as a config, or every issue (YAML issues carry line:column). */
function readDraft(draft: Draft): { ok: true; config: RouterConfig } | { ok: false; issues: ConfigIssue[] } {
  if ('yaml' in draft) {
    try {
      return { ok: true, config: parseConfigYaml(draft.yaml, 'draft.yaml').config };
    } catch (err) {
      if (err instanceof ConfigError) return { ok: false, issues: err.issues };
      throw err;
    }
  }
  const checked = checkRouterConfig(draft.draft);
  return checked.ok ? { ok: true, config: checked.config } : { ok: false, issues: checked.issues.map(({ path, message }) => ({ path, message })) };
}

function draftConfig(draft: Draft): RouterConfig {
  const r = readDraft(draft);
  if (!r.ok) throw new ContractError('invalid_config', `the draft is not a valid configuration: ${r.issues.map((i) => i.message).join('; ')}`, r.issues[0]?.path, r.issues);
  return r.config;
}

function workerHealth(w: WorkerState): WorkerView['health'] {
  if (w.removed) return 'draining';
  if (w.healthy) return 'healthy';
  return w.lastCheckedAt === undefined ? 'discovering' : 'unhealthy';
}

function tokenMatch(routerToken: string | undefined, theirs: string | undefined): WorkerView['tokenMatch'] {
  if (!routerToken) return 'router_has_none';
  if (!theirs) return 'missing';
  if (theirs === routerToken) return 'equal';
  const a = parseNamespaceToken(routerToken);
  const b = parseNamespaceToken(theirs);
  return a && b && a.bootId === b.bootId ? 'different_shm' : 'different_host';
}

/** A draft's origins: what is unchanged keeps its origin, the rest is the draft's own. */
function draftOrigins(s: ConfigSnapshot, draft: RouterConfig) {
  return carryOrigins(s.config, s.origins, draft, 'draft (not applied)');
}

/** Tensors per worker over the last `seconds`, from the event ring. */
function trafficShares(events: readonly { time: number; worker: string; source: string }[], seconds = 60): Map<string, number> {
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

function findWorker(snapshot: ConfigSnapshot, url: string): WorkerSpec {
  const spec = snapshot.config.workers.find((w) => w.url === url);
  if (!spec) throw new ContractError('not_found', `no worker ${url} in configuration revision ${snapshot.revision}`, 'url');
  return spec;
}

export function createHandlers(state: ConsoleState): Handlers {
  const { store, running, history } = state;
  const ctx = running.context;

  const workerView = (snapshot: ConfigSnapshot, w: WorkerState, shares: Map<string, number>): WorkerView => {
    const index = snapshot.config.workers.findIndex((s) => s.url === w.spec.url);
    const spec = index >= 0 ? snapshot.config.workers[index]! : w.spec;
    const { decision, resolved } = transportForWorker({ spec, config: snapshot.config, env: snapshot.env, origins: snapshot.origins, labels: w.labels, reachable: w.healthy, host: ctx.host, shmLaneBroken: w.shmLane?.error });
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
      tokenMatch: tokenMatch(ctx.host.routerToken, w.labels.shm_namespace_id),
      inFlight: w.inFlight,
      trafficShare: shares.get(spec.url) ?? 0,
      resolution: resolved,
      decision: decisionView(decision),
      shmLane: w.shmLane ?? null,
    };
  };

  const configView = async () => {
    const s = store.current();
    const file = await fileView(s);
    return {
      revision: s.revision,
      config: s.config,
      origins: { ...s.origins },
      env: s.env,
      appliedAt: s.appliedAt,
      client: s.client,
      file,
      restartOnly: [...RESTART_ONLY_KEYS],
      startFlags: state.startFlags.map(({ key, flag }) => ({ key, flag })),
      defaults: RouterConfigSchema.parse({}),
    };
  };

  const fileView = async (s: ConfigSnapshot) => {
    if (!state.file) return { path: null, drifted: false, driftDiff: [], driftIssues: [] };
    const drift = await state.file.drift();
    if (!drift.drifted) return { path: state.file.path, drifted: false, driftDiff: [], driftIssues: [] };
    try {
      return { path: state.file.path, drifted: true, driftDiff: diffConfigs(s.config, fileAsRunning(s, state.file.parse(drift.text).config)), driftIssues: [] };
    } catch (err) {
      if (err instanceof ConfigError) return { path: state.file.path, drifted: true, driftDiff: [], driftIssues: err.issues };
      throw err;
    }
  };

  /** Each worker of `config` resolved as its next request would be, were `config` applied now (what discovery knows of the worker, its lane included). */
  const resolveDraft = (s: ConfigSnapshot, config: RouterConfig) => {
    const origins = draftOrigins(s, config); // once: it compares the whole list
    return config.workers.map((spec) => {
      const w = ctx.registry.get(spec.url);
      const { decision, resolved } = transportForWorker({ spec, config, env: s.env, origins, labels: w ? { ...w.discoveredLabels, ...spec.labels } : spec.labels, reachable: w?.healthy ?? false, host: ctx.host, shmLaneBroken: w?.shmLane?.error });
      return { url: spec.url, resolution: resolved, decision: decisionView(decision) };
    });
  };

  const withWorkers = (snapshot: ConfigSnapshot, workers: WorkerSpec[]): RouterConfig => ({ ...snapshot.config, workers });

  /**
   * A YAML text as the running router takes it: with no worker in it, the embedded
   * reference worker stays (it is never written out, so an exported file has none).
   */
  const withEmbedded = (s: ConfigSnapshot, fromYaml: RouterConfig): RouterConfig =>
    fromYaml.workers.length === 0 ? { ...fromYaml, workers: s.config.workers.filter((w) => state.embeddedUrls().has(w.url)) } : fromYaml;
  /**
   * The configuration file as the running router would take it on a reload: as at start,
   * the settings given by flags keep their values (flags override the file for the whole
   * run), whatever the file says.
   */
  const fileAsRunning = (s: ConfigSnapshot, fromFile: RouterConfig): RouterConfig => {
    const next: Record<string, unknown> = { ...withEmbedded(s, fromFile) };
    for (const [key, origin] of Object.entries(s.origins)) {
      if (origin.startsWith('--') && !key.includes('[') && key !== 'workers') next[key] = (s.config as Record<string, unknown>)[key];
    }
    return next as RouterConfig;
  };
  /**
   * A YAML text the operator imports, as the running router takes it: what it writes is taken
   * as written; a setting given by a flag at start that it leaves out keeps its running value
   * (an exported file has them all, a hand-written one need not restate `--port`).
   */
  const yamlAsDraft = (s: ConfigSnapshot, text: string): RouterConfig | undefined => {
    let parsed;
    try {
      parsed = parseConfigYaml(text, 'draft.yaml');
    } catch (err) {
      if (err instanceof ConfigError) return undefined; // readDraft reports the issues
      throw err;
    }
    const next: Record<string, unknown> = { ...withEmbedded(s, parsed.config) };
    for (const [key, origin] of Object.entries(s.origins)) {
      if (origin.startsWith('--') && !key.includes('[') && key !== 'workers' && !parsed.positions.has(key)) next[key] = (s.config as Record<string, unknown>)[key];
    }
    return next as RouterConfig;
  };
  const yamlDraft = (s: ConfigSnapshot, draft: Draft): Draft => {
    if (!('yaml' in draft)) return draft;
    const config = yamlAsDraft(s, draft.yaml);
    return config ? { draft: config as unknown as Record<string, unknown> } : draft;
  };

  const handlers = {
    async overview() {
      const s = store.current();
      let files: TensorFilesOfPid[] = [];
      try {
        files = listTensorFiles(ctx.writer.dir, { maxFileAgeMs: s.config.request_timeout_secs * 1000 });
      } catch {
        files = [];
      }
      const space = await shmFreeBytes(ctx.writer.dir);
      const workers = ctx.registry.list();
      const health = workers.map(workerHealth);
      const drift = await fileView(s);
      const recent = ctx.events.perSecond();
      const nowSecond = Math.floor(Date.now() / 1000);
      // The last five complete seconds; the current one is still filling.
      const window = recent.filter((a) => a.second < nowSecond && a.second >= nowSecond - 5);
      const rate = (pick: 'tensors' | 'bytes') => ({
        inline: window.reduce((n, a) => n + a[pick].inline, 0) / 5,
        shm: window.reduce((n, a) => n + a[pick].shm, 0) / 5,
        remote: window.reduce((n, a) => n + a[pick].remote, 0) / 5,
      });
      const warnings: CommandOutput<'overview'>['warnings'] = [];
      for (const knob of ['multimodal_tensor_transport', 'multimodal_shm_min_bytes'] as const) {
        const r = s.env[knob];
        if (r.source === 'env_legacy') warnings.push({ kind: 'deprecated_env', message: `${r.legacy.name} is deprecated (set to ${JSON.stringify(r.legacy.raw)})`, remedy: `set ${r.canonical.name} instead and unset ${r.legacy.name}` });
        for (const v of [r.canonical, r.legacy]) {
          if (v.state === 'invalid') warnings.push({ kind: 'invalid_env', message: `${v.name}=${JSON.stringify(v.raw)} is not a valid value and is ignored`, remedy: `fix or unset ${v.name} and restart the router` });
        }
      }
      for (const w of workers) {
        if (!w.healthy && w.lastCheckedAt !== undefined) warnings.push({ kind: 'unhealthy_worker', message: `worker ${w.spec.url} is unhealthy: ${w.lastError ?? 'no answer'}`, remedy: 'check that the worker runs and its URL is right (Doctor shows each step)' });
      }
      const orphans = files.reduce((n, f) => n + f.orphans, 0);
      if (orphans > 0) warnings.push({ kind: 'orphan_files', message: `${orphans} orphaned tensor file(s) in ${ctx.writer.dir}`, remedy: 'the router sweeps them every minute; mmtc doctor --sweep-orphans removes them now' });
      const suspicious = files.reduce((n, f) => n + f.suspicious, 0);
      if (suspicious > 0) warnings.push({ kind: 'suspicious_files', message: `${suspicious} entr${suspicious === 1 ? 'y' : 'ies'} under our file names in ${ctx.writer.dir} are not regular files`, remedy: `inspect them (ls -l ${ctx.writer.dir}/smg-tokenspeed-*) and remove what you did not create` });
      if (drift.drifted) warnings.push({ kind: 'config_drift', message: `${drift.path} was changed on disk since the console loaded it`, remedy: 'review the change in YAML and reload the file (it is never overwritten silently)' });
      if (!ctx.host.shmWritable) warnings.push({ kind: 'shm_not_writable', message: `${ctx.writer.dir} is not writable by the router: shm and auto stay inline`, remedy: DECISION_ADVICE.shm_not_writable! });
      for (const w of workers) {
        if (w.shmLane) warnings.push({ kind: 'shm_read_failed', message: `worker ${w.spec.url} could not read the router's /dev/shm files (${w.shmLane.error}); its requests go inline`, remedy: DECISION_ADVICE.auto_worker_read_failed! });
      }
      const maxOutstanding = ctx.writer.maxOutstanding();
      if (maxOutstanding !== undefined && ctx.writer.outstanding >= maxOutstanding * 0.9) {
        warnings.push({ kind: 'shm_budget', message: `this router's files in ${ctx.writer.dir} are at ${Math.round((100 * ctx.writer.outstanding) / maxOutstanding)}% of multimodal_shm_max_outstanding_bytes`, remedy: DECISION_ADVICE.shm_budget_exceeded! });
      }
      if (!ctx.host.routerToken) warnings.push({ kind: 'no_token', message: 'the router has no /dev/shm namespace token: auto stays inline', remedy: DECISION_ADVICE.auto_router_no_token! });
      const views = workers.map((w) => workerView(s, w, new Map()));
      for (const v of views) {
        if (v.decision.outcome === 'shm_then_inline') warnings.push({ kind: 'shm_will_fail', message: `worker ${v.url}: ${v.decision.explanation}`, remedy: v.decision.advice ?? DECISION_ADVICE.auto_different_shm! });
      }
      const restartChanges = await state.restartChangesNow();
      // Of what a restart would change, what the start flags set back (a hand edit of the file is the drift warning's).
      const byFlags = (restartChanges ?? []).filter((d) => state.startFlags.some((f) => d.path === f.key || (f.key === 'workers' && d.path.startsWith('workers['))));
      if (byFlags.length > 0) {
        const flags = state.startFlags.filter((f) => byFlags.some((d) => d.path === f.key || (f.key === 'workers' && d.path.startsWith('workers[')))).map((f) => f.flag);
        warnings.push({
          kind: 'until_restart',
          message: `${byFlags.length} running setting${byFlags.length === 1 ? '' : 's'} would be set back by a restart with the flags the router started with (${flags.join(' ')}): ${byFlags.map((d) => `${d.path} ${JSON.stringify(d.before)} → ${JSON.stringify(d.after)}`).join(', ')}`,
          remedy: 'the file has your change; restart the router without those flags to keep it, or apply the flag values again',
        });
      }
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
          count: files.reduce((n, f) => n + f.files, 0),
          bytes: files.reduce((n, f) => n + f.bytes, 0),
          orphans,
          orphanBytes: files.reduce((n, f) => n + f.orphanBytes, 0),
          suspicious,
          outstandingBytes: ctx.writer.outstanding,
          maxOutstandingBytes: ctx.writer.maxOutstanding() ?? null,
        },
        router: { url: running.url, model: ctx.model.path, pid: process.pid },
        config: { file: state.file?.path ?? null, revision: s.revision, drifted: drift.drifted, restartChanges },
        verdicts: views.map((v) => ({ url: v.url, health: v.health, embedded: v.embedded, mode: v.resolution.multimodal_tensor_transport.value, minBytes: v.resolution.multimodal_shm_min_bytes.value, decision: v.decision })),
        workers: {
          total: workers.length,
          healthy: health.filter((h) => h === 'healthy').length,
          unhealthy: health.filter((h) => h === 'unhealthy').length,
          discovering: health.filter((h) => h === 'discovering').length,
          draining: ctx.registry.drainingWorkers().length,
        },
        rates: { tensorsPerSecond: rate('tensors'), bytesPerSecond: rate('bytes') },
        warnings,
      };
    },

    'config.get': configView,

    async 'config.validate'(input: Draft) {
      const r = readDraft(input);
      return r.ok ? { ok: true, issues: [], config: r.config } : { ok: false, issues: r.issues };
    },

    async 'config.diff'(input: Draft) {
      const s = store.current();
      const next = draftConfig(yamlDraft(s, input));
      const warnings = resolveDraft(s, next)
        .filter((w) => w.decision.outcome === 'shm_then_inline')
        .map((w) => ({ url: w.url, decision: w.decision, message: `${w.url}: ${w.decision.explanation}` }));
      return { revision: s.revision, diff: diffConfigs(s.config, next), untilRestart: await state.untilRestart(next), warnings };
    },

    async 'config.resolve'(input: Draft) {
      const s = store.current();
      const r = readDraft(yamlDraft(s, input));
      if (!r.ok) return { ok: false, issues: r.issues, workers: [] };
      return { ok: true, issues: [], workers: resolveDraft(s, r.config) };
    },

    async 'config.apply'(input: Draft & { expectedRevision: number }, meta: CallMeta) {
      const draft = 'yaml' in input ? { yaml: input.yaml } : { draft: input.draft };
      return state.apply(draftConfig(yamlDraft(store.current(), draft)), input.expectedRevision, meta.client).catch((err: unknown) => {
        throw conflictWithDiff(err);
      });
    },

    async 'config.importYaml'(input: { text: string }) {
      const r = readDraft({ yaml: input.text });
      if (!r.ok) return { ok: false, issues: r.issues, diff: [] };
      const s = store.current();
      const draft = yamlAsDraft(s, input.text) ?? r.config;
      return { ok: true, issues: [], draft, diff: diffConfigs(s.config, draft) };
    },

    async 'config.exportYaml'() {
      const s = store.current();
      const embedded = state.embeddedUrls();
      return { yaml: exportConfigYaml({ ...s.config, workers: s.config.workers.filter((w) => !embedded.has(w.url)) }), revision: s.revision };
    },

    async 'config.exportForGateway'() {
      return exportForGateway(store.current().config, { excludeUrls: state.embeddedUrls() });
    },

    async 'config.history'() {
      const entries = history.entries().map((r) => {
        const kept = RouterConfigSchema.safeParse(r.config);
        return { revision: r.revision, appliedAt: r.appliedAt, client: r.client, diff: r.diff, restorable: kept.success, ...(kept.success ? { config: kept.data } : {}) };
      });
      return { entries: entries.reverse() };
    },

    async 'config.rollback'(input: { revision: number; expectedRevision: number }, meta: CallMeta) {
      const record = history.get(input.revision);
      if (!record) throw new ContractError('not_found', `revision ${input.revision} is not in the history (it keeps the last ${history.entries().length} revisions)`, 'revision');
      const parsed = RouterConfigSchema.safeParse(record.config);
      if (!parsed.success) throw new ContractError('invalid_config', `revision ${input.revision}'s configuration is no longer valid: ${parsed.error.issues[0]?.message}`, 'revision');
      return state.apply(parsed.data, input.expectedRevision, meta.client).catch((err: unknown) => {
        throw conflictWithDiff(err);
      });
    },

    async 'config.reloadFile'(input: { expectedRevision: number }, meta: CallMeta) {
      const file = state.file;
      if (!file) throw new ContractError('not_found', 'the console has no configuration file');
      const drift = await file.drift();
      const next = fileAsRunning(store.current(), file.parse(drift.text).config);
      store.check(next, input.expectedRevision);
      file.adopt(drift.text);
      return state.apply(next, input.expectedRevision, meta.client);
    },

    async 'workers.list'() {
      const s = store.current();
      const shares = trafficShares(ctx.events.recent());
      const views = [...ctx.registry.list(), ...ctx.registry.drainingWorkers()].map((w) => workerView(s, w, shares));
      return { revision: s.revision, workers: views };
    },

    async 'workers.add'(input: { worker: Record<string, unknown>; expectedRevision: number }, meta: CallMeta) {
      const s = store.current();
      const spec = WorkerSpecSchema.parse(input.worker);
      if (s.config.workers.some((w) => w.url === spec.url)) throw new ContractError('invalid_config', `worker ${spec.url} is already configured; edit it instead`, 'worker.url');
      // The embedded reference worker stands in only while no worker is configured.
      const embedded = state.embeddedUrls();
      return state.apply(withWorkers(s, [...s.config.workers.filter((w) => !embedded.has(w.url)), spec]), input.expectedRevision, meta.client).catch((err: unknown) => {
        throw conflictWithDiff(err);
      });
    },

    async 'workers.update'(input: { url: string; worker: Record<string, unknown>; expectedRevision: number }, meta: CallMeta) {
      const s = store.current();
      findWorker(s, input.url);
      const spec = WorkerSpecSchema.parse(input.worker);
      if (spec.url !== input.url && s.config.workers.some((w) => w.url === spec.url)) throw new ContractError('invalid_config', `worker ${spec.url} is already configured`, 'worker.url');
      return state.apply(withWorkers(s, s.config.workers.map((w) => (w.url === input.url ? spec : w))), input.expectedRevision, meta.client).catch((err: unknown) => {
        throw conflictWithDiff(err);
      });
    },

    async 'workers.remove'(input: { url: string; expectedRevision: number }, meta: CallMeta) {
      const s = store.current();
      findWorker(s, input.url);
      return state.apply(withWorkers(s, s.config.workers.filter((w) => w.url !== input.url)), input.expectedRevision, meta.client).catch((err: unknown) => {
        throw conflictWithDiff(err);
      });
    },

    async 'workers.resetShmLane'(input: { url: string; force?: boolean }) {
      const w = ctx.registry.get(input.url);
      if (!w) throw new ContractError('not_found', `no worker ${input.url} in the registry`, 'url');
      findWorker(store.current(), input.url);
      const wasBroken = w.shmLane !== undefined;
      if (!wasBroken) return { url: input.url, wasBroken, steps: [] };
      // The checks the next request depends on, the lane's own step aside (it is what is reset).
      const { steps } = await diagnoseWorker(state, input.url);
      const failing = steps.filter((st) => st.ok === false && st.id !== 'shm_lane');
      if (failing.length > 0 && !input.force) {
        throw new ContractError(
          'checks_failed',
          `not reset: ${failing.map((st) => `${st.label} (${st.detail})`).join('; ')}. The next request would break the lane again; fix these first, or reset anyway`,
          'url',
          [],
          { failing },
        );
      }
      ctx.registry.resetShmLane(w);
      return { url: input.url, wasBroken, steps };
    },

    async 'workers.diagnose'(input: { url: string }) {
      const s = store.current();
      findWorker(s, input.url);
      return diagnoseWorker(state, input.url);
    },

    async 'traffic.snapshot'(input: { limit?: number }) {
      return { events: ctx.events.recent(input.limit ?? 1000), seconds: [...ctx.events.perSecond()] };
    },

    async 'traffic.sendTestRequest'(input: { url: string; width: number; height: number; format: 'png' | 'jpeg' | 'webp' }) {
      const s = store.current();
      findWorker(s, input.url);
      const t = performance.now();
      const chat = await runChatInMemory(ctx, await syntheticChat(input.width, input.height, input.format, 512), { source: 'console', worker: input.url });
      const ms = performance.now() - t;
      const parsed = JSON.parse(chat.body || '{}') as { choices?: Array<{ message?: { content?: string } }>; error?: { message?: string } };
      const content = parsed.choices?.[0]?.message?.content ?? parsed.error?.message ?? chat.body;
      const events = chat.requestId ? ctx.events.recent().filter((e) => e.requestId === chat.requestId) : [];
      return { status: chat.status, requestId: chat.requestId ?? null, revision: chat.revision ?? s.revision, worker: input.url, content, events, ms };
    },

    async 'transport.calibrationPlan'(input: { url: string }) {
      findWorker(store.current(), input.url);
      const plan = calibrationPlan(state, input.url);
      return { worker: input.url, dtype: plan.dtype, sizes: plan.sizes, defaultSamples: DEFAULT_CALIBRATION_SAMPLES, minSamplesForWinner: minSamplesForWinner() };
    },

    async 'transport.calibrate'(input: { url: string; samples?: number }) {
      const s = store.current();
      findWorker(s, input.url);
      if (state.busy.has('calibrate')) throw new ContractError('busy', 'a calibration is already running; wait for it to finish');
      state.busy.add('calibrate');
      try {
        return await calibrateWorker(state, input.url, input.samples ?? DEFAULT_CALIBRATION_SAMPLES);
      } finally {
        state.busy.delete('calibrate');
      }
    },

    async 'metrics.text'() {
      return { text: await ctx.metrics.text() };
    },
  };

  /** A conflict says what changed between the revision the client edited and the current one. */
  function conflictWithDiff(err: unknown): unknown {
    const e = err as { name?: string; expectedRevision?: number; currentRevision?: number };
    if (e?.name !== 'ConfigConflictError') return err;
    const current = store.current();
    const edited = history.get(e.expectedRevision!);
    const base = edited ? RouterConfigSchema.safeParse(edited.config).data : undefined;
    return new ContractError('conflict', (err as Error).message, undefined, [], {
      currentRevision: current.revision,
      expectedRevision: e.expectedRevision,
      changedMeanwhile: base ? diffConfigs(base, current.config) : [],
    });
  }

  return handlers as unknown as Handlers;
}
