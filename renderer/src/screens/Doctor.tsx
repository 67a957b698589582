// Doctor, per worker: the `auto` checklist (workers.diagnose) with pass, fail or not
// checked and the remedy of each failed step; a test tensor through the real pipeline
// (traffic.sendTestRequest) showing where each tensor went and why; and calibration
// (transport.calibrate) with its progress, the inline vs SHM latency by tensor size with
// the crossover marked, and the recommended threshold offered as a draft to review.
import { useCallback, useId, useMemo, useState } from 'react';
import type uPlot from 'uplot';
import type { CalibrationResult } from '../../../core/admin/contract.ts';
import { cssVar, themedAxis, UChart } from '../components/Chart.tsx';
import { Badge, Empty, ErrorNote, Panel, PathTag, Prose, ScreenHeader } from '../components/ui.tsx';
import { patchWorker } from '../lib/draft.ts';
import { splitAttempts } from '../lib/attempts.ts';
import { formatBytes, formatMs } from '../lib/format.ts';
import { FALLBACK_REASONS } from '../lib/vocab.ts';
import { describeError } from '../stores/client.ts';
import { useConfig } from '../stores/config.ts';
import { useDoctor } from '../stores/doctor.ts';
import { useUi } from '../stores/ui.ts';
import { resetShmLane, useWorkers } from '../stores/workers.ts';
import { ShmLaneNote } from './Workers.tsx';

