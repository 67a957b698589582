// Requests: every chat request the router kept (the last 10,000), newest first, live. A
// virtualized list (only the rows in view are rendered; fixed row height) with filters by
// status, worker, leg, model and errors only; the selected request's waterfall below it: its
// own phases, then each leg (a regular worker's call, or an image's encode, the prefill, the
// decode) as a bar on one time axis, with when its request was sent, its first token, its
// worker and how it ended (docs/console.md, "Requests").
import { useVirtualizer } from '@tanstack/react-virtual';
import { memo, useEffect, useRef } from 'react';
import { LEGS, requestFailed, type RequestLegView, type RequestRow, type RequestSummaryView } from '../../../core/console/contract.ts';
import { Badge, ErrorNote, LegTag, Panel, ScreenHeader } from '../components/ui.tsx';
import { formatBytes, formatClock, formatInt, formatMs } from '../lib/format.ts';
import { useRequests, type RequestFilters } from '../stores/requests.ts';
import { useUi } from '../stores/ui.ts';

const ROW_HEIGHT = 28;
const TABLE_HEIGHT = 440;

const hostOf = (url: string) => url.replace(/^grpc:\/\//, '');

/** How a request ended, in a few words: "200", "failed 504". */
function StatusTag({ r }: { r: Pick<RequestRow, 'status' | 'error'> }) {
  if (!requestFailed(r)) return <span className="num">{r.status}</span>;
  return (
    <span className="tag-failed" data-testid="request-failed">
      failed {r.status}
    </span>
  );
}

/** The workers of a request's legs, each with its leg (a regular request: its one worker). */
function legsWords(r: RequestRow): string {
  const legs = r.legs ?? [];
  if (legs.length === 0) return r.worker ? hostOf(r.worker) : '–';
  if (legs.every((l) => l.leg === 'regular')) return hostOf(legs[0]!.worker);
  return legs.map((l) => `${l.leg}${l.image !== undefined ? ` ${l.image}` : ''} ${hostOf(l.worker)}`).join(' · ');
}

const Row = memo(function Row({
  r,
  index,
  start,
  selected,
  onSelect,
}: {
  r: RequestRow;
  index: number;
  start: number;
  selected: boolean;
  onSelect: (id: string) => void;
}) {
  const failed = requestFailed(r);
  return (
    <div
      role="row"
      aria-rowindex={index + 2}
      aria-selected={selected}
      className={`trow rrow ${failed ? 'trow-failed' : ''} ${selected ? 'trow-selected' : ''}`}
      style={{ transform: `translateY(${start}px)` }}
      onClick={() => onSelect(r.id)}
      data-request={r.id}
    >
      <span role="cell" className="num nowrap">
        <button
          type="button"
          className="linklike num"
          onClick={(ev) => {
            ev.stopPropagation();
            onSelect(r.id);
          }}
          aria-label={`Waterfall of ${r.id} at ${formatClock(r.time)}`}
        >
          {formatClock(r.time)}
        </button>
      </span>
      <span role="cell" className="mono ellipsis" title={r.id}>
        {r.source === 'console' && <span className="tag-console">console</span>}
        {r.id}
      </span>
      <span role="cell">
        <StatusTag r={r} />
      </span>
      <span role="cell" className="r num">
        {r.durationMs !== undefined ? formatMs(r.durationMs) : '–'}
      </span>
      <span role="cell" className="mono ellipsis" title={legsWords(r)}>
        {legsWords(r)}
      </span>
      <span role="cell" className="r num">
        {formatInt(r.tensorCount)}
        {r.cacheHits ? <span className="muted"> ({formatInt(r.cacheHits)} hit)</span> : null}
      </span>
      <span role="cell" className="ellipsis" title={r.error ?? r.legs?.find((l) => l.error)?.error ?? ''}>
        {r.error ?? (r.legs?.some((l) => l.error) ? <span className="muted">a leg failed: {r.legs.find((l) => l.error)!.error}</span> : '')}
      </span>
    </div>
  );
});

const COLUMNS = ['Time', 'Request', 'Status', 'Duration', 'Workers', 'Tensors', 'Error'];

function RequestTable({
  rows,
  kept,
  selected,
  onSelect,
}: {
  rows: readonly RequestRow[];
  kept: number;
  selected: string | null;
  onSelect: (id: string) => void;
}) {
  const scroller = useRef<HTMLDivElement>(null);
  const v = useVirtualizer({
    count: rows.length,
    getScrollElement: () => scroller.current,
    estimateSize: () => ROW_HEIGHT,
    overscan: 8,
    // The scroll body's height (app.css .tbody-scroll): the first render, before it is measured, has the rows in view.
    initialRect: { width: 0, height: TABLE_HEIGHT },
  });
  return (
    <div role="table" aria-label="Requests, newest first" aria-rowcount={rows.length + 1} className="ttable" data-testid="request-table">
      <div role="rowgroup" className="thead">
        <div role="row" aria-rowindex={1} className="trow rrow trow-head">
          {COLUMNS.map((c) => (
            <span key={c} role="columnheader" className={c === 'Duration' || c === 'Tensors' ? 'r' : ''}>
              {c}
            </span>
          ))}
        </div>
      </div>
      <div ref={scroller} role="rowgroup" className="tbody-scroll rbody-scroll" tabIndex={0} aria-label="Requests (scrollable)">
        {rows.length === 0 ? (
          <div role="row" className="tempty">
            <span role="cell">{kept === 0 ? 'No request yet. Send a chat request through the router.' : 'No request matches these filters.'}</span>
          </div>
        ) : (
          <div className="tbody" style={{ height: v.getTotalSize() }}>
            {v.getVirtualItems().map((item) => {
              const r = rows[item.index]!;
              return <Row key={r.id} r={r} index={item.index} start={item.start} selected={selected === r.id} onSelect={onSelect} />;
            })}
          </div>
        )}
      </div>
    </div>
  );
}

const pct = (ms: number, total: number) => `${Math.max(0, Math.min(100, (ms / total) * 100)).toFixed(3)}%`;

/** A leg's name as the waterfall labels it: "encode (image 1)", "decode, attempt 2". */
function legLabel(l: RequestLegView): string {
  return `${l.leg}${l.image !== undefined ? ` (image ${l.image})` : ''}${l.attempt ? `, attempt ${l.attempt}` : ''}`;
}

/** How a leg ended, in words. */
function legOutcome(l: RequestLegView): string {
  if (l.error) return `failed: ${l.error}`;
  if (l.stopped) return `stopped: ${l.stopped}`;
  return 'ok';
}

function LegBar({ l, total }: { l: RequestLegView; total: number }) {
  const end = l.durationMs;
  const sent = l.placeMs ?? 0;
  const first = l.firstTokenMs;
  const outcome = legOutcome(l);
  const timing = [
    `from ${formatMs(l.startMs)}`,
    `${formatMs(l.durationMs)} in all`,
    ...(l.placeMs !== undefined ? [`sent after ${formatMs(l.placeMs)}`] : []),
    ...(first !== undefined ? [`first token after ${formatMs(first)}`] : []),
  ].join(', ');
  return (
    <li className={`wf-row ${l.error ? 'wf-failed' : l.stopped ? 'wf-stopped' : ''}`} data-testid="waterfall-leg" data-leg={l.leg}>
      <div className="wf-label">
        <LegTag leg={l.leg} /> <span className="small">{legLabel(l).slice(l.leg.length)}</span>
      </div>
      <div className="wf-track" title={`${legLabel(l)} on ${l.worker}: ${timing}; ${outcome}`}>
        <div className="wf-bar" style={{ left: pct(l.startMs, total), width: pct(end, total) }}>
          {sent > 0 && <span className="wf-seg wf-place" style={{ width: pct(sent, end) }} />}
          {first !== undefined && <span className="wf-seg wf-wait" style={{ left: pct(sent, end), width: pct(first - sent, end) }} />}
          {first !== undefined && <span className="wf-seg wf-stream" style={{ left: pct(first, end), width: pct(end - first, end) }} />}
        </div>
      </div>
      <div className="wf-outcome small">
        <span className="mono" title={l.worker}>
          {hostOf(l.worker)}
        </span>{' '}
        · <span className="num">{timing}</span> ·{' '}
        <span className={l.error ? 'bad' : l.stopped ? 'muted' : undefined} data-testid="leg-outcome">
          {outcome}
        </span>
      </div>
    </li>
  );
}

/** The request's own phases and each leg on one time axis, from its arrival to its end. */
export function Waterfall({ r }: { r: RequestSummaryView }) {
  const legs = r.legs ?? [];
  const phases = r.phases ?? [];
  const total = Math.max(r.durationMs ?? 0, ...legs.map((l) => l.startMs + l.durationMs), ...phases.map((p) => p.startMs + p.durationMs), 0.001);
  return (
    <div className="waterfall" data-testid="waterfall">
      <ol className="wf-rows" aria-label={`Waterfall of ${r.id}: ${formatMs(total)}`}>
        <li className="wf-row" data-testid="waterfall-phases">
          <div className="wf-label small">router</div>
          <div className="wf-track">
            {phases.map((p) => (
              <span
                key={p.name}
                className={`wf-phase wf-phase-${p.name}`}
                style={{ left: pct(p.startMs, total), width: pct(p.durationMs, total) }}
                title={`${p.name}: ${formatMs(p.durationMs)} from ${formatMs(p.startMs)}`}
              />
            ))}
          </div>
          <div className="wf-outcome small">{phases.map((p) => `${p.name} ${formatMs(p.durationMs)}`).join(' · ') || 'no phase marked'}</div>
        </li>
        {legs.map((l, i) => (
          <LegBar key={i} l={l} total={total} />
        ))}
      </ol>
      <div className="wf-axis small muted" aria-hidden="true">
        <span>0</span>
        <span>{formatMs(total / 2)}</span>
        <span>{formatMs(total)}</span>
      </div>
      <p className="small muted wf-key">
        <span className="wf-swatch wf-place" /> placing its tensors <span className="wf-swatch wf-wait" /> waiting for the first token{' '}
        <span className="wf-swatch wf-stream" /> streaming <span className="wf-swatch wf-plain" /> a call without tokens (encode, prefill)
      </p>
    </div>
  );
}

const TENSORS_LISTED = 50;

/** The request's tensors as Traffic listed them: leg, worker, tensor, size, path. */
function TensorList({ r }: { r: RequestSummaryView }) {
  const tensors = r.tensors ?? [];
  return (
    <div className="small">
      <h3>Its tensors</h3>
      <ul className="tensor-list mono" data-testid="request-tensors">
        {tensors.slice(0, TENSORS_LISTED).map((t, i) => (
          <li key={i}>
            {t.leg && t.leg !== 'regular' ? `${t.leg} ` : ''}
            {hostOf(t.worker)} · {t.tensor} [{t.shape.join(',')}] {t.dtype} · {formatBytes(t.nbytes)} · {t.path === 'shm' ? 'SHM' : t.path}
            {t.cache ? ` · cache ${t.cache}` : ''}
            {t.attempt ? ` · attempt ${t.attempt}` : ''}
          </li>
        ))}
      </ul>
      {tensors.length > TENSORS_LISTED && <p className="muted">and {formatInt(tensors.length - TENSORS_LISTED)} more</p>}
    </div>
  );
}

function RequestDetails({ onClose }: { onClose: () => void }) {
  const id = useRequests((s) => s.selectedId);
  const r = useRequests((s) => s.detail);
  const detailError = useRequests((s) => s.detailError);
  if (!id) return null;
  return (
    <div className="event-details" data-testid="request-details" role="region" aria-label="The selected request">
      <div className="event-details-head">
        <strong className="mono">{id}</strong>
        <button type="button" className="btn btn-small btn-ghost" onClick={onClose}>
          Close
        </button>
      </div>
      {r === undefined && <p className="muted">Loading…</p>}
      {r === null &&
        (detailError ? <ErrorNote>{detailError}</ErrorNote> : <p className="muted">The router no longer keeps this request (it keeps the last 10,000).</p>)}
      {r && (
        <>
          <dl className="kv kv-wide">
            <div>
              <dt>Outcome</dt>
              <dd data-testid="request-outcome">
                <StatusTag r={r} /> {r.error && <span className="bad">{r.error}</span>}
                {r.errorCode && <span className="muted mono small"> ({r.errorCode})</span>}
              </dd>
            </div>
            <div>
              <dt>When</dt>
              <dd className="num">
                {formatClock(r.time)} · {r.durationMs !== undefined ? formatMs(r.durationMs) : '–'} · {r.model ?? 'model not known'} ·{' '}
                {r.source === 'console' ? "the console's own traffic" : 'a client of the API'}
              </dd>
            </div>
            <div>
              <dt>Tensors</dt>
              <dd className="num">
                {r.paths ? `${formatInt(r.paths.inline)} inline, ${formatInt(r.paths.shm)} SHM, ${formatInt(r.paths.remote)} remote` : '–'}
                {r.cacheHits ? ` · ${formatInt(r.cacheHits)} from the pixel cache` : ''}
              </dd>
            </div>
            {r.kvHandoff && (
              <div>
                <dt>KV handoff</dt>
                <dd className="small">{r.kvHandoff}</dd>
              </div>
            )}
          </dl>
          {(r.legs ?? []).length === 0 && <p className="muted">It reached no worker.</p>}
          <Waterfall r={r} />
          {r.tensors && r.tensors.length > 0 && <TensorList r={r} />}
        </>
      )}
    </div>
  );
}

export function RequestsScreen() {
  const rows = useRequests((s) => s.rows);
  const filters = useRequests((s) => s.filters);
  const setFilters = useRequests((s) => s.setFilters);
  const matched = useRequests((s) => s.matched);
  const kept = useRequests((s) => s.kept);
  const capacity = useRequests((s) => s.capacity);
  const workers = useRequests((s) => s.workers);
  const models = useRequests((s) => s.models);
  const error = useRequests((s) => s.error);
  const selectedId = useRequests((s) => s.selectedId);
  const routeId = useUi((s) => s.route.params.id);
  const navigate = useUi((s) => s.navigate);

  useEffect(() => {
    void useRequests.getState().load();
  }, []);
  useEffect(() => {
    void useRequests.getState().select(routeId ?? null);
  }, [routeId]);
  const onSelect = (id: string) => navigate('requests', { id });
  const failedShown = rows.reduce((n, r) => n + (requestFailed(r) ? 1 : 0), 0);

  return (
    <>
      <ScreenHeader
        title="Requests"
        lead="Every chat request the router kept, newest first: how it ended, its workers and tensors. Select one for its waterfall."
        actions={failedShown > 0 ? <Badge tone="bad">{formatInt(failedShown)} failed shown</Badge> : <Badge tone="ok">none failed shown</Badge>}
      />
      <Panel id="requests">
        <div className="filters" role="group" aria-label="Filter requests">
          <fieldset className="segmented">
            <legend className="sr-only">Status</legend>
            {(['all', 'ok', 'failed'] as Array<RequestFilters['status']>).map((s) => (
              <label key={s} className={filters.status === s ? 'on' : undefined}>
                <input
                  type="radio"
                  name="status-filter"
                  value={s}
                  checked={filters.status === s}
                  onChange={() => setFilters({ status: s })}
                  data-testid={`filter-status-${s}`}
                />
                {s === 'all' ? 'All' : s === 'ok' ? 'OK' : 'Failed'}
              </label>
            ))}
          </fieldset>
          <div className="field inline-field">
            <label htmlFor="r-worker">Worker</label>
            <select id="r-worker" className="select" value={filters.worker} onChange={(e) => setFilters({ worker: e.target.value })}>
              <option value="">all workers</option>
              {workers.map((w) => (
                <option key={w} value={w}>
                  {w}
                </option>
              ))}
            </select>
          </div>
          <div className="field inline-field">
            <label htmlFor="r-leg">Leg</label>
            <select id="r-leg" className="select" value={filters.leg} onChange={(e) => setFilters({ leg: e.target.value as RequestFilters['leg'] })}>
              <option value="">all legs</option>
              {LEGS.map((l) => (
                <option key={l} value={l}>
                  {l}
                </option>
              ))}
            </select>
          </div>
          <div className="field inline-field">
            <label htmlFor="r-model">Model</label>
            <select id="r-model" className="select" value={filters.model} onChange={(e) => setFilters({ model: e.target.value })}>
              <option value="">all models</option>
              {models.map((m) => (
                <option key={m} value={m}>
                  {m}
                </option>
              ))}
            </select>
          </div>
          <label className="check">
            <input type="checkbox" checked={filters.errorsOnly} onChange={(e) => setFilters({ errorsOnly: e.target.checked })} data-testid="filter-errors" />
            errors only
          </label>
        </div>
        {error && <ErrorNote>{error}</ErrorNote>}
        <div className="table-status" aria-live="off">
          <span className="num" data-testid="request-count">
            {formatInt(rows.length)}
          </span>{' '}
          shown of <span className="num">{formatInt(matched)}</span> matching · the router keeps <span className="num">{formatInt(kept)}</span>
          {capacity > 0 && <> (the last {formatInt(capacity)} at most)</>}
        </div>
        <RequestTable rows={rows} kept={kept} selected={selectedId} onSelect={onSelect} />
        <RequestDetails onClose={() => navigate('requests')} />
      </Panel>
    </>
  );
}
