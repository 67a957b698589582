// Traffic: live bytes/s and tensors/s by path (uPlot), a histogram of recent tensor sizes
// with the threshold drawn on it and a what-if slider (how many tensors and bytes would
// change path at another threshold), and the virtualized event table with filters, pause
// and the dropped count. The console's own test traffic is marked and hidden by default.
// Charts and histogram redraw at a few hertz; only the table follows every frame, and it
// renders only the rows in view (fixed row height, so nothing jumps while data streams).
import { useVirtualizer } from '@tanstack/react-virtual';
import { memo, useCallback, useMemo, useRef, useState } from 'react';
import type uPlot from 'uplot';
import uPlotLib from 'uplot';
import { describeReason, TENSOR_PATHS, type TensorEvent } from '../../../core/admin/contract.ts';
import { cssVar, themedAxis, UChart } from '../components/Chart.tsx';
import { Badge, Panel, ScreenHeader } from '../components/ui.tsx';
import { formatBytes, formatClock, formatCountRate, formatInt, formatMicros, formatRate } from '../lib/format.ts';
import { perSecondSeries } from '../lib/series.ts';
import { useThrottled } from '../lib/useThrottled.ts';
import { bytesToSlider, histogram, sliderToBytes, SLIDER_MAX, whatIf } from '../lib/whatif.ts';
import { FALLBACK_REASONS } from '../lib/vocab.ts';
import { filterRows, MAX_ROWS, useTraffic, type PathFilter } from '../stores/traffic.ts';
import { useWorkers } from '../stores/workers.ts';

const ROW_HEIGHT = 28;
const PATH_COLOR: Record<string, string> = { inline: '--c-inline', shm: '--c-shm', remote: '--c-remote' };

function rateOptions(kind: 'bytes' | 'tensors') {
  return (width: number): uPlot.Options => ({
    width,
    height: 180,
    cursor: { drag: { x: false, y: false } },
    legend: { live: true },
    scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, Math.max(kind === 'bytes' ? 1024 : 1, max * 1.1)] } },
    axes: [themedAxis(), themedAxis({ size: 70, values: (_u, vals) => vals.map((v) => (kind === 'bytes' ? formatRate(v) : formatCountRate(v))) })],
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
  const series = useMemo(() => perSecondSeries(throttled, 60), [throttled]);
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
      axes: [themedAxis({ values: (_u, vals) => vals.map((v) => (Number.isInteger(v) && v % 2 === 0 ? formatBytes(2 ** v).replace('.00', '') : '')), splits: () => Array.from({ length: 14 }, (_, i) => i * 2) }), themedAxis({ size: 50 })],
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
            if (lines.current.candidate !== lines.current.threshold) drawLine(lines.current.candidate, cssVar('--accent'), [6, 4], `what-if ${formatBytes(lines.current.candidate)}`, 28);
          },
        ],
      },
    };
  }, []);
  // Redraw the lines when the slider moves without rebuilding the chart.
  // eslint-disable-next-line react-hooks/exhaustive-deps
  const chartData = useMemo<uPlot.AlignedData>(() => [h.edges.map((_, i) => i), h.inline, h.shm], [h, candidate, threshold]);

  return (
    <Panel title="Recent tensor sizes" id="histogram" actions={<span className="muted small">{formatInt(rows.length)} tensors shown in the table's scope · bucket {'='} power of two</span>}>
      <UChart options={options} data={chartData} height={190} label={`Histogram of recent tensor sizes by path, with the threshold ${formatBytes(threshold)} marked`} />
      <div className="whatif">
        <div className="field">
          <label htmlFor="whatif">What if the threshold were <strong className="num">{formatBytes(candidate)}</strong>? <span className="muted">(now {formatBytes(threshold)}, {thresholdLabel})</span></label>
          <input id="whatif" type="range" min={0} max={SLIDER_MAX} value={pos} onChange={(e) => setPicked(sliderToBytes(Number(e.target.value)))} aria-valuetext={formatBytes(candidate)} />
        </div>
        <dl className="whatif-result" aria-live="polite" data-testid="whatif">
          <div>
            <dt>inline → SHM</dt>
            <dd><span className="num">{formatInt(w.toShm.tensors)}</span> tensors, <span className="num">{formatBytes(w.toShm.bytes)}</span></dd>
          </div>
          <div>
            <dt>SHM → inline</dt>
            <dd><span className="num">{formatInt(w.toInline.tensors)}</span> tensors, <span className="num">{formatBytes(w.toInline.bytes)}</span></dd>
          </div>
          <div>
            <dt>cannot move</dt>
            <dd><span className="num">{formatInt(w.unaffected)}</span> <span className="muted">(their request is inline anyway)</span></dd>
          </div>
        </dl>
        <button type="button" className="btn btn-small" onClick={() => setPicked(null)} disabled={candidate === threshold}>Reset to current</button>
      </div>
    </Panel>
  );
}

