// Traffic: live bytes/s and tensors/s by path (uPlot), a histogram of recent tensor sizes
// with the threshold drawn on it and a what-if slider (how many tensors and bytes would
// change path at another threshold), and the virtualized event table with filters, pause
// and the dropped count. The console's own test traffic is marked and hidden by default; an
// image tensor the pixel cache answered or computed carries a `cache hit` / `cache miss` tag.
// Charts and histogram redraw at a few hertz; only the table follows every frame, and it
// renders only the rows in view (fixed row height, so nothing jumps while data streams).
import { useVirtualizer } from '@tanstack/react-virtual';
import { memo, useCallback, useEffect, useMemo, useRef, useState } from 'react';
import type uPlot from 'uplot';
import uPlotLib from 'uplot';
import {
  describeReason,
  REASON_WORDS,
  TENSOR_CACHE_ANSWERS,
  TENSOR_PATHS,
  type RequestFailure,
  type RequestSummaryView,
  type TensorEvent,
} from '../../../core/console/contract.ts';
import { client } from '../stores/client.ts';
import { NoPixelTensorsNote, VerdictBadge } from '../components/Verdict.tsx';
import { disaggregatedLeg, retriedRequests, retryKey } from '../lib/attempts.ts';
import { useOverview } from '../stores/overview.ts';
import { cssVar, themedAxis, timeAxis, UChart } from '../components/Chart.tsx';
import { Badge, LegTag, Panel, ScreenHeader } from '../components/ui.tsx';
import { formatBytes, formatClock, formatCountRate, formatInt, formatMicros, formatRate } from '../lib/format.ts';
import { perSecondSeries } from '../lib/series.ts';
import { useNowSecond } from '../lib/useNow.ts';
import { useThrottled } from '../lib/useThrottled.ts';
import { bytesToSlider, histogram, sliderToBytes, SLIDER_MAX, whatIf } from '../lib/whatif.ts';
import { FALLBACK_REASONS } from '../lib/vocab.ts';
import { filterRows, MAX_ROWS, useTraffic, type CacheFilter, type PathFilter } from '../stores/traffic.ts';
import { routeHref } from '../stores/ui.ts';
import { useWorkers } from '../stores/workers.ts';

const ROW_HEIGHT = 28;
const TABLE_HEIGHT = 440;
const PATH_COLOR: Record<string, string> = { inline: '--c-inline', shm: '--c-shm', remote: '--c-remote' };

function rateOptions(kind: 'bytes' | 'tensors') {
  return (width: number): uPlot.Options => ({
    width,
    height: 180,
    cursor: { drag: { x: false, y: false } },
    legend: { live: true },
    scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, Math.max(kind === 'bytes' ? 1024 : 1, max * 1.1)] } },
    axes: [timeAxis(), themedAxis({ size: 70, values: (_u, vals) => vals.map((v) => (kind === 'bytes' ? formatRate(v) : formatCountRate(v))) })],
    series: [
      { label: 'time' },
      ...(['inline', 'shm'] as const).map((p) => ({
        label: p === 'shm' ? 'SHM' : 'inline',
        stroke: cssVar(PATH_COLOR[p]!),
        fill: `${cssVar(PATH_COLOR[p]!)}22`,
        width: 2,
        points: { show: false },
        value: (_u: uPlot, v: number | null) => (v === null ? '–' : kind === 'bytes' ? formatRate(v) : formatCountRate(v)),
      })),
    ],
  });
}
const bytesOptions = rateOptions('bytes');
const tensorsOptions = rateOptions('tensors');

