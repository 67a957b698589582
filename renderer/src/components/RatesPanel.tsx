// The Workers screen's rates: per worker (and leg under disaggregation) requests/s, error rate
// and p50/p99 latency over the last minute, 15 minutes or hour (metrics.rates), a row each,
// and three charts of the window's buckets (docs/console.md, "Rates and latency").
import { useEffect, useMemo } from 'react';
import type uPlot from 'uplot';
import { RATE_WINDOWS, type Rates, type RateSeries, type RateWindow } from '../../../core/console/contract.ts';
import { formatCountRate, formatInt, formatMs, formatPercent } from '../lib/format.ts';
import { refreshMs, useRates } from '../stores/rates.ts';
import { cssVar, themedAxis, timeAxis, UChart } from './Chart.tsx';
import { Empty, ErrorNote, LegTag, Panel } from './ui.tsx';

export const WINDOW_WORDS: Record<RateWindow, string> = { '1m': 'the last minute', '15m': 'the last 15 minutes', '1h': 'the last hour' };
const WINDOW_LABEL: Record<RateWindow, string> = { '1m': '1 min', '15m': '15 min', '1h': '1 h' };
/** One colour per series, in the table's order (theme variables where the theme has them). */
const PALETTE = ['--info', '--c-shm', '--c-inline', '--c-remote', '--bad', '--warn', '--ok', '--neutral'];

const seriesName = (s: RateSeries, showLeg: boolean) => `${s.worker.replace(/^grpc:\/\//, '')}${showLeg ? ` ${s.leg}` : ''}`;

type Kind = 'rate' | 'errors' | 'latency';
const KIND_FORMAT: Record<Kind, (v: number) => string> = { rate: formatCountRate, errors: formatPercent, latency: formatMs };

function chartOptions(kind: Kind, names: string[]) {
  const format = KIND_FORMAT[kind];
  return (width: number): uPlot.Options => ({
    width,
    height: 160,
    cursor: { drag: { x: false, y: false } },
    legend: { live: true },
    scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, kind === 'errors' ? 1 : Math.max(kind === 'rate' ? 1 : 10, max * 1.1)] } },
    axes: [timeAxis(), themedAxis({ size: 70, values: (_u, vals) => vals.map(format) })],
    series: [
      { label: 'time' },
      ...names.flatMap((name, i) => {
        const stroke = cssVar(PALETTE[i % PALETTE.length]!);
        const line = (label: string, dash?: number[]) => ({
          label,
          stroke,
          width: 2,
          ...(dash ? { dash } : {}),
          points: { show: false },
          spanGaps: false,
          value: (_u: uPlot, v: number | null) => (v === null ? '–' : format(v)),
        });
        return kind === 'latency' ? [line(`${name} p50`, [4, 4]), line(`${name} p99`)] : [line(name)];
      }),
    ],
  });
}

/** The window's buckets as uPlot columns: time, then per series its values (latency: p50 and p99). */
function chartData(rates: Rates, kind: Kind): uPlot.AlignedData {
  const first = rates.series[0];
  const x = (first?.points ?? []).map((p) => p.t / 1000);
  const seconds = rates.bucketMs / 1000;
  const columns: (number | null)[][] = [];
  for (const s of rates.series) {
    if (kind === 'rate') columns.push(s.points.map((p) => p.requests / seconds));
    else if (kind === 'errors') columns.push(s.points.map((p) => (p.requests ? p.errors / p.requests : null)));
    else
      columns.push(
        s.points.map((p) => p.p50Ms),
        s.points.map((p) => p.p99Ms),
      );
  }
  return [x, ...columns] as uPlot.AlignedData;
}

function RateChart({ rates, kind, names, label }: { rates: Rates; kind: Kind; names: string[]; label: string }) {
  const key = names.join('\n');
  // eslint-disable-next-line react-hooks/exhaustive-deps -- rebuilt when the series change, not for each new array of the same names
  const options = useMemo(() => chartOptions(kind, names), [kind, key]);
  const data = useMemo(() => chartData(rates, kind), [rates, kind]);
  return (
    <div className="rates-chart">
      <h3 className="small muted">{label}</h3>
      <UChart options={options} data={data} height={160} label={`${label} per worker over ${WINDOW_WORDS[rates.window]}`} />
    </div>
  );
}

