// Doctor, per worker: the `auto` checklist (workers.diagnose) with pass, fail or not
// checked and the remedy of each failed step; a test tensor through the real pipeline
// (traffic.sendTestRequest) showing where each tensor went and why; and calibration
// (transport.calibrate) with its progress, the inline vs SHM latency by tensor size with
// the crossover marked, and the recommended threshold offered as a draft to review.
import { useCallback, useEffect, useId, useMemo, useState } from 'react';
import type uPlot from 'uplot';
import { MAX_CALIBRATION_SAMPLES, REASON_WORDS, type CalibrationResult } from '../../../core/console/contract.ts';
import { VerdictBadge, verdictClass } from '../components/Verdict.tsx';
import { cssVar, themedAxis, UChart } from '../components/Chart.tsx';
import { Badge, Empty, ErrorNote, LegTag, Panel, PathTag, Prose, ScreenHeader } from '../components/ui.tsx';
import { patchWorker } from '../lib/draft.ts';
import { splitAttempts } from '../lib/attempts.ts';
import { formatBytes, formatMs } from '../lib/format.ts';
import { FALLBACK_REASONS } from '../lib/vocab.ts';
import { useConfig } from '../stores/config.ts';
import { useDoctor } from '../stores/doctor.ts';
import { useUi } from '../stores/ui.ts';
import { useWorkers } from '../stores/workers.ts';
import { ResetLaneButton, ShmLaneNote } from '../components/ShmLane.tsx';

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
      {!d?.result && !d?.running && !d?.error && (
        <Empty title="Not checked yet">
          Run the checks: reachability, the worker's namespace token, same host and /dev/shm, writability, and a real file the worker must read.
        </Empty>
      )}
      {d?.running && !d.result && (
        <p className="muted" aria-live="polite">
          Checking (one small request goes through /dev/shm)…
        </p>
      )}
      {d?.result && (
        <>
          <ol className="chain" data-testid="checklist">
            {d.result.steps.map((s, i) => (
              <li key={s.id} className={`step step-${s.ok === null ? 'skip' : s.ok ? 'pass' : 'fail'}`} data-step={s.id} data-ok={String(s.ok)}>
                <span className="step-n" aria-hidden="true">
                  {i + 1}
                </span>
                <div>
                  <div className="step-title">
                    {s.label}{' '}
                    {s.ok === null ? <Badge tone="neutral">not checked</Badge> : s.ok ? <Badge tone="ok">pass</Badge> : <Badge tone="bad">fail</Badge>}
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
          <div className={verdictClass(d.result.verdict.outcome)} data-testid="diagnose-verdict" data-outcome={d.result.verdict.outcome}>
            <div>
              <span className="verdict-label">Next request</span>{' '}
              <VerdictBadge decision={d.result.verdict} threshold={worker?.resolution.multimodal_shm_min_bytes.value ?? 0} />{' '}
              <code>{d.result.verdict.reason}</code>
            </div>
            <div>{d.result.verdict.explanation}</div>
            {d.result.verdict.advice && (
              <div className="remedy">
                <span className="remedy-label">What to do:</span> <Prose text={d.result.verdict.advice} />
              </div>
            )}
          </div>
        </>
      )}
    </Panel>
  );
}

/** The reset of the shm_lane step: workers.resetShmLane (refused while checks fail), then the checklist again. */
function ResetLane({ url, stillBroken }: { url: string; stillBroken: boolean }) {
  const diagnose = useDoctor((s) => s.diagnose);
  return (
    <div className="step-action">
      <ResetLaneButton url={url} primary onReset={() => void diagnose(url)} />
      {!stillBroken && <span className="muted small">the Workers table shows it cleared meanwhile; check again</span>}
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
          <input
            id={`${id}-h`}
            className="input num input-small"
            type="number"
            min={16}
            max={4096}
            value={height}
            onChange={(e) => setHeight(e.target.value)}
          />
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
      <p className="muted small">
        A synthetic image goes through the real pipeline to this worker with the applied settings. It is marked as the console's own traffic.
      </p>
      {t?.error && <ErrorNote>{t.error}</ErrorNote>}
      {t?.result && (
        <div data-testid="test-result">
          <p>
            {t.result.status === 200 ? <Badge tone="ok">HTTP 200</Badge> : <Badge tone="bad">HTTP {t.result.status}</Badge>} revision{' '}
            <span className="num">{t.result.revision}</span> · <span className="num">{formatMs(t.result.ms)}</span> · request{' '}
            <code className="nowrap">{t.result.requestId ?? '—'}</code>
          </p>
          <div className="table-scroll" tabIndex={0} role="region" aria-label="Where each tensor went (scrollable)">
            <table className="table compact">
              <caption>Where each tensor went</caption>
              <thead>
                <tr>
                  <th scope="col">Tensor</th>
                  <th scope="col" className="r">
                    Size
                  </th>
                  <th scope="col">Path</th>
                  <th scope="col">Why</th>
                </tr>
              </thead>
              {splitAttempts(t.result.events).map((attempt, n, all) => {
                const retryDetail = all.length > 1 && !attempt.superseded ? attempt.events.find((e) => e.attempt !== undefined)?.detail : undefined;
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
                              {retryDetail && (
                                <>
                                  {' '}
                                  (<span className="mono wrap">{retryDetail}</span>)
                                </>
                              )}
                            </span>
                          )}
                        </th>
                      </tr>
                    )}
                    {attempt.events.map((e, i) => (
                      <tr key={i} data-tensor={e.tensor} data-path={e.path} data-leg={e.leg ?? 'regular'} data-worker={e.worker}>
                        <td>
                          <div className="mono">{e.tensor}</div>
                          <div className="mono small muted">
                            [{e.shape.join(',')}] {e.dtype}
                          </div>
                          {e.leg && e.leg !== 'regular' && (
                            <div className="small">
                              <LegTag leg={e.leg} /> <span className="mono muted">{e.worker === url ? 'this worker' : e.worker}</span>
                            </div>
                          )}
                        </td>
                        <td className="r num">{formatBytes(e.nbytes)}</td>
                        <td>
                          <PathTag path={e.path} />
                        </td>
                        <td className="small" title={e.detail}>
                          <span className={FALLBACK_REASONS.has(e.reason) ? 'reason-fallback' : ''}>{REASON_WORDS[e.reason]}</span>{' '}
                          <code className="small muted">{e.reason}</code>
                          {e.detail && e.detail !== retryDetail && <div className="muted wrap">{e.detail}</div>}
                        </td>
                      </tr>
                    ))}
                  </tbody>
                );
              })}
            </table>
          </div>
          <p className="small">
            <span className="muted">The worker answered:</span> <span className="mono wrap">{t.result.content}</span>
          </p>
        </div>
      )}
    </Panel>
  );
}