function RateCharts() {
  const seconds = useTraffic((s) => s.seconds);
  const throttled = useThrottled(seconds, 500);
  // The window ends at the last complete second of now, also when no data comes: after a burst
  // the chart moves on to show it (it froze at the burst's first second, drawing 0 B/s).
  const now = useNowSecond();
  const series = useMemo(() => perSecondSeries(throttled, 60, now), [throttled, now]);
  const bytes = useMemo<uPlot.AlignedData>(() => [series.seconds, series.bytes.inline, series.bytes.shm], [series]);
  const tensors = useMemo<uPlot.AlignedData>(() => [series.seconds, series.tensors.inline, series.tensors.shm], [series]);
  return (
    <div className="grid grid-2">
      <Panel title="Throughput by path (all sources)" id="chart-bytes">
        <UChart options={bytesOptions} data={bytes} height={180} label="Bytes per second through inline and SHM over the last minute" />
      </Panel>
      <Panel title="Tensors per second by path (all sources)" id="chart-tensors">
        <UChart options={tensorsOptions} data={tensors} height={180} label="Tensors per second through inline and SHM over the last minute" />
      </Panel>
    </div>
  );
}

function Histogram({ rows, threshold, thresholdLabel }: { rows: readonly TensorEvent[]; threshold: number; thresholdLabel: string }) {
  const [picked, setPicked] = useState<number | null>(null);
  const candidate = picked ?? threshold;
  const pos = bytesToSlider(candidate);
  const h = useMemo(() => histogram(rows), [rows]);
  const w = useMemo(() => whatIf(rows, candidate), [rows, candidate]);
  const lines = useRef({ threshold, candidate });
  lines.current = { threshold, candidate };
  const options = useCallback((width: number): uPlot.Options => {
    const bars = uPlotLib.paths.bars!;
    const xAt = (u: uPlot, bytes: number) => u.valToPos(bytes <= 1 ? 0 : Math.log2(bytes), 'x', true);
    return {
      width,
      height: 190,
      cursor: { drag: { x: false, y: false } },
      legend: { live: true },
      scales: { x: { time: false, range: [-0.5, 26.5] }, y: { range: (_u, _min, max) => [0, Math.max(1, max * 1.15)] } },
      // A label every second power of two where there is room, every fourth on a narrow chart.
      axes: [
        themedAxis({
          values: (_u, vals) =>
            vals.map((v) =>
              Number.isInteger(v)
                ? formatBytes(2 ** v)
                    .replace('.00', '')
                    .replace('.0 ', ' ')
                : '',
            ),
          splits: () => {
            const step = width < 760 ? 4 : 2;
            return Array.from({ length: Math.floor(26 / step) + 1 }, (_, i) => i * step);
          },
        }),
        themedAxis({ size: 50 }),
      ],
      series: [
        { label: 'size', value: (_u, v) => (v === null ? '–' : `${formatBytes(2 ** v)}–${formatBytes(2 ** (v + 1))}`) },
        { label: 'inline', fill: cssVar('--c-inline'), stroke: cssVar('--c-inline'), paths: bars({ size: [0.42, 40], align: -1 }), points: { show: false } },
        { label: 'SHM', fill: cssVar('--c-shm'), stroke: cssVar('--c-shm'), paths: bars({ size: [0.42, 40], align: 1 }), points: { show: false } },
      ],
      hooks: {
        draw: [
          (u) => {
            const ctx = u.ctx;
            const { top, height } = u.bbox;
            const drawLine = (bytes: number, color: string, dash: number[], text: string, dy = 12) => {
              const x = xAt(u, bytes);
              ctx.save();
              ctx.strokeStyle = color;
              ctx.setLineDash(dash);
              ctx.lineWidth = 2 * devicePixelRatio;
              ctx.beginPath();
              ctx.moveTo(x, top);
              ctx.lineTo(x, top + height);
              ctx.stroke();
              ctx.fillStyle = color;
              ctx.textAlign = 'left';
              ctx.textBaseline = 'alphabetic';
              ctx.font = `${11 * devicePixelRatio}px system-ui, sans-serif`;
              ctx.fillText(text, x + 4 * devicePixelRatio, top + dy * devicePixelRatio);
              ctx.restore();
            };
            drawLine(lines.current.threshold, cssVar('--text'), [], `threshold ${formatBytes(lines.current.threshold)}`);
            if (lines.current.candidate !== lines.current.threshold)
              drawLine(lines.current.candidate, cssVar('--accent'), [6, 4], `what-if ${formatBytes(lines.current.candidate)}`, 28);
          },
        ],
      },
    };
  }, []);
  // Redraw the lines when the slider moves without rebuilding the chart.
  // eslint-disable-next-line react-hooks/exhaustive-deps -- a new array when the slider moves (candidate, threshold) redraws the lines; uPlot reads them from its hooks
  const chartData = useMemo<uPlot.AlignedData>(() => [h.edges.map((_, i) => i), h.inline, h.shm], [h, candidate, threshold]);

  return (
    <Panel
      title="Recent tensor sizes"
      id="histogram"
      actions={
        <span className="muted small" data-testid="histogram-count">
          {formatInt(rows.length)} tensors: the table's rows · bucket {'='} power of two
        </span>
      }
    >
      <UChart
        options={options}
        data={chartData}
        height={190}
        label={`Histogram of recent tensor sizes by path, with the threshold ${formatBytes(threshold)} marked`}
      />
      <div className="whatif">
        <div className="field">
          <label htmlFor="whatif">
            What if the threshold were <strong className="num">{formatBytes(candidate)}</strong>?{' '}
            <span className="muted">
              (now {formatBytes(threshold)}, {thresholdLabel})
            </span>
          </label>
          <input
            id="whatif"
            type="range"
            min={0}
            max={SLIDER_MAX}
            value={pos}
            onChange={(e) => setPicked(sliderToBytes(Number(e.target.value)))}
            aria-valuetext={formatBytes(candidate)}
          />
        </div>
        <dl className="whatif-result" aria-live="polite" data-testid="whatif">
          <div>
            <dt>inline → SHM</dt>
            <dd>
              <span className="num">{formatInt(w.toShm.tensors)}</span> tensors, <span className="num">{formatBytes(w.toShm.bytes)}</span>
            </dd>
          </div>
          <div>
            <dt>SHM → inline</dt>
            <dd>
              <span className="num">{formatInt(w.toInline.tensors)}</span> tensors, <span className="num">{formatBytes(w.toInline.bytes)}</span>
            </dd>
          </div>
          <div>
            <dt>cannot move</dt>
            <dd>
              <span className="num">{formatInt(w.unaffected)}</span> <span className="muted">(their request is inline anyway)</span>
            </dd>
          </div>
        </dl>
        <button type="button" className="btn btn-small" onClick={() => setPicked(null)} disabled={candidate === threshold}>
          Reset to current
        </button>
      </div>
    </Panel>
  );
}

