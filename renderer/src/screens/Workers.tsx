// Workers: every configured worker with its health, token match and effective transport
// (value and the layer that decided it); add and remove (each a reviewed apply of its own,
// workers.add / workers.remove with the revision it was based on), and the per-worker
// editor whose changes go into the draft, with "inherit" (no override: router, env or
// default decides) as a first-class choice for both knobs.
import { Fragment, useId, useState } from 'react';
import {
  DEFAULT_BOOTSTRAP_PORT,
  fieldProblem,
  formatValue,
  LabelsSchema,
  hasBootstrapServer,
  readsPixelTensors,
  REASON_WORDS,
  RUNTIMES,
  WORKER_TYPES,
  WorkerSpecSchema,
  WorkerUrlSchema,
  type RouterConfig,
  type WorkerSpec,
  type WorkerView,
} from '../../../core/console/contract.ts';
import { VerdictBadge, VerdictText } from '../components/Verdict.tsx';
import { Badge, Empty, ErrorNote, Panel, ScreenHeader } from '../components/ui.tsx';
import { addWorker, patchWorker, removeWorker, typedNumber } from '../lib/draft.ts';
import { inheritedLayer } from '../lib/inherited.ts';
import { useDraftText, useTypedText } from '../lib/useTypedText.ts';
import { formatBytes, formatClock, formatPercent } from '../lib/format.ts';
import { HEALTH_TONE, LAYER_LABEL, TOKEN_WORDS } from '../lib/vocab.ts';
import { client, describeError } from '../stores/client.ts';
import { useConfig, type Resolution } from '../stores/config.ts';
import { routeHref, useUi } from '../stores/ui.ts';
import { isEmbedded, setRotation, useWorkers } from '../stores/workers.ts';
import { ShmLaneNote } from '../components/ShmLane.tsx';
import { ModeChoice, ThresholdChoice } from '../components/TransportChoices.tsx';
import { StartFlagNote } from '../components/StartFlagNote.tsx';
import { RatesPanel } from '../components/RatesPanel.tsx';

const COLUMNS = 5;

function Layer({ source }: { source: string }) {
  return <span className={`layer layer-${source}`}>{LAYER_LABEL[source] ?? source}</span>;
}

function resolutionFor(url: string, resolved: Resolution[], view: WorkerView | undefined) {
  return resolved.find((r) => r.url === url) ?? (view ? { url, resolution: view.resolution, decision: view.decision } : undefined);
}

function reviewRemove(w: WorkerView) {
  const view = useConfig.getState().view!;
  const expectedRevision = view.revision;
  useUi.getState().requestReview({
    title: `Remove worker ${w.url}`,
    intro: `New requests stop going to it at once; its ${w.inFlight} in-flight request(s) finish first. Based on revision ${expectedRevision}.`,
    proposed: removeWorker(view.config, w.url),
    confirmLabel: 'Remove worker',
    run: () => client().call('workers.remove', { url: w.url, expectedRevision }),
    undo: { toRevision: expectedRevision, config: view.config },
  });
}

/** What each KV handoff means for the decode worker, in a few words (KvHandoff.says has the whole sentence). */
const KV_HANDOFF_WORDS: Record<NonNullable<WorkerView['kvHandoff']>['mode'], string> = {
  nixl: 'the decode pulls the KV over NIXL',
  mooncake: 'the decode pulls the KV by a transfer id',
  mooncake_legacy: 'legacy host and port (no engine id)',
  none: 'the decode recomputes the prompt',
};

/** The model's sampling defaults a worker publishes: what fills a request's unset fields when it samples. */
function SamplingDefaults({ w }: { w: WorkerView }) {
  const d = w.samplingDefaults;
  if (!d) return null;
  const values = Object.entries(d.values);
  return (
    <div
      className="small muted"
      data-testid="sampling-defaults"
      title="default_sampling_params_json: fills temperature, top_p, top_k, min_p and repetition_penalty where a request leaves them out"
    >
      sampling defaults:{' '}
      {d.warning ? <span className="field-error">{d.warning}</span> : values.length ? values.map(([k, v]) => `${k} ${v}`).join(', ') : 'none'}
    </div>
  );
}