/** Draw each point's middle half (25th to 75th percentile) as a vertical bar in its series' colour. */
function spreadBars(points: CalibrationResult['points']) {
  return (u: uPlot) => {
    const ctx = u.ctx;
    ctx.save();
    ctx.lineWidth = 2 * devicePixelRatio;
    for (const [key, color, dx] of [
      ['inlineSpread', '--c-inline', -3],
      ['shmSpread', '--c-shm', 3],
    ] as const) {
      ctx.strokeStyle = cssVar(color);
      for (const pt of points) {
        const [lo, hi] = pt[key];
        if (!(lo > 0 && hi > 0)) continue;
        const x = u.valToPos(pt.nbytes, 'x', true) + dx * devicePixelRatio;
        const y0 = u.valToPos(lo, 'y', true);
        const y1 = u.valToPos(hi, 'y', true);
        ctx.beginPath();
        ctx.moveTo(x, y0);
        ctx.lineTo(x, y1);
        ctx.moveTo(x - 3 * devicePixelRatio, y0);
        ctx.lineTo(x + 3 * devicePixelRatio, y0);
        ctx.moveTo(x - 3 * devicePixelRatio, y1);
        ctx.lineTo(x + 3 * devicePixelRatio, y1);
        ctx.stroke();
      }
    }
    ctx.restore();
  };
}