/** The table's columns; `secondary` ones leave the row (for the details below the table) when the table is narrow. */
const COLUMNS: ReadonlyArray<{ name: string; right?: boolean; secondary?: boolean }> = [
  { name: 'Time' },
  { name: 'Rev', right: true, secondary: true },
  { name: 'Request', secondary: true },
  { name: 'Worker' },
  { name: 'Tensor' },
  { name: 'Shape', secondary: true },
  { name: 'Dtype', secondary: true },
  { name: 'Size', right: true },
  { name: 'Path' },
  { name: 'Reason' },
  { name: 'Write', right: true, secondary: true },
];

/** What the pixel cache's answer for an image tensor means. */
const CACHE_WORDS: Record<NonNullable<TensorEvent['cache']>, string> = {
  hit: 'pixel cache hit: this image was preprocessed before, and its tensor came from the cache (no decoding, no preprocessing)',
  miss: 'pixel cache miss: preprocessed for this request, and kept for the next request with this image when there is room',
};

const eventKey = (e: TensorEvent) => `${e.requestId}|${disaggregatedLeg(e) ?? ''}|${e.tensor}|${e.time}|${e.attempt ?? 1}`;

/** Which sending of its request a row is: attempt 2 is the inline retry; attempt 1 of a retried request was written but not read. */
function attemptOf(e: TensorEvent, retried: ReadonlyMap<string, string>): { n: 1 | 2; of: 1 | 2 } {
  if (e.attempt !== undefined && e.attempt > 1) return { n: 2, of: 2 };
  return retried.has(retryKey(e)) ? { n: 1, of: 2 } : { n: 1, of: 1 };
}