function Checklist({ url }: { url: string }) {
  const d = useDoctor((s) => s.diagnoses[url]);
  const diagnose = useDoctor((s) => s.diagnose);
  const worker = useWorkers((s) => s.workers.find((w) => w.url === url));
  return (
    <Panel
      title="auto checklist"
      id="checklist"
      actions={
        <button type="button" className="btn btn-primary" onClick={() => void diagnose(url)} disabled={d?.running}>
          {d?.running ? 'Checking…' : d?.result ? 'Check again' : 'Run checks'}
        </button>
      }
    >
      {d?.error && <ErrorNote>{d.error}</ErrorNote>}
      {!d?.result && !d?.running && !d?.error && <Empty title="Not checked yet">Run the checks: reachability, the worker's namespace token, same host and /dev/shm, writability, and a real file the worker must read.</Empty>}
      {d?.running && !d.result && <p className="muted" aria-live="polite">Checking (one small request goes through /dev/shm)…</p>}
      {d?.result && (
        <>
          <ol className="chain" data-testid="checklist">
            {d.result.steps.map((s, i) => (
              <li key={s.id} className={`step step-${s.ok === null ? 'skip' : s.ok ? 'pass' : 'fail'}`} data-step={s.id} data-ok={String(s.ok)}>
                <span className="step-n" aria-hidden="true">{i + 1}</span>
                <div>
                  <div className="step-title">
                    {s.label} {s.ok === null ? <Badge tone="neutral">not checked</Badge> : s.ok ? <Badge tone="ok">pass</Badge> : <Badge tone="bad">fail</Badge>}
                  </div>
                  <div className="step-detail mono wrap">{s.detail}</div>
                  {s.remedy && (
                    <div className="remedy">
                      <span className="remedy-label">What to do:</span> <Prose text={s.remedy} />
                    </div>
                  )}
                  {s.id === 'shm_lane' && s.ok === false && <ResetLane url={url} stillBroken={worker?.shmLane !== null} />}
                </div>
              </li>
            ))}
          </ol>
          <div className={`verdict ${d.result.verdict.shmEnabled ? 'verdict-shm' : 'verdict-inline'}`} data-testid="diagnose-verdict">
            <div>
              <span className="verdict-label">Next request</span> {d.result.verdict.shmEnabled ? <Badge tone="ok">SHM</Badge> : <Badge tone="neutral">inline</Badge>} <code>{d.result.verdict.reason}</code>
            </div>
            <div>{d.result.verdict.explanation}</div>
            {d.result.verdict.advice && <div className="remedy"><span className="remedy-label">What to do:</span> <Prose text={d.result.verdict.advice} /></div>}
          </div>
        </>
      )}
    </Panel>
  );
}

/** The Reset button of the shm_lane step: workers.resetShmLane, then the checklist again. */
function ResetLane({ url, stillBroken }: { url: string; stillBroken: boolean }) {
  const diagnose = useDoctor((s) => s.diagnose);
  const [state, setState] = useState<{ kind: 'idle' | 'resetting' | 'done' } | { kind: 'failed'; error: string }>({ kind: 'idle' });
  return (
    <div className="step-action">
      <button
        type="button"
        className="btn btn-small btn-primary"
        disabled={state.kind === 'resetting'}
        onClick={async () => {
          setState({ kind: 'resetting' });
          try {
            await resetShmLane(url);
            setState({ kind: 'done' });
            await diagnose(url);
          } catch (err) {
            setState({ kind: 'failed', error: describeError(err) });
          }
        }}
      >
        {state.kind === 'resetting' ? 'Resetting…' : 'Reset the SHM lane'}
      </button>
      {state.kind === 'failed' && <span className="field-error">Reset failed: {state.error}</span>}
      {!stillBroken && state.kind === 'idle' && <span className="muted small">the Workers table shows it cleared meanwhile; check again</span>}
    </div>
  );
}

function TestTensor({ url }: { url: string }) {
  const id = useId();
  const t = useDoctor((s) => s.tests[url]);
  const send = useDoctor((s) => s.sendTest);
  const [width, setWidth] = useState('448');
  const [height, setHeight] = useState('448');
  const [format, setFormat] = useState<'png' | 'jpeg' | 'webp'>('png');
  const w = Number(width);
  const h = Number(height);
  const bad = !Number.isInteger(w) || !Number.isInteger(h) || w < 16 || h < 16 || w > 4096 || h > 4096;
  return (
    <Panel title="Send a test tensor" id="test">
      <form
        className="form-row"
        onSubmit={(e) => {
          e.preventDefault();
          if (!bad) void send(url, { width: w, height: h, format });
        }}
      >
        <div className="field">
          <label htmlFor={`${id}-w`}>Width (px)</label>
          <input id={`${id}-w`} className="input num input-small" type="number" min={16} max={4096} value={width} onChange={(e) => setWidth(e.target.value)} />
        </div>
        <div className="field">
          <label htmlFor={`${id}-h`}>Height (px)</label>
          <input id={`${id}-h`} className="input num input-small" type="number" min={16} max={4096} value={height} onChange={(e) => setHeight(e.target.value)} />
        </div>
        <div className="field">
          <label htmlFor={`${id}-f`}>Format</label>
          <select id={`${id}-f`} className="select" value={format} onChange={(e) => setFormat(e.target.value as typeof format)}>
            <option value="png">PNG</option>
            <option value="jpeg">JPEG</option>
            <option value="webp">WebP</option>
          </select>
        </div>
        <div className="field form-submit">
          <button type="submit" className="btn btn-primary" disabled={bad || t?.running}>
            {t?.running ? 'Sending…' : 'Send test tensor'}
          </button>
        </div>
      </form>
      {bad && <p className="field-error">width and height must be whole pixels from 16 to 4096</p>}
      <p className="muted small">A synthetic image goes through the real pipeline to this worker with the applied settings. It is marked as the console's own traffic.</p>
      {t?.error && <ErrorNote>{t.error}</ErrorNote>}
      {t?.result && (
        <div data-testid="test-result">
          <p>
            {t.result.status === 200 ? <Badge tone="ok">HTTP 200</Badge> : <Badge tone="bad">HTTP {t.result.status}</Badge>} revision <span className="num">{t.result.revision}</span> · <span className="num">{formatMs(t.result.ms)}</span> · request <code className="nowrap">{t.result.requestId ?? '—'}</code>
          </p>
          <div className="table-scroll" tabIndex={0} role="region" aria-label="Where each tensor went (scrollable)">
          <table className="table compact">
            <caption>Where each tensor went</caption>
            <thead>
              <tr>
                <th scope="col">Tensor</th>
                <th scope="col" className="r">Size</th>
                <th scope="col">Path</th>
                <th scope="col">Why</th>
              </tr>
            </thead>
            {splitAttempts(t.result.events).map((attempt, n, all) => {
              const retryDetail = all.length > 1 && !attempt.superseded ? attempt.events.find((e) => e.reason === 'auto_worker_read_failed')?.detail : undefined;
              return (
                <tbody key={n} data-attempt={attempt.superseded ? 'unread' : 'final'}>
                  {all.length > 1 && (
                    <tr className="attempt-head">
                      <th scope="rowgroup" colSpan={4}>
                        Attempt {n + 1}:{' '}
                        {attempt.superseded ? (
                          <span className="muted">written to /dev/shm, but the worker could not read it; the router sent the request again inline</span>
                        ) : (
                          <span className="muted">
                            inline, after the worker could not read the first
                            {retryDetail && <> (<span className="mono wrap">{retryDetail}</span>)</>}
                          </span>
                        )}
                      </th>
                    </tr>
                  )}
                  {attempt.events.map((e, i) => (
                    <tr key={i} data-tensor={e.tensor} data-path={e.path}>
                      <td>
                        <div className="mono">{e.tensor}</div>
                        <div className="mono small muted">[{e.shape.join(',')}] {e.dtype}</div>
                      </td>
                      <td className="r num">{formatBytes(e.nbytes)}</td>
                      <td><PathTag path={e.path} /></td>
                      <td className="small" title={e.detail}>
                        <span className={`mono ${FALLBACK_REASONS.has(e.reason) ? 'reason-fallback' : ''}`}>{e.reason}</span>
                        {e.detail && e.detail !== retryDetail && <div className="muted wrap">{e.detail}</div>}
                      </td>
                    </tr>
                  ))}
                </tbody>
              );
            })}
          </table>
          </div>
          <p className="small"><span className="muted">The worker answered:</span> <span className="mono wrap">{t.result.content}</span></p>
        </div>
      )}
    </Panel>
  );
}

function CalibrationChart({ result }: { result: CalibrationResult }) {
  const data = useMemo<uPlot.AlignedData>(() => [result.points.map((p) => p.nbytes), result.points.map((p) => p.inlineMs), result.points.map((p) => p.shmMs)], [result]);
  const crossover = result.crossoverBytes;
  const options = useCallback(
    (width: number): uPlot.Options => ({
      width,
      height: 220,
      cursor: { drag: { x: false, y: false } },
      scales: { x: { time: false, distr: 3, log: 2, range: (_u, min, max) => [min / 1.6, max * 1.6] }, y: { distr: 3, log: 10 } },
      axes: [themedAxis({ splits: (_u, _i, min, max) => Array.from({ length: 40 }, (_, k) => 4 ** k).filter((v) => v >= min && v <= max), values: (_u, vals) => vals.map((v) => formatBytes(v).replace('.00', '').replace('.0 ', ' ')) }), themedAxis({ size: 64, values: (_u, vals) => vals.map((v) => formatMs(v)) })],
      series: [
        { label: 'tensor', value: (_u, v) => (v === null ? '–' : formatBytes(v)) },
        { label: 'inline', stroke: cssVar('--c-inline'), width: 2, points: { show: true, size: 6 }, value: (_u, v) => (v === null ? '–' : formatMs(v)) },
        { label: 'SHM', stroke: cssVar('--c-shm'), width: 2, points: { show: true, size: 6 }, value: (_u, v) => (v === null ? '–' : formatMs(v)) },
      ],
      hooks: {
        draw: [
          (u) => {
            if (crossover === null) return;
            const x = u.valToPos(crossover, 'x', true);
            const ctx = u.ctx;
            ctx.save();
            ctx.strokeStyle = cssVar('--text');
            ctx.setLineDash([5, 4]);
            ctx.lineWidth = 2 * devicePixelRatio;
            ctx.beginPath();
            ctx.moveTo(x, u.bbox.top);
            ctx.lineTo(x, u.bbox.top + u.bbox.height);
            ctx.stroke();
            ctx.fillStyle = cssVar('--text');
            ctx.font = `${11 * devicePixelRatio}px system-ui, sans-serif`;
            const label = `crossover ${formatBytes(crossover)}`;
            const right = x + ctx.measureText(label).width + 8 * devicePixelRatio > u.bbox.left + u.bbox.width;
            ctx.textAlign = right ? 'right' : 'left';
            ctx.textBaseline = 'alphabetic';
            ctx.fillText(label, x + (right ? -4 : 4) * devicePixelRatio, u.bbox.top + 12 * devicePixelRatio);
            ctx.restore();
          },
        ],
      },
    }),
    [crossover],
  );
  return <UChart options={options} data={data} height={220} label={`Inline and SHM latency by tensor size${crossover !== null ? `, crossover at ${formatBytes(crossover)}` : ''}`} />;
}

function Calibrate({ url }: { url: string }) {
  const id = useId();
  const c = useDoctor((s) => s.calibrations[url]);
  const calibrate = useDoctor((s) => s.calibrate);
  const edit = useConfig((s) => s.edit);
  const navigate = useUi((s) => s.navigate);
  const [samples, setSamples] = useState(() => String(c?.result?.samplesPerPoint ?? 3));
  const n = Number(samples);
  const bad = !Number.isInteger(n) || n < 1 || n > 20;
  const p = c?.progress;
  const pct = p && p.total ? Math.round((p.done / p.total) * 100) : 0;
  const r = c?.result;
  const useRecommended = () => {
    if (!r?.recommendedMinBytes) return;
    edit((d) => patchWorker(d, url, { multimodal_shm_min_bytes: r.recommendedMinBytes! }));
    useUi.getState().toast({ kind: 'info', title: 'Threshold added to the draft', body: `multimodal_shm_min_bytes = ${r.recommendedMinBytes.toLocaleString('en-US')} B for ${url}. Review and apply it from the bar above.` });
    navigate('precedence', { worker: url });
  };
  return (
    <Panel title="Calibrate the threshold" id="calibrate">
      <p className="muted">
        Measures inline and SHM latency for encoder tensors from 16 KiB to 32 MiB on this box, interleaved, and finds where SHM starts to win. The gateway ships a fixed 64 KiB.
      </p>
      <form
        className="form-row"
        onSubmit={(e) => {
          e.preventDefault();
          if (!bad) void calibrate(url, n);
        }}
      >
        <div className="field">
          <label htmlFor={`${id}-s`}>Samples per size</label>
          <input id={`${id}-s`} className="input num input-small" type="number" min={1} max={20} value={samples} onChange={(e) => setSamples(e.target.value)} />
        </div>
        <div className="field form-submit">
          <button type="submit" className="btn btn-primary" disabled={bad || c?.running}>
            {c?.running ? 'Calibrating…' : r ? 'Calibrate again' : 'Calibrate'}
          </button>
        </div>
      </form>
      {(c?.running || (p && !r)) && (
        <div className="progress-wrap">
          <div className="progress" role="progressbar" aria-label="Calibration progress" aria-valuemin={0} aria-valuemax={100} aria-valuenow={pct}>
            <div className="progress-fill" style={{ width: `${pct}%` }} />
          </div>
          <div className="small muted num" aria-live="polite">{p ? `${p.done} of ${p.total} requests · ${p.phase}` : 'starting…'}</div>
        </div>
      )}
      {c?.error && <ErrorNote>{c.error}</ErrorNote>}
      {r && (
        <div data-testid="calibration-result">
          <CalibrationChart result={r} />
          <div className="calib-summary">
            <div>
              <div className="stat-label">Crossover</div>
              <div className="stat-value num">{r.crossoverBytes === null ? 'none measured' : formatBytes(r.crossoverBytes)}</div>
            </div>
            <div>
              <div className="stat-label">Recommended threshold</div>
              <div className="stat-value num" data-testid="recommended">{r.recommendedMinBytes === null ? '—' : `${formatBytes(r.recommendedMinBytes)}`}</div>
              {r.recommendedMinBytes !== null && <div className="small muted num">{r.recommendedMinBytes.toLocaleString('en-US')} bytes</div>}
            </div>
            <div>
              <div className="stat-label">Measured</div>
              <div className="small">{r.runtime}, {r.dtype}, {r.samplesPerPoint} sample{r.samplesPerPoint === 1 ? '' : 's'} per size</div>
            </div>
            <div className="calib-action">
              <button type="button" className="btn btn-primary" disabled={r.recommendedMinBytes === null} onClick={useRecommended}>
                Use recommended threshold for this worker…
              </button>
            </div>
          </div>
          <p className="small">{r.note}</p>
          <table className="table compact fit">
            <thead>
              <tr>
                <th scope="col" className="r">Tensor</th>
                <th scope="col" className="r">Image</th>
                <th scope="col" className="r">Inline (median)</th>
                <th scope="col" className="r">SHM (median)</th>
                <th scope="col">Faster</th>
              </tr>
            </thead>
            <tbody>
              {r.points.map((pt) => (
                <tr key={pt.nbytes}>
                  <td className="r num">{formatBytes(pt.nbytes)}</td>
                  <td className="r num">{pt.width}×{pt.height}</td>
                  <td className="r num">{formatMs(pt.inlineMs)}</td>
                  <td className="r num">{formatMs(pt.shmMs)}</td>
                  <td>{pt.shmMs < pt.inlineMs ? <PathTag path="shm" /> : <PathTag path="inline" />}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </Panel>
  );
}

export function DoctorScreen({ worker }: { worker: string | undefined }) {
  const workers = useWorkers((s) => s.workers);
  const navigate = useUi((s) => s.navigate);
  const url = worker && workers.some((w) => w.url === worker) ? worker : workers[0]?.url;
  const w = workers.find((x) => x.url === url);
  // The checklist's shm_lane step carries the reset once a diagnosis shows it; before that, the note does.
  const laneInChecklist = useDoctor((s) => (url ? (s.diagnoses[url]?.result?.steps.some((st) => st.id === 'shm_lane' && st.ok === false) ?? false) : false));
  return (
    <>
      <ScreenHeader
        title="Doctor"
        lead="Why does this worker get inline or SHM? Check each step of auto, send a real test tensor, and measure the threshold on this box."
        actions={
          workers.length > 0 && (
            <div className="field inline-field">
              <label htmlFor="doc-worker">Worker</label>
              <select id="doc-worker" className="select" value={url} onChange={(e) => navigate('doctor', { worker: e.target.value })}>
                {workers.map((x) => <option key={x.url} value={x.url}>{x.url}</option>)}
              </select>
            </div>
          )
        }
      />
      {!url || !w ? (
        <Empty title="No workers">Add a worker first; Doctor checks one worker at a time.</Empty>
      ) : (
        <>
          {w.shmLane && !laneInChecklist && <ShmLaneNote url={w.url} lane={w.shmLane} advice={w.decision.advice} onReset={() => void useDoctor.getState().diagnose(w.url)} />}
          <p className="muted">
            {w.runtime ?? w.spec.runtime} · {w.health} · mode <span className="mono">{w.resolution.multimodal_tensor_transport.value}</span> · threshold <span className="num">{formatBytes(w.resolution.multimodal_shm_min_bytes.value)}</span> · next request {w.decision.shmEnabled ? 'SHM' : 'inline'} (<code>{w.decision.reason}</code>)
          </p>
          <div className="grid grid-2">
            <Checklist url={url} />
            <TestTensor url={url} />
          </div>
          <Calibrate url={url} />
        </>
      )}
    </>
  );
}