/**
 * The model the worker serves and its vision family; a family other than the router's is an
 * error: the router preprocesses every image for its own model, so this worker would get
 * another model's tensors and token counts.
 */
function WorkerModel({ w }: { w: WorkerView }) {
  const m = w.model;
  if (!m) return null;
  const name = m.name ? m.name.replace(/\/+$/, '').replace(/^.*\//, '') : m.modelType;
  return (
    <div className="small" data-testid="worker-model" title={`model_type ${m.modelType}${m.name ? `, ${m.name}` : ''}`}>
      <span className="muted">
        model {name} · {m.family ?? `${m.modelType} (no vision family mmtc serves)`}
      </span>
      {!m.sameFamily && (
        <div className="field-error">
          not the router's family ({m.routerFamily}): its images would get {m.routerFamily}'s tensors and token counts; start the router with this worker's
          model directory (--model-path)
        </div>
      )}
    </div>
  );
}

/** An encoder dtype the router cannot read (an env variable or the worker's label): it says so, and that float32 goes instead. */
function EncoderDtypeWarning({ w }: { w: WorkerView }) {
  const warning = w.encoderDtype?.warning;
  if (!warning) return null;
  return (
    <div className="small field-error" data-testid="encoder-dtype-warning">
      encoder input: {warning}
    </div>
  );
}

const ROLE_ORDER = ['encode', 'prefill', 'decode'] as const;
const ROLE_DOES: Record<(typeof ROLE_ORDER)[number], string> = {
  encode: "reads each image's tensors (by its own transport), one Encode call per image",
  prefill: 'takes the embeddings from the encode workers (EPD) or reads the pixels itself (PD)',
  decode: "takes the prefill's KV and answers the client; gets no pixel tensor",
};

/**
 * Under disaggregation, who does what for one request: the roles in the order a request
 * crosses them, each worker with its health and the verdict its own tensors get.
 */
function Topology({ mode, workers }: { mode: RouterConfig['disaggregation']; workers: readonly WorkerView[] }) {
  if (mode === 'none') return null;
  const roles = ROLE_ORDER.filter((r) => mode === 'epd' || r !== 'encode');
  return (
    <Panel id="topology" title={`Disaggregation: ${mode === 'epd' ? 'encode → prefill → decode' : 'prefill → decode'}`}>
      <ol className="topology" data-testid="topology">
        {roles.map((role) => {
          const members = workers.filter((w) => w.spec.worker_type === role);
          return (
            <li key={role} className="topology-role" data-role={role}>
              <div className="topology-head">
                <strong>{role}</strong> <span className="muted small">({members.length})</span>
              </div>
              <div className="muted small">
                {mode === 'pd' && role === 'prefill' ? 'reads the pixels (by its own transport) and hands its KV to the decode worker' : ROLE_DOES[role]}
              </div>
              <ul className="topology-workers">
                {members.map((w) => (
                  <li key={w.url}>
                    <span className="mono small">{w.url.replace(/^grpc:\/\//, '')}</span> <Badge tone={HEALTH_TONE[w.health]}>{w.health}</Badge>
                    {(role === 'encode' || (mode === 'pd' && role === 'prefill')) && (
                      <>
                        {' '}
                        <VerdictBadge decision={w.decision} threshold={w.resolution.multimodal_shm_min_bytes.value} compact />
                      </>
                    )}
                    {w.kvHandoff && (
                      <div className="muted small" data-testid="topology-kv-handoff">
                        {w.kvHandoff.says}
                      </div>
                    )}
                  </li>
                ))}
                {members.length === 0 && <li className="muted small">none configured</li>}
              </ul>
            </li>
          );
        })}
      </ol>
    </Panel>
  );
}

export function WorkersScreen() {
  const workers = useWorkers((s) => s.workers);
  const loaded = useWorkers((s) => s.loaded);
  const error = useWorkers((s) => s.error);
  const draft = useConfig((s) => s.draft);
  const resolved = useConfig((s) => s.resolved);
  const resolvedFor = useConfig((s) => s.resolvedFor);
  const view = useConfig((s) => s.view);
  const [editing, setEditing] = useState<string | null>(null);
  const [adding, setAdding] = useState(false);
  const [laneOpen, setLaneOpen] = useState<ReadonlySet<string>>(new Set());
  const [rotationError, setRotationError] = useState<string | null>(null);
  const [rotating, setRotating] = useState<string | null>(null);
  const toggleRotation = async (w: WorkerView) => {
    setRotating(w.url);
    setRotationError(null);
    try {
      await setRotation(w.url, w.drainedAt === null);
    } catch (err) {
      // Shown above the table: the router said no (the worker was removed meanwhile, the console is gone).
      setRotationError(`${w.drainedAt === null ? 'Drain' : 'Return to rotation'} of ${w.url}: ${describeError(err)}`);
    } finally {
      setRotating(null);
    }
  };
  const toggleLane = (url: string) =>
    setLaneOpen((open) => {
      const next = new Set(open);
      if (next.has(url)) next.delete(url);
      else next.add(url);
      return next;
    });
  const draftOnly = (draft?.workers ?? []).filter((d) => !workers.some((w) => w.url === d.url));

  return (
    <>
      <ScreenHeader
        title="Workers"
        lead="Each worker's effective mode and threshold, and the layer that decided them. Edit a worker to give it its own override, or leave it on inherit."
        actions={
          <button type="button" className="btn btn-primary" onClick={() => setAdding(true)}>
            Add worker…
          </button>
        }
      />
      {error && <ErrorNote>{error}</ErrorNote>}
      {rotationError && <ErrorNote>{rotationError}</ErrorNote>}
      {view && <StartFlagNote view={view} setting="workers" />}
      {view && <Topology mode={view.config.disaggregation} workers={workers} />}
      {adding && view && <AddWorker config={view.config} revision={view.revision} existing={workers} onClose={() => setAdding(false)} />}
      <Panel id="workers-table">
        {resolvedFor === 'invalid' && (
          <p className="note note-warn small" data-testid="draft-invalid">
            The draft has a problem (named in the bar below): the mode, threshold and next request shown are from before it, until it is fixed or discarded.
          </p>
        )}
        {loaded && workers.length === 0 && draftOnly.length === 0 ? (
          <Empty title="No workers">Add a worker (grpc://host:port or unix:///path) to send requests to it.</Empty>
        ) : (
          <div className="table-scroll" tabIndex={0} role="region" aria-label="Workers (scrollable)">
            <table className="table workers" data-testid="workers-table">
              <thead>
                <tr>
                  <th scope="col">Worker</th>
                  <th scope="col">Status and load</th>
                  <th scope="col">Mode, threshold</th>
                  <th scope="col">Next request</th>
                  <th scope="col" className="actions">
                    <span className="sr-only">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {workers.map((w) => {
                  const r = resolutionFor(w.url, draft ? resolved : [], w)!;
                  const mode = r.resolution.multimodal_tensor_transport;
                  const thr = r.resolution.multimodal_shm_min_bytes;
                  const removedInDraft = draft && !draft.workers.some((d) => d.url === w.url);
                  const laneShown = w.shmLane !== null && laneOpen.has(w.url);
                  return (
                    <Fragment key={w.url}>
                      <tr className={editing === w.url ? 'selected' : undefined} data-worker={w.url}>
                        <td className="worker-cell">
                          <div className={`mono worker-url ${w.url.startsWith('grpc://') ? 'nowrap' : 'wrap'}`} title={w.url}>
                            {w.url}
                          </div>
                          <div className="muted small">
                            {w.runtime ?? w.spec.runtime} · {w.spec.worker_type}
                            {!isEmbedded(w) && w.origin && (
                              <>
                                {' '}
                                ·{' '}
                                <span className="origin-cell" title={w.origin}>
                                  {w.origin.replace(/^.*\//, '')}
                                </span>
                              </>
                            )}
                          </div>
                          {isEmbedded(w) && (
                            <div>
                              <Badge
                                tone="info"
                                title="The router's own reference worker: it stands in while no worker is configured and is never written to the file. Adding a worker replaces it."
                              >
                                embedded reference worker
                              </Badge>
                            </div>
                          )}
                          <WorkerModel w={w} />
                          <SamplingDefaults w={w} />
                          <EncoderDtypeWarning w={w} />
                          {w.kvHandoff && (
                            <div className="small" data-testid="kv-handoff" title={w.kvHandoff.says}>
                              KV handoff: <span className="mono">{w.kvHandoff.connector ?? 'no connector'}</span> · {KV_HANDOFF_WORDS[w.kvHandoff.mode]}
                            </div>
                          )}
                          <div className="row-links small">
                            <a href={routeHref('precedence', { worker: w.url })} aria-label={`Precedence of ${w.url}`}>
                              ladder
                            </a>
                            <a href={routeHref('doctor', { worker: w.url })} aria-label={`Doctor for ${w.url}`}>
                              doctor
                            </a>
                            {removedInDraft && <Badge tone="warn">removed in draft</Badge>}
                          </div>
                        </td>
                        <td>
                          <div className="badge-stack">
                            <Badge tone={HEALTH_TONE[w.health]} title={w.lastError ?? undefined}>
                              {w.health}
                            </Badge>
                            <Badge tone={TOKEN_WORDS[w.tokenMatch].tone} title={w.token ?? 'no token advertised'}>
                              {TOKEN_WORDS[w.tokenMatch].word}
                            </Badge>
                            {w.shmLane && (
                              <button
                                type="button"
                                className="badge-button"
                                aria-expanded={laneShown}
                                aria-controls={`lane-${w.url}`}
                                title={w.shmLane.error}
                                data-testid="shm-lane-broken"
                                onClick={() => toggleLane(w.url)}
                              >
                                <Badge tone="bad">SHM lane broken {laneShown ? '▾' : '▸'}</Badge>
                              </button>
                            )}
                          </div>
                          {w.drainedAt !== null && (
                            <div className="small" data-testid="drained">
                              <Badge
                                tone="warn"
                                title="Drained: the router sends it no new request and its requests in flight finish. Operator state of this run: Return to rotation, or a restart of the router, puts it back."
                              >
                                drained
                              </Badge>{' '}
                              <span className="muted">
                                since {formatClock(w.drainedAt)}
                                {w.inFlight > 0 ? `, ${w.inFlight} still finishing` : ', nothing in flight'}
                              </span>
                            </div>
                          )}
                          <div className="muted small num load" data-testid="load">
                            <span title="requests in flight">{w.inFlight} in flight</span> ·{' '}
                            <span title="this worker's share of the tensors the router sent to all workers in the last 60 s (API requests)">
                              {formatPercent(w.trafficShare)} of tensors (last 60 s)
                            </span>
                          </div>
                        </td>
                        <td>
                          <div>
                            <span className="mono" data-testid="effective-mode">
                              {mode.value}
                            </span>{' '}
                            <Layer source={mode.source} />
                          </div>
                          <div>
                            <span className="num" data-testid="effective-threshold">
                              ≥ {formatBytes(thr.value)}
                            </span>{' '}
                            <Layer source={thr.source} />
                          </div>
                        </td>
                        <td data-testid="next-request" data-outcome={r.decision.outcome} className="next-cell">
                          <VerdictBadge
                            decision={r.decision}
                            threshold={thr.value}
                            readsPixels={!view || readsPixelTensors(view.config.disaggregation, w.spec.worker_type)}
                            compact
                          />
                          <div className="small reason" title={`${r.decision.reason}: ${r.decision.explanation}`}>
                            {REASON_WORDS[r.decision.reason]}
                          </div>
                          {view && !readsPixelTensors(view.config.disaggregation, w.spec.worker_type) && (
                            <div className="small muted" data-testid="no-pixels">
                              no pixel tensors: {view.config.disaggregation === 'epd' ? 'the encode workers' : 'the prefill worker'} get them; its own are the
                              images' metadata, a few bytes
                            </div>
                          )}
                        </td>
                        <td className="actions">
                          <div className="action-grid">
                            <button
                              type="button"
                              className="btn btn-small"
                              aria-expanded={editing === w.url}
                              onClick={() => setEditing(editing === w.url ? null : w.url)}
                              aria-label={`Edit ${w.url}`}
                            >
                              Edit
                            </button>
                            <button
                              type="button"
                              className="btn btn-small"
                              disabled={rotating === w.url}
                              onClick={() => void toggleRotation(w)}
                              aria-label={`${w.drainedAt === null ? 'Drain' : 'Return to rotation'} ${w.url}`}
                              title={
                                w.drainedAt === null
                                  ? 'No new request goes to it (nor a leg of one); its requests in flight finish. Until you return it, or the router restarts.'
                                  : 'Send it requests again, from the next one on (when healthy).'
                              }
                            >
                              {w.drainedAt === null ? 'Drain' : 'Return to rotation'}
                            </button>
                            <button type="button" className="btn btn-small btn-danger" onClick={() => reviewRemove(w)} aria-label={`Remove ${w.url}`}>
                              Remove
                            </button>
                          </div>
                        </td>
                      </tr>
                      {laneShown && w.shmLane && (
                        <tr className="lane-row" id={`lane-${w.url}`}>
                          <td colSpan={COLUMNS}>
                            <ShmLaneNote url={w.url} lane={w.shmLane} advice={w.decision.advice} />
                          </td>
                        </tr>
                      )}
                    </Fragment>
                  );
                })}
                {draftOnly.map((d) => (
                  <tr key={d.url}>
                    <td className="mono wrap">{d.url}</td>
                    <td colSpan={COLUMNS - 2}>
                      <Badge tone="info">in draft, not applied</Badge>
                    </td>
                    <td className="actions">
                      <button type="button" className="btn btn-small" onClick={() => setEditing(d.url)}>
                        Edit
                      </button>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </Panel>
      {editing && <WorkerEditor key={editing} url={editing} onClose={() => setEditing(null)} />}
      <RatesPanel />
    </>
  );
}

/** A runtime choice as the forms list it: `unspecified` is detection, and once a worker is reached, what was detected (by the name the gateway uses). */
export function runtimeChoice(runtime: (typeof RUNTIMES)[number], detected?: string | null): string {
  if (runtime !== 'unspecified') return runtime;
  return detected ? `detect (found ${detected})` : 'detect (unspecified)';
}

function AddWorker({ config, revision, existing, onClose }: { config: RouterConfig; revision: number; existing: WorkerView[]; onClose: () => void }) {
  const id = useId();
  const [url, setUrl] = useState('grpc://127.0.0.1:');
  const [runtime, setRuntime] = useState<(typeof RUNTIMES)[number]>('unspecified');
  const [type, setType] = useState<(typeof WORKER_TYPES)[number]>('regular');
  const [priority, setPriority] = useState<number | string>(50);
  const [bootstrapPort, setBootstrapPort] = useState<number | string | undefined>(undefined);
  const hasBootstrap = hasBootstrapServer(type);
  const urlCheck = WorkerUrlSchema.safeParse(url.trim());
  const dup = config.workers.some((w) => w.url === url.trim() && !existing.find((e) => e.url === w.url && isEmbedded(e)));
  const spec = WorkerSpecSchema.safeParse({
    url: url.trim(),
    runtime,
    worker_type: type,
    priority,
    ...(hasBootstrap && bootstrapPort !== undefined ? { bootstrap_port: bootstrapPort } : {}),
  });
  const urlProblem = !urlCheck.success ? urlCheck.error.issues[0]?.message : dup ? `${url.trim()} is already configured; edit it instead` : null;
  const portProblem = hasBootstrap ? workerFieldProblem('bootstrap_port', bootstrapPort) : null;
  const priorityProblem = workerFieldProblem('priority', priority);
  const specIssue = spec.success ? undefined : spec.error.issues[0];
  // The URL's, the port's and the priority's problems show under their fields; any other beside the button.
  const otherProblem = urlProblem || portProblem || priorityProblem || !specIssue ? null : `${specIssue.path.join('.')}: ${specIssue.message}`;
  const problem = urlProblem ?? portProblem ?? priorityProblem ?? otherProblem;
  const embedded = new Set(existing.filter(isEmbedded).map((w) => w.url));

  const review = () => {
    if (!spec.success) return;
    const worker: WorkerSpec = spec.data;
    useUi.getState().requestReview({
      title: `Add worker ${worker.url}`,
      intro: `The router discovers it (HealthCheck) before sending it anything.${embedded.size ? ' It replaces the embedded reference worker, which stands in only while no worker is configured.' : ''} Based on revision ${revision}.`,
      proposed: addWorker(config, worker, { replaceUrls: embedded }),
      confirmLabel: 'Add worker',
      run: () => client().call('workers.add', { worker, expectedRevision: revision }),
      onApplied: () => onClose(),
      undo: { toRevision: revision, config },
    });
  };

  return (
    <Panel
      title="Add a worker"
      id="add-worker"
      actions={
        <button type="button" className="btn btn-small btn-ghost" onClick={onClose}>
          Cancel
        </button>
      }
    >
      {embedded.size > 0 && (
        <p className="note note-info" data-testid="replaces-embedded">
          Adding a worker replaces the embedded reference worker (<code>{[...embedded].join(', ')}</code>): it stands in only while no worker is configured, so
          the router stops using it once this one is applied.
        </p>
      )}
      <form
        className="form-grid"
        onSubmit={(e) => {
          e.preventDefault();
          if (!problem) review();
        }}
      >
        <div className="field span-2">
          <label htmlFor={`${id}-url`}>URL</label>
          <input
            id={`${id}-url`}
            className={`input mono ${urlProblem && url.length > 10 ? 'invalid' : ''}`}
            value={url}
            onChange={(e) => setUrl(e.target.value)}
            aria-describedby={`${id}-url-hint`}
            autoFocus
          />
          <div id={`${id}-url-hint`} className={urlProblem && url.length > 10 ? 'field-error' : 'field-hint'}>
            {urlProblem && url.length > 10 ? urlProblem : 'grpc://host:port or unix:///path/to/socket'}
          </div>
        </div>
        <div className="field">
          <label htmlFor={`${id}-rt`}>Runtime</label>
          <select id={`${id}-rt`} className="select" value={runtime} onChange={(e) => setRuntime(e.target.value as typeof runtime)}>
            {RUNTIMES.map((r) => (
              <option key={r} value={r}>
                {runtimeChoice(r)}
              </option>
            ))}
          </select>
        </div>
        <div className="field">
          <label htmlFor={`${id}-type`}>Role</label>
          <select id={`${id}-type`} className="select" value={type} onChange={(e) => setType(e.target.value as typeof type)}>
            {WORKER_TYPES.map((r) => (
              <option key={r} value={r}>
                {r}
              </option>
            ))}
          </select>
        </div>
        <PriorityField id={`${id}-prio`} value={priority} onChange={setPriority} />
        {hasBootstrap && <BootstrapPortField id={`${id}-bootstrap`} value={bootstrapPort} onChange={setBootstrapPort} />}
        <div className="field form-submit">
          <button type="submit" className="btn btn-primary" disabled={!!problem}>
            Review and add…
          </button>
          {otherProblem && (
            <div className="field-error" data-testid="add-worker-problem">
              {otherProblem}
            </div>
          )}
        </div>
      </form>
      <p className="muted small">Transport overrides start on inherit; set them afterwards with Edit.</p>
    </Panel>
  );
}

/** The schema's objection to a worker field's typed value (typedNumber's: blank is '' unless the field may be left unset), naming field and value; null when it accepts it. */
function workerFieldProblem(key: 'bootstrap_port' | 'priority', value: number | string | undefined): string | null {
  return fieldProblem(WorkerSpecSchema.shape[key], key, value);
}

/**
 * A worker's priority, the same field in Add and Edit: typed by typedNumber's rule, so blank
 * is refused by the schema in both (never a silent 0), and `1e2` is text in both.
 */
function PriorityField({ id, value, onChange }: { id: string; value: number | string | undefined; onChange: (priority: number | string) => void }) {
  const [text, setText] = useTypedText(value);
  const problem = workerFieldProblem('priority', typedNumber(text));
  return (
    <div className="field">
      <label htmlFor={id}>Priority (0–100)</label>
      <input
        id={id}
        className={`input num ${problem ? 'invalid' : ''}`}
        inputMode="numeric"
        value={text}
        aria-invalid={problem ? true : undefined}
        aria-describedby={problem ? `${id}-hint` : undefined}
        onChange={(e) => {
          setText(e.target.value);
          onChange(typedNumber(e.target.value) ?? '');
        }}
      />
      {problem && (
        <div id={`${id}-hint`} className="field-error">
          {problem}
        </div>
      )}
    </div>
  );
}

/**
 * A prefill or encode worker's bootstrap server port. Every keystroke goes up as typed
 * (typedNumber): an invalid port stands in the draft, where the pending bar names it
 * and Review & apply stays off, or in the Add form's problem, never the last valid one.
 */
function BootstrapPortField({
  id,
  value,
  onChange,
}: {
  id: string;
  value: number | string | undefined;
  onChange: (port: number | string | undefined) => void;
}) {
  const [text, setText] = useTypedText(value, { optional: true });
  const err = workerFieldProblem('bootstrap_port', typedNumber(text, { optional: true }));
  return (
    <div className="field">
      <label htmlFor={id}>Bootstrap port</label>
      <input
        id={id}
        className={`input num ${err ? 'invalid' : ''}`}
        inputMode="numeric"
        value={text}
        placeholder={`${DEFAULT_BOOTSTRAP_PORT} (default)`}
        aria-invalid={err ? true : undefined}
        aria-describedby={`${id}-hint`}
        onChange={(e) => {
          setText(e.target.value);
          onChange(typedNumber(e.target.value, { optional: true }));
        }}
      />
      <div id={`${id}-hint`} className={err ? 'field-error' : 'field-hint'}>
        {err ?? "where decode takes the KV (prefill) or prefill the embeddings (encode), at the URL's host"}
      </div>
    </div>
  );
}

function parseLabels(text: string): { ok: true; labels: Record<string, string> } | { ok: false; message: string } {
  const labels: Record<string, string> = {};
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.trim();
    if (!line) continue;
    const eq = line.indexOf('=');
    if (eq <= 0) return { ok: false, message: `invalid value ${formatValue(line)} for labels (line ${i + 1}): expected name=value` };
    labels[line.slice(0, eq).trim()] = line.slice(eq + 1).trim();
  }
  return { ok: true, labels };
}

/** The labels a text stands for, or the text itself when it does not parse: it then stands in the draft, where the schema refuses it (Review & apply off), never the labels typed before it. */
const readLabels = (text: string): Record<string, string> | string => {
  const p = parseLabels(text);
  return p.ok ? p.labels : text;
};
const showLabels = (labels: Record<string, string> | string | undefined): string =>
  typeof labels === 'string'
    ? labels
    : Object.entries(labels ?? {})
        .map(([k, v]) => `${k}=${v}`)
        .join('\n');

export function WorkerEditor({ url, onClose }: { url: string; onClose: () => void }) {
  const id = useId();
  const view = useConfig((s) => s.view);
  const draft = useConfig((s) => s.draft);
  const resolved = useConfig((s) => s.resolved);
  const invalid = useConfig((s) => s.resolvedFor === 'invalid');
  const edit = useConfig((s) => s.edit);
  const worker = useWorkers((s) => s.workers.find((w) => w.url === url));
  const cfg = draft ?? view?.config;
  const spec = cfg?.workers.find((w) => w.url === url);
  // The labels field follows the draft like every field (Discard resets it): its text is the draft's labels, or the unparsed text the draft holds.
  const [labelText, setLabelText] = useDraftText(spec?.labels as Record<string, string> | string | undefined, showLabels, readLabels);
  const parsedLabels = parseLabels(labelText);
  const labelError = parsedLabels.ok ? fieldProblem(LabelsSchema, 'labels', parsedLabels.labels) : parsedLabels.message;
  if (!view || !spec)
    return (
      <Panel title={`Edit ${url}`}>
        <p className="muted">This worker is not in the configuration (removed in the draft?).</p>
      </Panel>
    );
  const r = resolutionFor(url, resolved, worker);
  const rm = r?.resolution.multimodal_tensor_transport;
  const rt = r?.resolution.multimodal_shm_min_bytes;
  const inhMode = rm && rt ? inheritedLayer(rm) : undefined;
  const inhThr = rm && rt ? inheritedLayer(rt) : undefined;

  return (
    <Panel
      title={
        <>
          Edit worker <code>{url}</code>
        </>
      }
      id="worker-editor"
      actions={
        <>
          <a className="btn btn-small" href={routeHref('precedence', { worker: url })}>
            Show ladder
          </a>
          <button type="button" className="btn btn-small btn-ghost" onClick={onClose}>
            Close
          </button>
        </>
      }
    >
      <p className="muted">
        Changes go into the draft and show in the ladder at once; nothing reaches the router before Review &amp; apply.
        {invalid && <> The draft has a problem (named in the bar below): what its next request would do shows once it is fixed.</>}
        {rm && rt && !invalid && (
          <>
            {' '}
            With the {draft ? 'draft' : 'applied config'}: mode <strong className="mono">{rm.value}</strong> from <Layer source={rm.source} />, threshold{' '}
            <strong className="num">{formatBytes(rt.value)}</strong> from <Layer source={rt.source} />.
          </>
        )}
      </p>
      {r && !invalid && (
        <div
          className={`editor-verdict ${r.decision.outcome === 'shm_then_inline' ? 'note note-warn' : ''}`}
          data-testid="editor-verdict"
          role={r.decision.outcome === 'shm_then_inline' ? 'alert' : undefined}
        >
          <span className="field-label">Its next request{draft ? ' with the draft' : ''}:</span>{' '}
          <VerdictText
            decision={r.decision}
            threshold={r.resolution.multimodal_shm_min_bytes.value}
            advice={r.decision.outcome === 'shm_then_inline' || r.decision.outcome === 'no_request'}
          />
        </div>
      )}
      <div className="grid grid-2">
        <ModeChoice
          name={`mode-${url}`}
          legend="Transport mode override"
          value={spec.multimodal_tensor_transport}
          inherit={
            inhMode
              ? `no override: ${String(inhMode.value ?? inhMode.raw)} from ${LAYER_LABEL[inhMode.layer]}`
              : 'no override: the router, env or default decides'
          }
          onChange={(m) => edit((d) => patchWorker(d, url, { multimodal_tensor_transport: m }))}
        />
        <ThresholdChoice
          label="SHM threshold override"
          value={spec.multimodal_shm_min_bytes}
          inherit={inhThr ? `no override: ${formatBytes(Number(inhThr.value ?? inhThr.raw))} from ${LAYER_LABEL[inhThr.layer]}` : 'no override'}
          onChange={(n) => edit((d) => patchWorker(d, url, { multimodal_shm_min_bytes: n }))}
        />
      </div>
      <div className="form-grid">
        <div className="field">
          <label htmlFor={`${id}-rt`}>Runtime</label>
          <select id={`${id}-rt`} className="select" value={spec.runtime} onChange={(e) => edit((d) => patchWorker(d, url, { runtime: e.target.value }))}>
            {RUNTIMES.map((x) => (
              <option key={x} value={x}>
                {runtimeChoice(x, worker?.runtime)}
              </option>
            ))}
          </select>
        </div>
        <div className="field">
          <label htmlFor={`${id}-type`}>Role</label>
          <select
            id={`${id}-type`}
            className="select"
            value={spec.worker_type}
            onChange={(e) =>
              edit((d) =>
                patchWorker(d, url, {
                  worker_type: e.target.value,
                  ...(hasBootstrapServer(e.target.value as WorkerSpec['worker_type']) ? {} : { bootstrap_port: undefined }),
                }),
              )
            }
          >
            {WORKER_TYPES.map((x) => (
              <option key={x} value={x}>
                {x}
              </option>
            ))}
          </select>
        </div>
        <PriorityField id={`${id}-prio`} value={spec.priority} onChange={(priority) => edit((d) => patchWorker(d, url, { priority }))} />
        {hasBootstrapServer(spec.worker_type) && (
          <BootstrapPortField
            id={`${id}-bootstrap`}
            value={spec.bootstrap_port}
            onChange={(port) => edit((d) => patchWorker(d, url, { bootstrap_port: port }))}
          />
        )}
        <div className="field span-2">
          <label htmlFor={`${id}-labels`}>Labels (one name=value per line)</label>
          <textarea
            id={`${id}-labels`}
            className={`input mono ${labelError ? 'invalid' : ''}`}
            rows={3}
            value={labelText}
            aria-invalid={labelError ? true : undefined}
            aria-describedby={`${id}-labels-hint`}
            onChange={(e) => {
              setLabelText(e.target.value);
              const labels = readLabels(e.target.value);
              edit((d) => patchWorker(d, url, { labels }));
            }}
          />
          <div id={`${id}-labels-hint`} className={labelError ? 'field-error' : 'field-hint'}>
            {labelError ?? 'shm_namespace_id set here overrides what the worker advertises.'}
          </div>
        </div>
      </div>
    </Panel>
  );
}
