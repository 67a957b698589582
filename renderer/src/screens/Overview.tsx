// Overview: is this box ready to move tensors through /dev/shm, who serves, what flows now,
// what the pixel cache holds, and what needs the operator's attention (each warning with its remedy).
import { useEffect, useMemo } from 'react';
import { restartChangeText, type Overview } from '../../../core/console/contract.ts';
import { NoPixelTensorsNote, VerdictBadge } from '../components/Verdict.tsx';
import { DriftPanel } from '../components/DriftPanel.tsx';
import { PixelCachePanel } from '../components/PixelCachePanel.tsx';
import { Sparkline } from '../components/Sparkline.tsx';
import { Badge, Bytes, CopyButton, Empty, ErrorNote, LegTag, Panel, Prose, Rate, ScreenHeader, Stat } from '../components/ui.tsx';
import { formatBytes, formatCountRate, formatInt } from '../lib/format.ts';
import { perSecondSeries, recentRate } from '../lib/series.ts';
import { useNowSecond } from '../lib/useNow.ts';
import { HEALTH_TONE } from '../lib/vocab.ts';
import { warningTone, warningWord } from '../lib/vocab.ts';
import { useOverview } from '../stores/overview.ts';
import { useTraffic } from '../stores/traffic.ts';
import { routeHref, useUi } from '../stores/ui.ts';

/**
 * Bytes of our files in /dev/shm that workers have not read yet, against
 * multimodal_shm_max_outstanding_bytes (beyond it tensors go inline: shm_budget_exceeded).
 */
function OutstandingGauge({ bytes, max }: { bytes: number | undefined; max: number | null | undefined }) {
  if (bytes === undefined) return null;
  const share = max ? Math.min(1, bytes / max) : null;
  const tone = share === null ? '' : share >= 0.9 ? 'meter-bad' : share >= 0.6 ? 'meter-warn' : '';
  return (
    <div className="gauge" data-testid="outstanding">
      <div className="gauge-line">
        <span className="field-label">In flight</span> <span className="num">{formatBytes(bytes)}</span>
        <span className="muted"> of {max === null || max === undefined ? 'no limit' : <span className="num">{formatBytes(max)}</span>}</span>
      </div>
      {share !== null && (
        <div
          className={`meter ${tone}`}
          role="meter"
          aria-label="Our unread files in /dev/shm against multimodal_shm_max_outstanding_bytes"
          aria-valuemin={0}
          aria-valuemax={100}
          aria-valuenow={Math.round(share * 100)}
          aria-valuetext={`${formatBytes(bytes)} of ${formatBytes(max!)}`}
        >
          <div className="meter-fill" style={{ width: `${Math.max(0.5, share * 100)}%` }} />
        </div>
      )}
      <div
        className="muted small"
        title="Bytes of this router's files in /dev/shm that no worker has read yet. At multimodal_shm_max_outstanding_bytes, tensors go inline (shm_budget_exceeded) until workers catch up."
      >
        unread by workers; at the limit tensors go inline
      </div>
    </div>
  );
}

