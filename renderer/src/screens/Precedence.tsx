// Precedence: for one worker, the ladder of each transport knob — worker override, router
// config, environment (canonical variable, then the deprecated alias), built-in default —
// with the winning layer highlighted and every beaten value struck through next to where it
// was set (file:line, flag, env variable). It shows the draft when there is one (from
// config.resolve), so an edit made here or anywhere updates the ladder before apply. Then
// the SHM decision chain for the worker's next request: mode → /dev/shm writable → token
// match → per-tensor size against the threshold → verdict and reason (docs/transport.md).
import { useId, useMemo, useState } from 'react';
import { useTypedText } from '../lib/useTypedText.ts';
import { fieldProblem, ShmMinBytesSchema, type TensorEvent } from '../../../core/console/contract.ts';
import { VerdictBadge, verdictClass } from '../components/Verdict.tsx';
import { Badge, Breakable, Empty, Panel, Prose, ScreenHeader } from '../components/ui.tsx';
import { patchWorker, setRouterField, typedNumber } from '../lib/draft.ts';
import { formatBytes, parseByteInput } from '../lib/format.ts';
import { lastRequestTensors } from '../lib/last-request.ts';
import { KNOB_LABEL, LAYER_LABEL, TOKEN_WORDS, TRANSPORT_MODES, type Mode } from '../lib/vocab.ts';
import { useConfig, type Resolution } from '../stores/config.ts';
import { useOverview } from '../stores/overview.ts';
import { useTraffic } from '../stores/traffic.ts';
import { useUi } from '../stores/ui.ts';
import { useWorkers } from '../stores/workers.ts';

type Knob = 'multimodal_tensor_transport' | 'multimodal_shm_min_bytes';

function show(knob: Knob, v: unknown): string {
  if (v === null || v === undefined) return '—';
  if (knob === 'multimodal_shm_min_bytes' && typeof v === 'number') return `${v.toLocaleString('en-US')} B (${formatBytes(v)})`;
  return typeof v === 'string' ? JSON.stringify(v) : String(v);
}

const STATE_WORD: Record<string, { tone: 'ok' | 'neutral' | 'bad' | 'warn'; word: string }> = {
  won: { tone: 'ok', word: 'wins' },
  beaten: { tone: 'neutral', word: 'beaten' },
  unset: { tone: 'neutral', word: 'unset' },
  blank: { tone: 'neutral', word: 'blank (= unset)' },
  invalid: { tone: 'bad', word: 'invalid, ignored' },
  not_consulted: { tone: 'neutral', word: 'not consulted' },
};

function Ladder({ knob, resolution, url, editable }: { knob: Knob; resolution: Resolution['resolution']; url: string; editable: boolean }) {
  const r = resolution[knob];
  const view = useConfig((s) => s.view);
  const draft = useConfig((s) => s.draft);
  const edit = useConfig((s) => s.edit);
  const cfg = draft ?? view?.config;
  const spec = cfg?.workers.find((w) => w.url === url);
  return (
    <Panel
      title={
        <>
          {KNOB_LABEL[knob]}: <span className="mono">{show(knob, r.value)}</span> <span className="muted">from {LAYER_LABEL[r.source]}</span>
        </>
      }
      id={`ladder-${knob}`}
    >
      <ol className="ladder" aria-label={`${knob} precedence, highest first`} data-testid={`ladder-${knob}`}>
        {r.layers.map((l) => {
          const st = STATE_WORD[l.state] ?? { tone: 'neutral' as const, word: l.state };
          const valueShown =
            l.raw === null ? (
              <span className="muted">not set</span>
            ) : l.state === 'beaten' || l.state === 'invalid' || l.state === 'not_consulted' ? (
              <del>{show(knob, l.raw)}</del>
            ) : (
              <strong>{show(knob, l.value ?? l.raw)}</strong>
            );
          return (
            <li key={l.layer} className={`rung rung-${l.state}`} data-layer={l.layer} data-state={l.state}>
              <div className="rung-name">{LAYER_LABEL[l.layer]}</div>
              <div className="rung-value mono">{valueShown}</div>
              <div className="rung-state">
                <Badge tone={st.tone}>{st.word}</Badge>
              </div>
              <div className="rung-meta small">
                {l.layer !== 'default' && (
                  <span className="mono muted rung-key">
                    <Breakable text={l.name} />
                  </span>
                )}
                <span className="rung-origin">
                  {l.origin ? (
                    <>
                      set at{' '}
                      <span className="mono" title={l.origin}>
                        <Breakable text={l.origin} />
                      </span>
                    </>
                  ) : l.raw !== null && (l.layer === 'env' || l.layer === 'env_legacy') ? (
                    <>set in the router's environment</>
                  ) : null}
                </span>
              </div>
              {editable && cfg && (l.layer === 'worker' || l.layer === 'router') && (
                <div className="rung-edit">
                  <span className="small muted">edit in draft:</span>
                  {knob === 'multimodal_tensor_transport' ? (
                    <select
                      className="select select-small"
                      aria-label={`${l.layer === 'worker' ? 'worker override' : 'router'} ${knob}`}
                      value={(l.layer === 'worker' ? spec?.multimodal_tensor_transport : cfg.multimodal_tensor_transport) ?? ''}
                      onChange={(e) => {
                        const m = (e.target.value || undefined) as Mode | undefined;
                        edit((d) =>
                          l.layer === 'worker' ? patchWorker(d, url, { multimodal_tensor_transport: m }) : setRouterField(d, 'multimodal_tensor_transport', m),
                        );
                      }}
                    >
                      <option value="">inherit (unset)</option>
                      {TRANSPORT_MODES.map((m) => (
                        <option key={m} value={m}>
                          {m}
                        </option>
                      ))}
                    </select>
                  ) : (
                    <ThresholdQuickEdit
                      label={`${l.layer === 'worker' ? 'worker override' : 'router'} ${knob}`}
                      value={l.layer === 'worker' ? spec?.multimodal_shm_min_bytes : cfg.multimodal_shm_min_bytes}
                      onChange={(n) =>
                        edit((d) =>
                          l.layer === 'worker' ? patchWorker(d, url, { multimodal_shm_min_bytes: n }) : setRouterField(d, 'multimodal_shm_min_bytes', n),
                        )
                      }
                    />
                  )}
                </div>
              )}
            </li>
          );
        })}
      </ol>
      {r.warnings.map((w) => (
        <p key={w} className="note note-warn small">
          <span aria-hidden="true">! </span>
          {w}
        </p>
      ))}
    </Panel>
  );
}