function Latency({ ms, error }: { ms: number | null; error: number }) {
  if (ms === null) return <span title="no request of this window has its duration recorded">–</span>;
  return <span title={`within ±${Math.round(error * 100)} % (the latency histogram's resolution)`}>{formatMs(ms)}</span>;
}

export function RatesPanel() {
  const window = useRates((s) => s.window);
  const data = useRates((s) => s.data);
  const error = useRates((s) => s.error);
  useEffect(() => {
    const { load } = useRates.getState();
    void load();
    const timer = setInterval(() => void load(), refreshMs(window));
    return () => clearInterval(timer);
  }, [window]);

  const showLeg = data?.series.some((s) => s.leg !== 'regular') ?? false;
  const names = (data?.series ?? []).map((s) => seriesName(s, showLeg));
  const choice = (
    <fieldset className="segmented" data-testid="rates-window">
      <legend className="sr-only">Window</legend>
      {(Object.keys(RATE_WINDOWS) as RateWindow[]).map((w) => (
        <label key={w} className={w === window ? 'on' : undefined}>
          <input type="radio" name="rates-window" value={w} checked={w === window} onChange={() => useRates.getState().setWindow(w)} />
          {WINDOW_LABEL[w]}
        </label>
      ))}
    </fieldset>
  );

  return (
    <Panel id="rates" title={`Requests per worker over ${WINDOW_WORDS[window]}`} actions={choice}>
      {error && <ErrorNote>{error}</ErrorNote>}
      {!data ? (
        !error && <p className="muted small">Loading…</p>
      ) : data.series.length === 0 ? (
        <Empty title={`No requests to a worker in ${WINDOW_WORDS[window]}`}>
          Each request that reaches a worker is counted here, per worker and leg: the router&apos;s API&apos;s and the console&apos;s own (test requests,
          calibration).
        </Empty>
      ) : (
        <>
          <div className="table-scroll" tabIndex={0} role="region" aria-label="Requests per worker (scrollable)">
            <table className="table" data-testid="rates-table">
              <thead>
                <tr>
                  <th>Worker</th>
                  {showLeg && <th>Leg</th>}
                  <th className="num">Requests/s</th>
                  <th className="num">Errors</th>
                  <th className="num">p50</th>
                  <th className="num">p99</th>
                </tr>
              </thead>
              <tbody>
                {data.series.map((s) => (
                  <tr key={`${s.leg} ${s.worker}`}>
                    <td className="mono">{s.worker}</td>
                    {showLeg && (
                      <td>
                        <LegTag leg={s.leg} />
                      </td>
                    )}
                    <td className="num" title={`${formatInt(s.requests)} requests`}>
                      {formatCountRate(s.perSecond)}
                    </td>
                    <td className={`num ${s.errors ? 'field-error' : ''}`}>
                      {formatPercent(s.errorRate)} ({formatInt(s.errors)} of {formatInt(s.requests)})
                    </td>
                    <td className="num">
                      <Latency ms={s.p50Ms} error={data.percentileError} />
                    </td>
                    <td className="num">
                      <Latency ms={s.p99Ms} error={data.percentileError} />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          <div className="rates-charts">
            <RateChart rates={data} kind="rate" names={names} label="Requests/s" />
            <RateChart rates={data} kind="errors" names={names} label="Error rate" />
            <RateChart rates={data} kind="latency" names={names} label="Latency p50 (dashed) and p99" />
          </div>
          <p className="muted small">
            One point per {formatMs(data.bucketMs)} bucket. Latency is each worker call&apos;s duration, from its start to its last message or failure; p50 and
            p99 are within ±{Math.round(data.percentileError * 100)} %.
          </p>
        </>
      )}
    </Panel>
  );
}