/** Every worker's verdict for its next request, with the reason in words (the backend's decision, as Workers and Precedence show it). */
function NextRequests({ verdicts }: { verdicts: Overview['verdicts'] }) {
  return (
    <Panel
      title="Next request, per worker"
      id="verdicts"
      actions={
        <a className="btn btn-small" href={routeHref('workers')}>
          Open workers
        </a>
      }
    >
      {verdicts.length === 0 ? (
        <Empty title="No workers configured">Add one on the Workers screen.</Empty>
      ) : (
        <div className="table-scroll" tabIndex={0} role="region" aria-label="Next request per worker (scrollable)">
          <table className="table verdicts" data-testid="verdicts">
            <thead>
              <tr>
                <th scope="col">Worker</th>
                <th scope="col">Health</th>
                <th scope="col">Its next request</th>
                <th scope="col">Why</th>
              </tr>
            </thead>
            <tbody>
              {verdicts.map((v) => (
                <tr key={v.url} data-worker={v.url} data-outcome={v.decision.outcome} data-reason={v.decision.reason}>
                  <td>
                    <div className="mono" title={v.url}>
                      {v.url.replace(/^grpc:\/\//, '')}
                    </div>
                    <div className="muted small">
                      {v.role !== 'regular' && <LegTag leg={v.role} />}mode {v.mode}
                      {v.embedded ? ' · embedded reference worker' : ''}
                    </div>
                  </td>
                  <td>
                    <Badge tone={HEALTH_TONE[v.health]}>{v.health}</Badge>
                  </td>
                  <td>
                    <VerdictBadge decision={v.decision} threshold={v.minBytes} readsPixels={v.readsPixels} compact />
                    {!v.readsPixels && <NoPixelTensorsNote />}
                  </td>
                  <td className="small">
                    {v.decision.explanation}
                    {v.decision.outcome !== 'shm' && v.decision.advice && (
                      <div className="remedy">
                        <span className="remedy-label">What to do:</span> <Prose text={v.decision.advice} />
                      </div>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </Panel>
  );
}

/** Whether a restart with the start flags runs what runs now: the file and the flags, computed by the backend. */
function SyncState({ config }: { config: Overview['config'] }) {
  if (config.drifted) return <Badge tone="warn">changed on disk</Badge>;
  if (config.restartChanges === null) return <Badge tone="bad">not a valid configuration</Badge>;
  if (config.restartChanges.length > 0) {
    return (
      <span data-testid="sync-state">
        <Badge tone="warn">
          a restart changes {config.restartChanges.length} setting{config.restartChanges.length === 1 ? '' : 's'}
        </Badge>{' '}
        <span className="small">{config.restartChanges.map(restartChangeText).join('; ')}</span>
      </span>
    );
  }
  return (
    <span data-testid="sync-state">
      <Badge tone="ok">in sync</Badge> <span className="muted small">a restart with the same flags runs this configuration</span>
    </span>
  );
}

/** Older than this, the overview on screen is not taken as the current state (the stream sends about every second). */
const STALE_MS = 2500;

export function OverviewScreen() {
  const data = useOverview((s) => s.data);
  const error = useOverview((s) => s.error);
  const loadedAt = useOverview((s) => s.loadedAt);
  const connection = useUi((s) => s.connection);
  const seconds = useTraffic((s) => s.seconds);
  const now = useNowSecond();
  const series = useMemo(() => perSecondSeries(seconds, 60, now), [seconds, now]);
  // Fetch at once when what is held is old (the stream keeps it fresh while connected).
  useEffect(() => {
    if (!loadedAt || Date.now() - loadedAt > STALE_MS) void useOverview.getState().load();
  }, [loadedAt]);

  if (!data) return <>{error ? <ErrorNote>{error}</ErrorNote> : <p className="muted">Loading…</p>}</>;
  const fresh = loadedAt !== null && now * 1000 - loadedAt < STALE_MS + 1000;
  const { host, files, router, workers, warnings } = data;
  const rates = {
    tensorsPerSecond: { inline: recentRate(series.tensors.inline), shm: recentRate(series.tensors.shm), remote: recentRate(series.tensors.remote) },
    bytesPerSecond: { inline: recentRate(series.bytes.inline), shm: recentRate(series.bytes.shm), remote: recentRate(series.bytes.remote) },
  };
  const usedShare = host.shmTotalBytes && host.shmFreeBytes !== null ? 1 - host.shmFreeBytes / host.shmTotalBytes : null;

  return (
    <>
      <ScreenHeader
        title="Overview"
        lead={
          <>
            Router <code>{router.url}</code> · model <code>{router.model.split('/').pop()}</code> ({router.family}) · pid {router.pid} · revision{' '}
            {data.config.revision}
          </>
        }
      />
      {error && <ErrorNote>Refresh failed: {error}</ErrorNote>}
      {!fresh && loadedAt !== null && (
        <p className="note note-warn" role="status" data-testid="overview-stale">
          Not live: this overview is {Math.round((now * 1000 - loadedAt) / 1000)} s old (
          {connection === 'open' ? 'waiting for the next update' : 'the connection to the console is down; reconnecting'}). What it shows may have changed
          since.
        </p>
      )}

      <Panel title={`Warnings (${warnings.length})`} id="warnings" className={warnings.length ? 'panel-warn' : ''}>
        {warnings.length === 0 && !fresh ? (
          <p className="muted" aria-live="polite">
            Checking… (the last overview is {loadedAt ? `${Math.round((Date.now() - loadedAt) / 1000)} s` : 'too'} old)
          </p>
        ) : warnings.length === 0 && data.critical.length > 0 ? (
          <p className="muted" data-testid="warnings-critical">
            No warning here, but requests are failing: the critical states are in the banner above.
          </p>
        ) : warnings.length === 0 ? (
          <p className="okline">
            <Badge tone="ok">All clear</Badge> no deprecated or invalid environment values, orphan files, unhealthy workers, broken SHM lanes, settings a
            restart would lose or file drift.
          </p>
        ) : (
          <ul className="warnings">
            {warnings.map((w, i) => (
              <li key={i} data-kind={w.kind}>
                <Badge tone={warningTone(w.kind)}>{warningWord(w.kind)}</Badge>
                <div>
                  <div>{w.message}</div>
                  <div className="remedy">
                    <span className="remedy-label">What to do:</span> <Prose text={w.remedy} />
                  </div>
                </div>
              </li>
            ))}
          </ul>
        )}
      </Panel>

      <DriftPanel />

      <NextRequests verdicts={data.verdicts} />

      <div className="grid grid-3">
        <Panel title="Host /dev/shm" id="host">
          <div className="stats">
            <Stat label="Writable">{host.shmWritable ? <Badge tone="ok">yes</Badge> : <Badge tone="bad">no</Badge>}</Stat>
            <Stat
              label="Free"
              sub={
                host.shmTotalBytes !== null ? (
                  <>
                    of <Bytes n={host.shmTotalBytes} />
                  </>
                ) : undefined
              }
            >
              <Bytes n={host.shmFreeBytes} />
            </Stat>
          </div>
          {usedShare !== null && (
            <div className="meter" role="meter" aria-label="/dev/shm used" aria-valuemin={0} aria-valuemax={100} aria-valuenow={Math.round(usedShare * 100)}>
              <div className="meter-fill" style={{ width: `${Math.max(0.5, usedShare * 100)}%` }} />
            </div>
          )}
          {host.shmError && <ErrorNote>{host.shmError}</ErrorNote>}
          <div className="field-label">Namespace token</div>
          {host.token ? (
            <div className="token-row">
              <code className="token" data-testid="host-token">
                {host.token}
              </code>
              <CopyButton text={host.token} what="host namespace token" />
            </div>
          ) : (
            <Badge tone="bad">none: {host.tokenProblem ?? 'unknown'}</Badge>
          )}
        </Panel>

        <Panel title="Our tensor files" id="files">
          <div className="stats">
            <Stat label="Files">{formatInt(files.count)}</Stat>
            <Stat label="Size">
              <Bytes n={files.bytes} />
            </Stat>
            <Stat label="Orphans" sub={files.orphans ? <Bytes n={files.orphanBytes} /> : undefined}>
              {files.orphans ? <Badge tone="warn">{files.orphans}</Badge> : <Badge tone="ok">0</Badge>}
            </Stat>
            <Stat label="Suspicious">{files.suspicious ? <Badge tone="bad">{files.suspicious}</Badge> : <Badge tone="ok">0</Badge>}</Stat>
          </div>
          <OutstandingGauge bytes={files.outstandingBytes} max={files.maxOutstandingBytes} />
          <p className="muted small">
            This router&apos;s files in {host.shmDir} (smg-tokenspeed-{router.pid}-…); workers unlink what they read. Orphans and suspicious entries are of
            every owner.
            {files.cacheFiles > 0 && (
              <span data-testid="cache-files">
                {' '}
                Not counted: {formatInt(files.cacheFiles)} pixel-cache file{files.cacheFiles === 1 ? '' : 's'} of this router ({formatBytes(files.cacheBytes)}),
                smg-tokenspeed-cache-…, kept while it runs.
              </span>
            )}
            {files.otherFiles > 0 && (
              <span data-testid="other-files">
                {' '}
                Not ours: {formatInt(files.otherFiles)} file{files.otherFiles === 1 ? '' : 's'} ({formatBytes(files.otherBytes)}) of other routers under the
                same names (Doctor lists them by process).
              </span>
            )}
          </p>
        </Panel>

        <Panel
          title="Workers"
          id="workers"
          actions={
            <a className="btn btn-small" href={routeHref('workers')}>
              Open workers
            </a>
          }
        >
          <div className="stats stats-grid">
            <Stat label="Total">{workers.total}</Stat>
            <Stat label="Healthy">{workers.healthy ? <Badge tone="ok">{workers.healthy}</Badge> : '0'}</Stat>
            <Stat label="Unhealthy">{workers.unhealthy ? <Badge tone="bad">{workers.unhealthy}</Badge> : '0'}</Stat>
            <Stat label="Discovering">{workers.discovering ? <Badge tone="info">{workers.discovering}</Badge> : '0'}</Stat>
            <Stat label="Draining">{workers.draining ? <Badge tone="warn">{workers.draining}</Badge> : '0'}</Stat>
          </div>
          {workers.total === 0 && <Empty title="No workers configured">Add one on the Workers screen.</Empty>}
        </Panel>
      </div>

      <PixelCachePanel cache={data.pixelCache} routerPid={router.pid} />

      <Panel
        title="Live traffic (last 5 s average; trend over 60 s; all sources)"
        id="rates"
        actions={
          <a className="btn btn-small" href={routeHref('traffic')}>
            Open traffic
          </a>
        }
      >
        <table className="table rates">
          <thead>
            <tr>
              <th scope="col">Path</th>
              <th scope="col" className="r">
                Tensors/s
              </th>
              <th scope="col">Trend</th>
              <th scope="col" className="r">
                Throughput
              </th>
              <th scope="col">Trend</th>
            </tr>
          </thead>
          <tbody>
            {(['inline', 'shm'] as const).map((p) => (
              <tr key={p}>
                <th scope="row">
                  <span className={`path path-${p}`}>{p === 'shm' ? 'SHM' : 'inline'}</span>
                </th>
                <td className="r num">{formatCountRate(rates.tensorsPerSecond[p])}</td>
                <td>
                  <Sparkline values={series.tensors[p]} tone={p} label={`${p} tensors per second over the last minute`} />
                </td>
                <td className="r">
                  <Rate n={rates.bytesPerSecond[p]} />
                </td>
                <td>
                  <Sparkline values={series.bytes[p]} tone={p} label={`${p} bytes per second over the last minute`} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
        {rates.tensorsPerSecond.remote > 0 && <p className="muted small">remote: {formatCountRate(rates.tensorsPerSecond.remote)}</p>}
      </Panel>

      <Panel title="Configuration" id="cfg">
        <dl className="kv kv-wide">
          <div>
            <dt>File</dt>
            <dd>
              <code>{data.config.file ?? 'none (in memory only)'}</code> <SyncState config={data.config} />
            </dd>
          </div>
          <div>
            <dt>Revision</dt>
            <dd className="num">{data.config.revision}</dd>
          </div>
        </dl>
      </Panel>
    </>
  );
}