function ThresholdQuickEdit({
  label,
  value,
  onChange,
}: {
  label: string;
  value: number | string | undefined;
  onChange: (n: number | string | undefined) => void;
}) {
  // In bytes: what is typed goes into the draft as typed (digits a number, anything else the
  // text, named there by the schema), and the field follows Discard.
  const [text, setText] = useTypedText(value, { optional: true });
  const id = useId();
  const err = fieldProblem(ShmMinBytesSchema.optional(), 'multimodal_shm_min_bytes', typedNumber(text, { optional: true }));
  return (
    <span className="quick">
      <input
        className={`input input-small num ${err ? 'invalid' : ''}`}
        aria-label={`${label} in bytes (empty: inherit)`}
        aria-describedby={err ? id : undefined}
        placeholder="inherit"
        value={text}
        onChange={(e) => {
          setText(e.target.value);
          onChange(typedNumber(e.target.value, { optional: true }));
        }}
      />
      {err && (
        <span id={id} className="field-error small">
          {err}
        </span>
      )}
    </span>
  );
}

type StepState = 'pass' | 'fail' | 'skip' | 'warn' | 'unknown';
const STEP_BADGE: Record<StepState, { tone: 'ok' | 'bad' | 'neutral' | 'warn'; word: string }> = {
  pass: { tone: 'ok', word: 'pass' },
  fail: { tone: 'bad', word: 'stops here' },
  skip: { tone: 'neutral', word: 'not needed' },
  warn: { tone: 'warn', word: 'will fail' },
  unknown: { tone: 'neutral', word: 'not known yet' },
};
function Step({ n, title, state, children }: { n: number; title: string; state: StepState; children: React.ReactNode }) {
  return (
    <li className={`step step-${state}`} data-state={state}>
      <span className="step-n" aria-hidden="true">
        {n}
      </span>
      <div>
        <div className="step-title">
          {title} <Badge tone={STEP_BADGE[state].tone}>{STEP_BADGE[state].word}</Badge>
        </div>
        <div className="step-detail">{children}</div>
      </div>
    </li>
  );
}