function CalibrationChart({ result }: { result: CalibrationResult }) {
  const data = useMemo<uPlot.AlignedData>(
    () => [result.points.map((p) => p.nbytes), result.points.map((p) => p.inlineMs), result.points.map((p) => p.shmMs)],
    [result],
  );
  const crossover = result.crossoverBytes;
  const options = useCallback(
    (width: number): uPlot.Options => ({
      width,
      height: 220,
      cursor: { drag: { x: false, y: false } },
      scales: {
        x: { time: false, distr: 3, log: 2, range: (_u, min, max) => [min / 1.6, max * 1.6] },
        // The bars' ends too, not only the medians.
        y: {
          distr: 3,
          log: 10,
          range: () => [
            Math.min(...result.points.flatMap((p) => [p.inlineSpread[0], p.shmSpread[0]]).filter((v) => v > 0)) / 1.3,
            Math.max(...result.points.flatMap((p) => [p.inlineSpread[1], p.shmSpread[1]])) * 1.3,
          ],
        },
      },
      axes: [
        themedAxis({
          splits: (_u, _i, min, max) => Array.from({ length: 40 }, (_, k) => 4 ** k).filter((v) => v >= min && v <= max),
          values: (_u, vals) => vals.map((v) => formatBytes(v).replace('.00', '').replace('.0 ', ' ')),
        }),
        themedAxis({ size: 64, values: (_u, vals) => vals.map((v) => formatMs(v)) }),
      ],
      series: [
        { label: 'tensor', value: (_u, v) => (v === null ? '–' : formatBytes(v)) },
        {
          label: 'inline (median)',
          stroke: cssVar('--c-inline'),
          width: 2,
          points: { show: true, size: 6 },
          value: (_u, v) => (v === null ? '–' : formatMs(v)),
        },
        { label: 'SHM (median)', stroke: cssVar('--c-shm'), width: 2, points: { show: true, size: 6 }, value: (_u, v) => (v === null ? '–' : formatMs(v)) },
      ],
      hooks: {
        draw: [
          spreadBars(result.points),
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
    [crossover, result],
  );
  return (
    <UChart
      options={options}
      data={data}
      height={220}
      label={`Inline and SHM latency by tensor size, medians with the middle half of the samples as bars${crossover !== null ? `, crossover at ${formatBytes(crossover)}` : ', no clear crossover'}`}
    />
  );
}

const WINNER_WORDS = { shm: 'SHM', inline: 'inline', tie: 'within the noise' } as const;

function Spread({ median, spread }: { median: number; spread: readonly [number, number] }) {
  return (
    <>
      {formatMs(median)}{' '}
      <span className="muted small nowrap">
        ({formatMs(spread[0])}–{formatMs(spread[1])})
      </span>
    </>
  );
}

function Calibrate({ url }: { url: string }) {
  const id = useId();
  const c = useDoctor((s) => s.calibrations[url]);
  const calibrate = useDoctor((s) => s.calibrate);
  const planned = useDoctor((s) => s.plans[url]);
  const plan = planned && 'sizes' in planned ? planned : undefined;
  const refused = planned && 'refused' in planned ? planned.refused : undefined;
  const loadPlan = useDoctor((s) => s.loadPlan);
  const edit = useConfig((s) => s.edit);
  const navigate = useUi((s) => s.navigate);
  // Asked again when the worker's health changes: a refusal for a worker not yet healthy is not the answer once it is.
  const health = useWorkers((s) => s.workers.find((w) => w.url === url)?.health);
  useEffect(() => {
    void loadPlan(url);
  }, [url, health, loadPlan]);
  const [samples, setSamples] = useState<string | null>(null);
  const shown = samples ?? String(c?.result?.samplesPerPoint ?? plan?.defaultSamples ?? '');
  const n = Number(shown);
  const bad = !Number.isInteger(n) || n < 1 || n > MAX_CALIBRATION_SAMPLES;
  const p = c?.progress;
  const pct = p && p.total ? Math.round((p.done / p.total) * 100) : 0;
  const r = c?.result;
  const useRecommended = () => {
    if (!r?.recommendedMinBytes) return;
    edit((d) => patchWorker(d, url, { multimodal_shm_min_bytes: r.recommendedMinBytes! }));
    useUi.getState().toast({
      kind: 'info',
      title: 'Threshold added to the draft',
      body: `multimodal_shm_min_bytes = ${r.recommendedMinBytes.toLocaleString('en-US')} B for ${url}. Review and apply it from the bar above.`,
    });
    navigate('precedence', { worker: url });
  };
  const sizes = plan?.sizes ?? [];
  return (
    <Panel title="Calibrate the threshold" id="calibrate">
      <p className="muted" data-testid="calibration-plan">
        {sizes.length > 0 ? (
          <>
            Measures inline and SHM latency, interleaved, for {sizes.length} encoder tensor sizes from{' '}
            <span className="num">{formatBytes(sizes[0]!.nbytes)}</span> to <span className="num">{formatBytes(sizes.at(-1)!.nbytes)}</span> ({plan!.dtype},
            this worker's wire dtype) on this box, and finds where SHM starts to win by more than the noise. The gateway ships a fixed 64 KiB.
          </>
        ) : planned === undefined ? (
          'Reading the sizes this worker would be measured at…'
        ) : (
          'Measures inline and SHM latency by tensor size on this box and finds where SHM starts to win by more than the noise.'
        )}
      </p>
      {refused && (
        <p className="note note-info small" data-testid="calibration-refused">
          Cannot calibrate this worker: {refused}
        </p>
      )}
      <form
        className="form-row"
        onSubmit={(e) => {
          e.preventDefault();
          if (!bad) void calibrate(url, n);
        }}
      >
        <div className="field">
          <label htmlFor={`${id}-s`}>Samples per size</label>
          <input
            id={`${id}-s`}
            className="input num input-small"
            type="number"
            min={1}
            max={MAX_CALIBRATION_SAMPLES}
            value={shown}
            onChange={(e) => setSamples(e.target.value)}
          />
        </div>
        <div className="field form-submit">
          <button type="submit" className="btn btn-primary" disabled={bad || c?.running || refused !== undefined}>
            {c?.running ? 'Calibrating…' : r ? 'Calibrate again' : 'Calibrate'}
          </button>
        </div>
        {plan && (
          <div className="field form-note muted small">
            {plan.defaultSamples} by default: fewer give a noisier answer, and with fewer than {plan.minSamplesForWinner} no size can be told apart from the
            noise.
          </div>
        )}
      </form>
      {(c?.running || (p && !r)) && (
        <div className="progress-wrap">
          <div className="progress" role="progressbar" aria-label="Calibration progress" aria-valuemin={0} aria-valuemax={100} aria-valuenow={pct}>
            <div className="progress-fill" style={{ width: `${pct}%` }} />
          </div>
          <div className="small muted num" aria-live="polite">
            {p ? `${p.done} of ${p.total} requests · ${p.phase}` : 'starting…'}
          </div>
        </div>
      )}
      {c?.error && <ErrorNote>{c.error}</ErrorNote>}
      {r && (
        <div data-testid="calibration-result">
          <CalibrationChart result={r} />
          <div className="calib-summary">
            <div>
              <div className="stat-label">Crossover</div>
              <div className="stat-value num" data-testid="crossover">
                {r.crossoverBytes === null ? 'no clear crossover' : formatBytes(r.crossoverBytes)}
              </div>
            </div>
            <div>
              <div className="stat-label">Recommended threshold</div>
              <div className="stat-value num" data-testid="recommended">
                {r.recommendedMinBytes === null ? 'none' : `${formatBytes(r.recommendedMinBytes)}`}
              </div>
              {r.recommendedMinBytes !== null && <div className="small muted num">{r.recommendedMinBytes.toLocaleString('en-US')} bytes</div>}
            </div>
            <div>
              <div className="stat-label">Measured</div>
              <div className="small">
                {r.runtime}, {r.dtype}, {r.points.length} sizes from <span className="num">{formatBytes(r.points[0]!.nbytes)}</span> to{' '}
                <span className="num">{formatBytes(r.points.at(-1)!.nbytes)}</span>, {r.samplesPerPoint} sample{r.samplesPerPoint === 1 ? '' : 's'} per size and
                path
              </div>
            </div>
            <div className="calib-action">
              <button type="button" className="btn btn-primary" disabled={r.recommendedMinBytes === null} onClick={useRecommended}>
                Use recommended threshold for this worker…
              </button>
            </div>
          </div>
          <p className="small" data-testid="calibration-note">
            {r.note}
          </p>
          <div className="table-scroll" tabIndex={0} role="region" aria-label="Calibration points (scrollable)">
            <table className="table compact fit">
              <caption className="sr-only">Median time of each path by tensor size, with the middle half of the samples</caption>
              <thead>
                <tr>
                  <th scope="col" className="r">
                    Tensor
                  </th>
                  <th scope="col" className="r">
                    Image
                  </th>
                  <th scope="col" className="r">
                    Inline, median (middle half)
                  </th>
                  <th scope="col" className="r">
                    SHM, median (middle half)
                  </th>
                  <th scope="col">Faster</th>
                </tr>
              </thead>
              <tbody>
                {r.points.map((pt) => (
                  <tr key={pt.nbytes} data-winner={pt.winner}>
                    <td className="r num">{formatBytes(pt.nbytes)}</td>
                    <td className="r num">
                      {pt.width}×{pt.height}
                    </td>
                    <td className="r num">
                      <Spread median={pt.inlineMs} spread={pt.inlineSpread} />
                    </td>
                    <td className="r num">
                      <Spread median={pt.shmMs} spread={pt.shmSpread} />
                    </td>
                    <td title={`SHM faster in ${Math.round(pt.shmFasterShare * 100)}% of sample pairs`}>
                      {pt.winner === 'tie' ? <span className="muted">{WINNER_WORDS.tie}</span> : <PathTag path={pt.winner} />}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
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
                {workers.map((x) => (
                  <option key={x.url} value={x.url}>
                    {x.url}
                  </option>
                ))}
              </select>
            </div>
          )
        }
      />
      {!url || !w ? (
        <Empty title="No workers">Add a worker first; Doctor checks one worker at a time.</Empty>
      ) : (
        <>
          {w.shmLane && !laneInChecklist && (
            <ShmLaneNote url={w.url} lane={w.shmLane} advice={w.decision.advice} onReset={() => void useDoctor.getState().diagnose(w.url)} />
          )}
          <p className="muted">
            {w.runtime ?? w.spec.runtime} · {w.health} · mode <span className="mono">{w.resolution.multimodal_tensor_transport.value}</span> · threshold{' '}
            <span className="num">{formatBytes(w.resolution.multimodal_shm_min_bytes.value)}</span> · next request{' '}
            <VerdictBadge decision={w.decision} threshold={w.resolution.multimodal_shm_min_bytes.value} /> {REASON_WORDS[w.decision.reason]}
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