const COLUMNS = ['Time', 'Rev', 'Request', 'Worker', 'Tensor', 'Shape', 'Dtype', 'Size', 'Path', 'Reason', 'Write'];

const Row = memo(function Row({ e, index, start }: { e: TensorEvent; index: number; start: number }) {
  return (
    <div role="row" aria-rowindex={index + 2} className={`trow ${e.source === 'console' ? 'trow-console' : ''}`} style={{ transform: `translateY(${start}px)` }}>
      <span role="cell" className="num">{formatClock(e.time)}</span>
      <span role="cell" className="r num">{e.revision}</span>
      <span role="cell" className="mono ellipsis" title={e.requestId}>
        {e.source === 'console' && <span className="tag-console">console</span>}
        {e.requestId}
      </span>
      <span role="cell" className="mono ellipsis" title={e.worker}>{e.worker.replace(/^grpc:\/\//, '')}</span>
      <span role="cell" className="mono ellipsis">{e.tensor}</span>
      <span role="cell" className="mono ellipsis">[{e.shape.join(',')}]</span>
      <span role="cell" className="mono">{e.dtype}</span>
      <span role="cell" className="r num">{formatBytes(e.nbytes)}</span>
      <span role="cell" data-path={e.path}><span className={`path path-${e.path}`}>{e.path === 'shm' ? 'SHM' : e.path}</span></span>
      <span role="cell" className={`mono ellipsis ${FALLBACK_REASONS.has(e.reason) ? 'reason-fallback' : ''}`} title={e.detail ? `${describeReason(e.reason)}: ${e.detail}` : describeReason(e.reason)}>{e.reason}</span>
      <span role="cell" className="r num">{e.path === 'shm' ? formatMicros(e.writeMicros) : '–'}</span>
    </div>
  );
});

function EventTable({ rows, total }: { rows: readonly TensorEvent[]; total: number }) {
  const scroller = useRef<HTMLDivElement>(null);
  const v = useVirtualizer({ count: rows.length, getScrollElement: () => scroller.current, estimateSize: () => ROW_HEIGHT, overscan: 8 });
  return (
    <div role="table" aria-label="Tensor events, newest first" aria-rowcount={rows.length + 1} className="ttable" data-testid="event-table">
      <div role="rowgroup" className="thead">
        <div role="row" aria-rowindex={1} className="trow trow-head">
          {COLUMNS.map((c) => (
            <span key={c} role="columnheader" className={c === 'Rev' || c === 'Size' || c === 'Write' ? 'r' : undefined}>
              {c}
              {c === 'Write' && <span className="sr-only"> time (µs)</span>}
            </span>
          ))}
        </div>
      </div>
      <div ref={scroller} role="rowgroup" className="tbody-scroll" tabIndex={0} aria-label="Tensor events (scrollable)">
        {rows.length === 0 ? (
          <div role="row" className="tempty">
            <span role="cell">{total === 0 ? 'No tensor traffic yet. Send a request through the router, or use Doctor → Send test tensor (tick “show console traffic” to see it here).' : 'No event matches these filters.'}</span>
          </div>
        ) : (
          <div className="tbody" style={{ height: v.getTotalSize() }}>
            {v.getVirtualItems().map((item) => (
              <Row key={item.key} e={rows[item.index]!} index={item.index} start={item.start} />
            ))}
          </div>
        )}
      </div>
    </div>
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
  const scoped = useThrottled(useMemo(() => (filters.path === 'all' && !filters.reason && !filters.text ? filtered : filterRows(rows, { ...filters, path: 'all', reason: '', text: '' })), [filtered, rows, filters]), 500);
  const consoleCount = useThrottled(useMemo(() => rows.reduce((n, e) => n + (e.source === 'console' ? 1 : 0), 0), [rows]), 500);
  const reasons = useMemo(() => {
    const counts = new Map<string, number>();
    for (const e of scoped) counts.set(e.reason, (counts.get(e.reason) ?? 0) + 1);
    if (filters.reason && !counts.has(filters.reason)) counts.set(filters.reason, 0);
    return [...counts].sort(([a], [b]) => a.localeCompare(b));
  }, [scoped, filters.reason]);
  const thresholdWorker = workers.find((w) => w.url === filters.worker) ?? workers[0];
  const threshold = thresholdWorker?.resolution.multimodal_shm_min_bytes.value ?? 65536;
  const thresholdLabel = thresholdWorker ? `${thresholdWorker.url.replace(/^grpc:\/\//, '')}, from ${thresholdWorker.resolution.multimodal_shm_min_bytes.source}` : 'default';

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
      <RateCharts />
      <Histogram rows={scoped} threshold={threshold} thresholdLabel={thresholdLabel} />
      <Panel id="events">
        <div className="filters" role="group" aria-label="Filter tensor events">
          <fieldset className="segmented">
            <legend className="sr-only">Path</legend>
            {(['all', ...TENSOR_PATHS] as PathFilter[]).map((p) => (
              <label key={p} className={filters.path === p ? 'on' : undefined}>
                <input type="radio" name="path-filter" value={p} checked={filters.path === p} onChange={() => setFilters({ path: p })} data-testid={`filter-path-${p}`} />
                {p === 'all' ? 'All paths' : p === 'shm' ? 'SHM' : p}
              </label>
            ))}
          </fieldset>
          <div className="field inline-field">
            <label htmlFor="f-worker">Worker</label>
            <select id="f-worker" className="select" value={filters.worker} onChange={(e) => setFilters({ worker: e.target.value })}>
              <option value="">all workers</option>
              {workers.map((w) => <option key={w.url} value={w.url}>{w.url}</option>)}
            </select>
          </div>
          <div className="field inline-field">
            <label htmlFor="f-reason">Reason</label>
            <select id="f-reason" className="select" value={filters.reason} onChange={(e) => setFilters({ reason: e.target.value })}>
              <option value="">all reasons</option>
              {reasons.map(([r, n]) => <option key={r} value={r} title={describeReason(r as TensorEvent['reason'])}>{r} ({formatInt(n)})</option>)}
            </select>
          </div>
          <div className="field inline-field">
            <label htmlFor="f-text">Request or tensor</label>
            <input id="f-text" className="input" type="search" value={filters.text} onChange={(e) => setFilters({ text: e.target.value })} placeholder="chatcmpl-…" />
          </div>
          <label className="check">
            <input type="checkbox" checked={filters.showConsole} onChange={(e) => setFilters({ showConsole: e.target.checked })} />
            show console traffic <span className="muted num">({formatInt(consoleCount)})</span>
          </label>
        </div>
        <div className="table-status" aria-live="off">
          <span className="num" data-testid="row-count">{formatInt(filtered.length)}</span> of <span className="num">{formatInt(rows.length)}</span> events kept (newest {formatInt(MAX_ROWS)} at most)
          {paused && <> · <Badge tone="warn">paused</Badge> <span className="num">{formatInt(skipped)}</span> new events not shown; resume to catch up</>}
        </div>
        <EventTable rows={filtered} total={rows.length} />
      </Panel>
    </>
  );
}