function ReasonCell({ e, attempt, failure }: { e: TensorEvent; attempt: { n: 1 | 2; of: 1 | 2 }; failure: RequestFailure | undefined }) {
  // Of a first attempt the worker could not read, only the tensors in /dev/shm were written and not read.
  const words = attempt.of === 2 && attempt.n === 1 && e.path === 'shm' ? 'written, not read: sent again' : REASON_WORDS[e.reason];
  const title = `${e.reason}: ${describeReason(e.reason)}${e.detail ? ` (${e.detail})` : ''}`;
  return (
    <span role="cell" className={`ellipsis ${FALLBACK_REASONS.has(e.reason) || attempt.of === 2 ? 'reason-fallback' : ''}`} title={title}>
      {failure && (
        <span
          className="tag-failed"
          data-testid="request-failed"
          title={`its request failed: HTTP ${failure.status}${failure.error ? `, ${failure.error}` : ''}`}
        >
          failed {failure.status}
        </span>
      )}
      {attempt.of === 2 && (
        <span className="tag-attempt" data-attempt={attempt.n}>
          attempt {attempt.n}/2
        </span>
      )}
      {e.cache && (
        <span className="tag-cache" data-cache={e.cache} title={CACHE_WORDS[e.cache]}>
          cache {e.cache}
        </span>
      )}
      {words}
      {attempt.n === 2 && e.detail && <span className="muted"> · {e.detail}</span>}
    </span>
  );
}