function DecisionChain({ r, url }: { r: Resolution; url: string }) {
  const overview = useOverview((s) => s.data);
  const worker = useWorkers((s) => s.workers.find((w) => w.url === url));
  const rows = useTraffic((s) => s.rows);
  const mode = r.resolution.multimodal_tensor_transport.value;
  const threshold = r.resolution.multimodal_shm_min_bytes.value;
  const writable = overview?.host.shmWritable ?? null;
  const [probe, setProbe] = useState('');
  const sample: Array<Pick<TensorEvent, 'tensor' | 'nbytes'>> = useMemo(() => lastRequestTensors(rows, url), [rows, url]);
  const probeBytes = parseByteInput(probe, 'B');

  const modeStops = mode === 'inline' || mode === 'rdma';
  // A protocol without a /dev/shm handle (its engine says so) stops the chain whatever follows.
  const protocolStops = !modeStops && r.decision.reason === 'runtime_inline_only';
  const writeStops = !modeStops && !protocolStops && writable === false;
  // In mode shm the token is not required, but a token that proves another /dev/shm means the attempt will fail.
  const doomed = r.decision.outcome === 'shm_then_inline';
  const tokenStep: StepState =
    modeStops || protocolStops || writeStops
      ? 'skip'
      : mode === 'shm'
        ? doomed
          ? 'warn'
          : 'skip'
        : r.decision.reason === 'auto_tokens_equal' || (r.decision.outcome === 'no_request' && worker?.tokenMatch === 'equal')
          ? 'pass'
          : 'fail';
  const enabled = r.decision.shmEnabled;

  return (
    <Panel title="SHM decision for the next request" id="chain">
      <ol className="chain" data-testid="decision-chain">
        <Step n={1} title={`Mode: ${mode}`} state={modeStops ? 'fail' : 'pass'}>
          {mode === 'inline'
            ? 'inline never uses /dev/shm.'
            : mode === 'rdma'
              ? 'rdma has no lane yet: tensors travel inline.'
              : mode === 'shm'
                ? 'shm uses /dev/shm whenever the router can write there.'
                : 'auto uses /dev/shm only for a worker that shares it.'}
        </Step>
        <Step
          n={2}
          title="The worker's protocol has a /dev/shm lane"
          state={modeStops ? 'skip' : protocolStops ? 'fail' : worker?.runtime ? 'pass' : 'unknown'}
        >
          {protocolStops
            ? r.decision.explanation
            : worker?.runtime
              ? `${worker.runtime}: a /dev/shm handle per tensor`
              : 'the worker has not been discovered yet (its runtime decides)'}
        </Step>
        <Step n={3} title="/dev/shm writable by the router" state={modeStops || protocolStops ? 'skip' : writable ? 'pass' : 'fail'}>
          {protocolStops
            ? 'not reached: the protocol has no /dev/shm lane.'
            : writable === null
              ? 'unknown'
              : writable
                ? `yes (${overview?.host.shmDir})`
                : `no: ${overview?.host.shmError ?? 'the probe file could not be created'}`}
        </Step>
        <Step n={4} title={mode === 'shm' ? 'Namespace token (not required in mode shm)' : 'Namespace token matches'} state={tokenStep}>
          {protocolStops ? (
            'not reached: the protocol has no /dev/shm lane.'
          ) : mode === 'shm' && doomed ? (
            <>
              mode shm does not wait for a match, but this worker advertises another /dev/shm:{' '}
              {worker && <Badge tone={TOKEN_WORDS[worker.tokenMatch].tone}>{TOKEN_WORDS[worker.tokenMatch].word}</Badge>} router{' '}
              <code>{overview?.host.token ?? 'none'}</code>, worker <code>{worker?.token ?? 'none'}</code>. Its read will fail and the request will be sent
              again inline.
            </>
          ) : mode === 'shm' ? (
            'mode shm does not check it: you assert the worker shares /dev/shm' +
            (worker?.tokenMatch === 'equal'
              ? ' (and its token matches).'
              : worker?.tokenMatch === 'missing'
                ? ' (it advertises no token, so nothing contradicts you).'
                : '.')
          ) : worker ? (
            <>
              <Badge tone={TOKEN_WORDS[worker.tokenMatch].tone}>{TOKEN_WORDS[worker.tokenMatch].word}</Badge> router{' '}
              <code>{overview?.host.token ?? 'none'}</code>, worker <code>{worker.token ?? 'none'}</code>
            </>
          ) : (
            'the worker has not been discovered yet'
          )}
        </Step>
        <Step
          n={5}
          title={`Per tensor: size ≥ ${threshold.toLocaleString('en-US')} B (${formatBytes(threshold)})`}
          state={r.decision.outcome === 'shm' ? 'pass' : doomed ? 'warn' : 'skip'}
        >
          {enabled ? (
            <>
              <div className="probe">
                <label htmlFor="probe-size">Try a tensor size (bytes)</label>
                <input id="probe-size" className="input input-small num" value={probe} onChange={(e) => setProbe(e.target.value)} placeholder="e.g. 2408448" />
                {probe &&
                  (probeBytes.ok ? (
                    <span>{probeBytes.bytes >= threshold ? <Badge tone="ok">SHM</Badge> : <Badge tone="neutral">inline: below_threshold</Badge>}</span>
                  ) : (
                    <span className="field-error">{probeBytes.message}</span>
                  ))}
              </div>
              {sample.length > 0 ? (
                <table className="table compact fit">
                  <caption>The last request to this worker</caption>
                  <thead>
                    <tr>
                      <th scope="col">Tensor</th>
                      <th scope="col" className="r">
                        Size
                      </th>
                      <th scope="col">Would go</th>
                    </tr>
                  </thead>
                  <tbody>
                    {sample.map((e, i) => (
                      <tr key={i}>
                        <td className="mono">{e.tensor}</td>
                        <td className="r num">{formatBytes(e.nbytes)}</td>
                        <td>{e.nbytes >= threshold ? <Badge tone="ok">SHM</Badge> : <Badge tone="neutral">inline (below)</Badge>}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              ) : (
                <p className="muted small">No traffic to this worker yet: Doctor → Send test tensor shows real sizes.</p>
              )}
            </>
          ) : r.decision.outcome === 'no_request' ? (
            'not reached: no request reaches this worker now (see the verdict).'
          ) : (
            'not reached: the request goes inline whatever the size.'
          )}
        </Step>
      </ol>
      <div className={verdictClass(r.decision.outcome)} data-testid="verdict" data-outcome={r.decision.outcome}>
        <div>
          <span className="verdict-label">Verdict</span> <VerdictBadge decision={r.decision} threshold={threshold} /> <code>{r.decision.reason}</code>
        </div>
        <div>{r.decision.explanation}</div>
        {r.decision.advice && (
          <div className="remedy">
            <span className="remedy-label">What to do:</span> <Prose text={r.decision.advice} />
          </div>
        )}
      </div>
    </Panel>
  );
}

export function PrecedenceScreen({ worker }: { worker: string | undefined }) {
  const view = useConfig((s) => s.view);
  const resolved = useConfig((s) => s.resolved);
  const resolvedFor = useConfig((s) => s.resolvedFor);
  const draft = useConfig((s) => s.draft);
  const navigate = useUi((s) => s.navigate);
  const urls = (draft ?? view?.config)?.workers.map((w) => w.url) ?? [];
  const url = worker && urls.includes(worker) ? worker : urls[0];
  const r = resolved.find((x) => x.url === url);
  return (
    <>
      <ScreenHeader
        title="Precedence"
        lead="Which layer decides each setting for a worker, highest first. Edit the worker or router layer here: the ladder follows the draft before you apply it."
        actions={
          urls.length > 0 && (
            <div className="field inline-field">
              <label htmlFor="prec-worker">Worker</label>
              <select id="prec-worker" className="select" value={url} onChange={(e) => navigate('precedence', { worker: e.target.value })}>
                {urls.map((u) => (
                  <option key={u} value={u}>
                    {u}
                  </option>
                ))}
              </select>
            </div>
          )
        }
      />
      {!url ? (
        <Empty title="No workers configured">Add a worker on the Workers screen; its ladder shows here.</Empty>
      ) : !r ? (
        <p className="muted">Resolving…</p>
      ) : (
        <>
          <p className={`source-note ${resolvedFor === 'draft' ? 'draft' : ''} ${resolvedFor === 'invalid' ? 'note-warn' : ''}`} data-testid="ladder-source">
            {resolvedFor === 'invalid' ? (
              <>
                <Badge tone="warn">draft has a problem</Badge> named in the bar below: this ladder is from before it, and the router still runs revision{' '}
                {view?.revision}.
              </>
            ) : resolvedFor === 'draft' ? (
              <>
                <Badge tone="info">draft</Badge> showing your unapplied draft; the router still runs revision {view?.revision}.
              </>
            ) : (
              <>
                <Badge tone="ok">applied</Badge> showing revision {view?.revision}, what the router runs now.
              </>
            )}
            {r.resolution.overrides_from !== r.url && (
              <>
                {' '}
                Overrides come from <code>{r.resolution.overrides_from}</code> (disaggregation).
              </>
            )}
          </p>
          <div className="grid grid-2">
            <Ladder knob="multimodal_tensor_transport" resolution={r.resolution} url={url} editable />
            <Ladder knob="multimodal_shm_min_bytes" resolution={r.resolution} url={url} editable />
          </div>
          {r.resolution.notes.map((n) => (
            <p key={n} className="note small">
              {n}
            </p>
          ))}
          <DecisionChain r={r} url={url} />
        </>
      )}
    </>
  );
}