const Row = memo(function Row({
  e,
  index,
  start,
  attempt,
  failure,
  selected,
  onSelect,
}: {
  e: TensorEvent;
  index: number;
  start: number;
  attempt: { n: 1 | 2; of: 1 | 2 };
  /** The request this tensor belongs to ended in failure. */
  failure: RequestFailure | undefined;
  selected: boolean;
  onSelect: (e: TensorEvent) => void;
}) {
  const leg = disaggregatedLeg(e);
  return (
    <div
      role="row"
      aria-rowindex={index + 2}
      aria-selected={selected}
      className={`trow ${e.source === 'console' ? 'trow-console' : ''} ${failure ? 'trow-failed' : ''} ${selected ? 'trow-selected' : ''}`}
      style={{ transform: `translateY(${start}px)` }}
      onClick={() => onSelect(e)}
      data-attempt={attempt.of === 2 ? attempt.n : undefined}
    >
      <span role="cell" className="num nowrap">
        {e.source === 'console' && (
          <span className="tag-console narrow-only" title="the console's own test traffic">
            C
          </span>
        )}
        <button
          type="button"
          className="linklike num"
          onClick={(ev) => {
            ev.stopPropagation();
            onSelect(e);
          }}
          aria-label={`Details of ${e.tensor} of ${e.requestId} at ${formatClock(e.time)}`}
        >
          {formatClock(e.time)}
        </button>
      </span>
      <span role="cell" className="r num col-secondary">
        {e.revision}
      </span>
      <span role="cell" className="mono ellipsis col-secondary" title={e.requestId}>
        {e.source === 'console' && <span className="tag-console">console</span>}
        <a
          className="linklike mono request-link"
          href={routeHref('requests', { id: e.requestId })}
          onClick={(ev) => ev.stopPropagation()}
          aria-label={`Request ${e.requestId} in Requests`}
        >
          {e.requestId}
        </a>
      </span>
      <span role="cell" className="mono cell-worker" title={leg ? `${leg} worker ${e.worker}` : e.worker}>
        {leg && <LegTag leg={leg} />}
        {/* Cut from the start when narrow: workers on one host differ by their port. */}
        <span className="ellipsis-start">
          <bdi>{e.worker.replace(/^grpc:\/\//, '')}</bdi>
        </span>
      </span>
      <span role="cell" className="mono ellipsis" title={e.tensor}>
        {e.tensor}
      </span>
      <span role="cell" className="mono ellipsis col-secondary">
        [{e.shape.join(',')}]
      </span>
      <span role="cell" className="mono col-secondary">
        {e.dtype}
      </span>
      <span role="cell" className="r num">
        {formatBytes(e.nbytes)}
      </span>
      <span role="cell" data-path={e.path}>
        <span className={`path path-${e.path}`}>{e.path === 'shm' ? 'SHM' : e.path}</span>
      </span>
      <ReasonCell e={e} attempt={attempt} failure={failure} />
      <span role="cell" className="r num col-secondary">
        {e.path === 'shm' ? formatMicros(e.writeMicros) : '–'}
      </span>
    </div>
  );
});

function EventTable({
  rows,
  total,
  retried,
  selected,
  onSelect,
}: {
  rows: readonly TensorEvent[];
  total: number;
  retried: ReadonlyMap<string, string>;
  selected: string | null;
  onSelect: (e: TensorEvent) => void;
}) {
  const scroller = useRef<HTMLDivElement>(null);
  const failed = useTraffic((s) => s.failed);
  const v = useVirtualizer({
    count: rows.length,
    getScrollElement: () => scroller.current,
    estimateSize: () => ROW_HEIGHT,
    overscan: 8,
    // The scroll body's height (app.css .tbody-scroll): the first render, before it is measured, has the rows in view.
    initialRect: { width: 0, height: TABLE_HEIGHT },
  });
  return (
    <div role="table" aria-label="Tensor events, newest first" aria-rowcount={rows.length + 1} className="ttable" data-testid="event-table">
      <div role="rowgroup" className="thead">
        <div role="row" aria-rowindex={1} className="trow trow-head">
          {COLUMNS.map((c) => (
            <span key={c.name} role="columnheader" className={`${c.right ? 'r' : ''} ${c.secondary ? 'col-secondary' : ''}`}>
              {c.name}
              {c.name === 'Write' && <span className="sr-only"> time (µs)</span>}
            </span>
          ))}
        </div>
      </div>
      <div ref={scroller} role="rowgroup" className="tbody-scroll" tabIndex={0} aria-label="Tensor events (scrollable)">
        {rows.length === 0 ? (
          <div role="row" className="tempty">
            <span role="cell">
              {total === 0
                ? 'No tensor traffic yet. Send a request through the router, or use Doctor → Send test tensor (tick “show console traffic” to see it here).'
                : 'No event matches these filters.'}
            </span>
          </div>
        ) : (
          <div className="tbody" style={{ height: v.getTotalSize() }}>
            {v.getVirtualItems().map((item) => {
              const e = rows[item.index]!;
              return (
                <Row
                  key={item.key}
                  e={e}
                  index={item.index}
                  start={item.start}
                  attempt={attemptOf(e, retried)}
                  failure={failed.get(e.requestId)}
                  selected={selected === eventKey(e)}
                  onSelect={onSelect}
                />
              );
            })}
          </div>
        )}
      </div>
    </div>
  );
}

/** Everything one event says, the columns a narrow table leaves out included, and its reason in words. */
/** What the tensor's request was sent with: the sampling its worker got (the model's defaults marked), and under vLLM PD its KV handoff. */
function RequestSent({ requestId }: { requestId: string }) {
  const [summary, setSummary] = useState<RequestSummaryView | null | undefined>(undefined);
  useEffect(() => {
    let live = true;
    setSummary(undefined);
    client()
      .call('traffic.request', { requestId })
      .then((s) => live && setSummary(s))
      // Whatever the failure, the row says the sampling is not known (null below).
      .catch(() => live && setSummary(null));
    return () => {
      live = false;
    };
  }, [requestId]);
  if (summary === undefined) return null;
  if (summary === null)
    return (
      <div>
        <dt>Sampling</dt>
        <dd className="muted">not known: the request is still running, or too old to be kept</dd>
      </div>
    );
  const s = summary.sampling;
  const fromModel = new Set(Array.isArray(s?.from_model_defaults) ? (s.from_model_defaults as string[]) : []);
  const shown = s ? Object.entries(s).filter(([k, v]) => k !== 'from_model_defaults' && v !== null && !(Array.isArray(v) && v.length === 0)) : [];
  return (
    <>
      <div>
        <dt>Request</dt>
        <dd className="num">
          HTTP {summary.status}
          {summary.error && <span className="small"> · {summary.error}</span>} ·{' '}
          <a className="linklike" href={routeHref('requests', { id: requestId })}>
            its legs and waterfall in Requests
          </a>
        </dd>
      </div>
      {s && (
        <div>
          <dt>Sampling sent</dt>
          <dd className="mono small wrap" data-testid="request-sampling">
            {shown.map(([k, v]) => `${k} ${JSON.stringify(v)}${fromModel.has(k) ? ' (model default)' : ''}`).join(', ')}
          </dd>
        </div>
      )}
      {summary.kvHandoff && (
        <div>
          <dt>KV handoff</dt>
          <dd className="small">{summary.kvHandoff}</dd>
        </div>
      )}
    </>
  );
}

function EventDetails({ e, retried, onClose }: { e: TensorEvent; retried: ReadonlyMap<string, string>; onClose: () => void }) {
  const attempt = attemptOf(e, retried);
  return (
    <div className="event-details" data-testid="event-details" role="region" aria-label="The selected tensor event">
      <div className="event-details-head">
        <strong className="mono">{e.tensor}</strong> of <span className="mono">{e.requestId}</span>
        <button type="button" className="btn btn-small btn-ghost" onClick={onClose}>
          Close
        </button>
      </div>
      <dl className="kv kv-wide">
        <div>
          <dt>When</dt>
          <dd className="num">
            {formatClock(e.time)} · revision {e.revision} · {e.source === 'console' ? "the console's own test traffic" : 'a client of the API'}
          </dd>
        </div>
        <div>
          <dt>Worker</dt>
          <dd className="mono">
            {e.worker} ({e.runtime})
            {disaggregatedLeg(e) && (
              <span>
                {' '}
                · the request's {e.leg} worker
                {e.room && (
                  <>
                    , bootstrap room <span className="mono">{e.room}</span>
                  </>
                )}
              </span>
            )}
          </dd>
        </div>
        <div>
          <dt>Tensor</dt>
          <dd className="mono">
            [{e.shape.join(', ')}] {e.dtype}, {formatBytes(e.nbytes)} ({e.nbytes.toLocaleString('en-US')} bytes)
          </dd>
        </div>
        <div>
          <dt>Went</dt>
          <dd>
            <span className={`path path-${e.path}`}>{e.path === 'shm' ? 'SHM' : e.path}</span>
            {e.path === 'shm' && (
              <>
                {' '}
                · {e.cache === 'hit' ? 'placed' : 'written'} in {formatMicros(e.writeMicros)}
              </>
            )}
          </dd>
        </div>
        <div>
          <dt>Why</dt>
          <dd>
            {describeReason(e.reason)} <code>{e.reason}</code>
            {e.detail && <div className="mono small wrap">{e.detail}</div>}
          </dd>
        </div>
        {e.cache && (
          <div>
            <dt>Pixel cache</dt>
            <dd data-testid="event-cache">
              {CACHE_WORDS[e.cache]}
              {e.cache === 'hit' &&
                e.path === 'shm' &&
                e.cachePlaced === 'link' &&
                '; over SHM, a hard link to the cached file under a new tensor name rather than a write of its bytes'}
              {e.cache === 'hit' &&
                e.path === 'shm' &&
                e.cachePlaced === 'copy' &&
                "; over SHM, a copy of the cached file of the request's own (the worker attaches its file read-write, or the cache is set to copy), made by the kernel: no preprocessing"}
            </dd>
          </div>
        )}
        <RequestSent requestId={e.requestId} />
        {attempt.of === 2 && (
          <div>
            <dt>Attempt</dt>
            <dd>
              {attempt.n === 1
                ? `1 of 2: written to /dev/shm, but the worker could not read it (${retried.get(retryKey(e)) || 'its error is on attempt 2'}); the router sent the request again inline.`
                : `2 of 2: the same tensor sent again inline, because the worker could not read attempt 1's /dev/shm file${e.detail ? ` (${e.detail})` : ''}.`}
            </dd>
          </div>
        )}
      </dl>
    </div>
  );
}

/** Each worker's verdict for its next request, in words, from the overview stream. */
function NextRequestStrip() {
  const verdicts = useOverview((s) => s.data?.verdicts);
  if (!verdicts || verdicts.length === 0) return null;
  return (
    <Panel title="Next request, per worker" id="traffic-verdicts">
      <ul className="verdict-strip" data-testid="traffic-verdicts">
        {verdicts.map((v) => (
          <li key={v.url} data-worker={v.url} data-outcome={v.decision.outcome}>
            <span className="mono">
              {v.role !== 'regular' && <LegTag leg={v.role} />}
              {v.url.replace(/^grpc:\/\//, '')}
            </span>{' '}
            <VerdictBadge decision={v.decision} threshold={v.minBytes} readsPixels={v.readsPixels} />{' '}
            <span className="small">
              {v.decision.explanation}
              {!v.readsPixels && <NoPixelTensorsNote />}
            </span>
          </li>
        ))}
      </ul>
    </Panel>
  );
}

export function TrafficScreen() {
  const rows = useTraffic((s) => s.rows);
  const filters = useTraffic((s) => s.filters);
  const setFilters = useTraffic((s) => s.setFilters);
  const paused = useTraffic((s) => s.paused);
  const setPaused = useTraffic((s) => s.setPaused);
  const dropped = useTraffic((s) => s.dropped);
  const skipped = useTraffic((s) => s.skipped);
  const workers = useWorkers((s) => s.workers);
  const filtered = useMemo(() => filterRows(rows, filters), [rows, filters]);
  // The histogram counts exactly the table's rows (every filter applies); the reason list counts what the other filters leave.
  const histogramRows = useThrottled(filtered, 500);
  const scoped = useThrottled(
    useMemo(() => (!filters.reason ? filtered : filterRows(rows, { ...filters, reason: '' })), [filtered, rows, filters]),
    500,
  );
  const retried = useMemo(() => retriedRequests(rows), [rows]);
  const [selected, setSelected] = useState<TensorEvent | null>(null);
  const consoleCount = useThrottled(
    useMemo(() => rows.reduce((n, e) => n + (e.source === 'console' ? 1 : 0), 0), [rows]),
    500,
  );
  const reasons = useMemo(() => {
    const counts = new Map<string, number>();
    for (const e of scoped) counts.set(e.reason, (counts.get(e.reason) ?? 0) + 1);
    if (filters.reason && !counts.has(filters.reason)) counts.set(filters.reason, 0);
    return [...counts].sort(([a], [b]) => a.localeCompare(b));
  }, [scoped, filters.reason]);
  // The legs of disaggregated serving seen in the rows (the filter shows once there are any).
  const legs = useMemo(() => {
    const seen = new Set<string>();
    for (const e of rows) if (disaggregatedLeg(e)) seen.add(e.leg!);
    if (seen.size > 0) seen.add('regular');
    if (filters.leg) seen.add(filters.leg);
    return [...seen].sort();
  }, [rows, filters.leg]);
  // The pixel cache's answers seen in the rows (the filter shows once there are any).
  const cacheSeen = useMemo(() => filters.cache !== 'all' || rows.some((e) => e.cache !== undefined), [rows, filters.cache]);
  const thresholdWorker = workers.find((w) => w.url === filters.worker) ?? workers[0];
  const threshold = thresholdWorker?.resolution.multimodal_shm_min_bytes.value ?? 65536;
  const thresholdLabel = thresholdWorker
    ? `${thresholdWorker.url.replace(/^grpc:\/\//, '')}, from ${thresholdWorker.resolution.multimodal_shm_min_bytes.source}`
    : 'default';

  return (
    <>
      <ScreenHeader
        title="Traffic"
        lead="Every tensor the router placed: which path it took and why. Charts count every source; the table and histogram follow the filters."
        actions={
          <>
            <span className="counter" data-testid="dropped" title="Events the server could not deliver to this page because it fell behind">
              {dropped > 0 ? <Badge tone="warn">{formatInt(dropped)} dropped</Badge> : <Badge tone="ok">0 dropped</Badge>}
            </span>
            <button type="button" className={`btn ${paused ? 'btn-primary' : ''}`} aria-pressed={paused} onClick={() => setPaused(!paused)}>
              {paused ? '▶ Resume' : '❚❚ Pause'}
            </button>
          </>
        }
      />
      <NextRequestStrip />
      <RateCharts />
      <Histogram rows={histogramRows} threshold={threshold} thresholdLabel={thresholdLabel} />
      <Panel id="events">
        <div className="filters" role="group" aria-label="Filter tensor events">
          <fieldset className="segmented">
            <legend className="sr-only">Path</legend>
            {(['all', ...TENSOR_PATHS] as PathFilter[]).map((p) => (
              <label key={p} className={filters.path === p ? 'on' : undefined}>
                <input
                  type="radio"
                  name="path-filter"
                  value={p}
                  checked={filters.path === p}
                  onChange={() => setFilters({ path: p })}
                  data-testid={`filter-path-${p}`}
                />
                {p === 'all' ? 'All paths' : p === 'shm' ? 'SHM' : p}
              </label>
            ))}
          </fieldset>
          <div className="field inline-field">
            <label htmlFor="f-worker">Worker</label>
            <select id="f-worker" className="select" value={filters.worker} onChange={(e) => setFilters({ worker: e.target.value })}>
              <option value="">all workers</option>
              {workers.map((w) => (
                <option key={w.url} value={w.url}>
                  {w.url}
                </option>
              ))}
            </select>
          </div>
          {legs.length > 0 && (
            <div className="field inline-field">
              <label htmlFor="f-leg">Leg</label>
              <select id="f-leg" className="select" value={filters.leg} onChange={(e) => setFilters({ leg: e.target.value })}>
                <option value="">all legs</option>
                {legs.map((l) => (
                  <option key={l} value={l}>
                    {l}
                  </option>
                ))}
              </select>
            </div>
          )}
          {cacheSeen && (
            <div className="field inline-field">
              <label htmlFor="f-cache">Pixel cache</label>
              <select id="f-cache" className="select" value={filters.cache} onChange={(e) => setFilters({ cache: e.target.value as CacheFilter })}>
                <option value="all">all tensors</option>
                {TENSOR_CACHE_ANSWERS.map((c) => (
                  <option key={c} value={c}>
                    cache {c}
                  </option>
                ))}
              </select>
            </div>
          )}
          <div className="field inline-field">
            <label htmlFor="f-reason">Reason</label>
            <select id="f-reason" className="select" value={filters.reason} onChange={(e) => setFilters({ reason: e.target.value })}>
              <option value="">all reasons</option>
              {reasons.map(([r, n]) => (
                <option key={r} value={r} title={describeReason(r as TensorEvent['reason'])}>
                  {REASON_WORDS[r as TensorEvent['reason']]} · {r} ({formatInt(n)})
                </option>
              ))}
            </select>
          </div>
          <div className="field inline-field">
            <label htmlFor="f-text">Request or tensor</label>
            <input
              id="f-text"
              className="input"
              type="search"
              value={filters.text}
              onChange={(e) => setFilters({ text: e.target.value })}
              placeholder="chatcmpl-…"
            />
          </div>
          <label className="check">
            <input type="checkbox" checked={filters.showConsole} onChange={(e) => setFilters({ showConsole: e.target.checked })} />
            show console traffic <span className="muted num">({formatInt(consoleCount)})</span>
          </label>
        </div>
        <div className="table-status" aria-live="off">
          <span className="num" data-testid="row-count">
            {formatInt(filtered.length)}
          </span>{' '}
          of <span className="num">{formatInt(rows.length)}</span> events kept (newest {formatInt(MAX_ROWS)} at most)
          {paused && (
            <>
              {' '}
              · <Badge tone="warn">paused</Badge> <span className="num">{formatInt(skipped)}</span> new events not shown; resume to catch up
            </>
          )}
        </div>
        <EventTable rows={filtered} total={rows.length} retried={retried} selected={selected ? eventKey(selected) : null} onSelect={setSelected} />
        {selected && <EventDetails e={selected} retried={retried} onClose={() => setSelected(null)} />}
      </Panel>
    </>
  );
}
