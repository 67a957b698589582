// The pixel cache on Overview (docs/console.md, "The pixel cache"): its hit rate with the
// counts, the bytes it holds against its budget, entries, evictions, tampered entries dropped,
// and the input the budget came from, all from the overview the backend computes at each tick;
// when off, why and what turns it on. Flush asks first, then says how many entries went.
import { useEffect, useRef, useState } from 'react';
import { PIXEL_CACHE_ENV, type Overview, type PixelCacheView } from '../../../core/console/contract.ts';
import { formatHitRate, formatInt, formatMiB } from '../lib/format.ts';
import { describeError } from '../stores/client.ts';
import { flushPixelCache } from '../stores/overview.ts';
import { routeHref, useUi } from '../stores/ui.ts';
import { Badge, Panel, Prose, Stat } from './ui.tsx';

const plural = (n: number, one: string, many: string) => `${formatInt(n)} ${n === 1 ? one : many}`;

/** Where the budget came from: the YAML key (and where its value came from), the gateway's environment variable, or the default. */
function BudgetSource({ configured }: { configured: PixelCacheView['configured'] }) {
  if (configured.source === 'multimodal_pixel_cache_mb') {
    return (
      <>
        <code>multimodal_pixel_cache_mb</code>
        {configured.origin && <span className="muted">, set in {configured.origin}</span>}
      </>
    );
  }
  if (configured.source === 'default') {
    return (
      <>
        the built-in default{' '}
        <span className="muted">
          (neither <code>multimodal_pixel_cache_mb</code> nor <code>{PIXEL_CACHE_ENV}</code> is set)
        </span>
      </>
    );
  }
  return (
    <>
      <code>{configured.source}</code> <span className="muted">in the router's environment</span>
    </>
  );
}

/** Bytes the entries hold against the budget in force. */
function HeldGauge({ held, budget }: { held: number; budget: number }) {
  const share = Math.min(1, held / budget);
  const tone = share >= 0.9 ? 'meter-warn' : '';
  return (
    <div className="gauge" data-testid="pixel-cache-held">
      <div className="gauge-line">
        <span className="field-label">Held</span> <span className="num">{formatMiB(held)}</span>
        <span className="muted">
          {' '}
          of <span className="num">{formatMiB(budget)}</span>
        </span>
      </div>
      <div
        className={`meter ${tone}`}
        role="meter"
        aria-label="Bytes the pixel cache holds against its budget"
        aria-valuemin={0}
        aria-valuemax={100}
        aria-valuenow={Math.round(share * 100)}
        aria-valuetext={`${formatMiB(held)} of ${formatMiB(budget)}`}
      >
        <div className="meter-fill" style={{ width: `${Math.max(0.5, share * 100)}%` }} />
      </div>
      <div className="muted small">read-only files in /dev/shm; the least recently used go first when a new image or a request's tensor needs the room</div>
    </div>
  );
}

/** The flush, asked first in a dialog: it names what goes and what stays. */
function FlushButton({ cache }: { cache: PixelCacheView }) {
  const [asking, setAsking] = useState(false);
  const [flushing, setFlushing] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const dialog = useRef<HTMLDialogElement>(null);
  const opener = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    const d = dialog.current;
    if (!d) return;
    if (asking && !d.open) d.showModal();
    if (!asking && d.open) d.close();
  }, [asking]);

  const flush = async () => {
    setFlushing(true);
    setError(null);
    try {
      const { dropped, pixelCache } = await flushPixelCache();
      setAsking(false);
      opener.current?.focus();
      useUi.getState().toast({
        kind: 'success',
        title: `Pixel cache flushed: ${plural(dropped, 'entry', 'entries')} dropped`,
        body: `${dropped === 0 ? 'It held none. ' : ''}The next request with each image computes it again. It now holds ${plural(pixelCache.entries, 'entry', 'entries')}, ${formatMiB(pixelCache.heldBytes)}${pixelCache.heldBytes > 0 ? ' (files that requests in flight still hold, until they end)' : ''}.`,
      });
    } catch (err) {
      setError(describeError(err));
    } finally {
      setFlushing(false);
    }
  };

  return (
    <>
      <button
        ref={opener}
        type="button"
        className="btn btn-small"
        disabled={cache.entries === 0}
        title={cache.entries === 0 ? 'The cache holds no entry' : undefined}
        onClick={() => setAsking(true)}
      >
        Flush cache…
      </button>
      <dialog ref={dialog} className="dialog dialog-small" aria-labelledby="flush-title" onClose={() => setAsking(false)}>
        {asking && (
          <div className="dialog-body">
            <h2 id="flush-title">Flush the pixel cache?</h2>
            <p>
              Drops the cache's <strong className="num">{plural(cache.entries, 'entry', 'entries')}</strong> ({formatMiB(cache.heldBytes)}). The next request
              with each of those images decodes and preprocesses it again. Requests in flight keep the files they hold until they end; the counts of hits and
              misses stay.
            </p>
            {error && (
              <div className="note note-bad" role="alert">
                <strong>Not flushed.</strong> {error}
              </div>
            )}
            <div className="dialog-actions">
              <button type="button" className="btn" onClick={() => setAsking(false)}>
                Cancel
              </button>
              <button type="button" className="btn btn-danger" disabled={flushing} onClick={() => void flush()}>
                {flushing ? 'Flushing…' : `Flush ${plural(cache.entries, 'entry', 'entries')}`}
              </button>
            </div>
          </div>
        )}
      </dialog>
    </>
  );
}

export function PixelCachePanel({ cache, routerPid }: { cache: Overview['pixelCache']; routerPid: number }) {
  if (!cache) {
    return (
      <Panel title="Pixel cache" id="pixel-cache">
        <p className="muted">This router runs without a pixel cache: every image is preprocessed for every request.</p>
      </Panel>
    );
  }
  const rate = formatHitRate(cache.hits, cache.misses);
  const looked = cache.hits + cache.misses > 0;
  return (
    <Panel
      title={<>Pixel cache {cache.off ? <Badge tone="neutral">off</Badge> : <Badge tone="ok">on</Badge>}</>}
      id="pixel-cache"
      actions={<FlushButton cache={cache} />}
    >
      <div data-testid="pixel-cache">
        {cache.off && (
          <div className="note note-info" data-testid="pixel-cache-off" data-reason={cache.off.reason}>
            <div>
              <strong>The pixel cache is {cache.off.message}.</strong> Every image is preprocessed for every request.
            </div>
            <div className="remedy">
              <span className="remedy-label">To turn it on:</span> <Prose text={cache.off.remedy} />.
              {cache.off.reason === 'budget_zero' && (
                <>
                  {' '}
                  <a href={routeHref('router')}>Open router settings</a>
                </>
              )}
            </div>
          </div>
        )}
        <div className="pixel-cache-body">
          {(!cache.off || looked || cache.entries > 0) && (
            <div className="stats pixel-cache-stats">
              <Stat
                label="Hit rate"
                sub={
                  <span data-testid="pixel-cache-counts">
                    {plural(cache.hits, 'hit', 'hits')} · {plural(cache.misses, 'miss', 'misses')}
                  </span>
                }
              >
                <span data-testid="pixel-cache-rate">{rate ?? '–'}</span>
              </Stat>
              <Stat label="Entries">
                <span data-testid="pixel-cache-entries">{formatInt(cache.entries)}</span>
              </Stat>
              <Stat label="Evictions" sub="for room">
                {formatInt(cache.evictions)}
              </Stat>
              <Stat label="Tampered" sub="dropped, not served">
                {cache.tampered ? (
                  <Badge tone="warn" title="Entries whose file changed under the router (a worker wrote into it) or went away: dropped, never served again">
                    {formatInt(cache.tampered)}
                  </Badge>
                ) : (
                  '0'
                )}
              </Stat>
              <Stat label="Not kept" sub="misses without room">
                <span title="Misses that could not be kept: larger than the budget, no room in /dev/shm, or a failed write">{formatInt(cache.notStored)}</span>
              </Stat>
            </div>
          )}
          <div>
            {!cache.off && <HeldGauge held={cache.heldBytes} budget={cache.budgetBytes} />}
            <p className="small" data-testid="pixel-cache-budget">
              Budget <span className="num">{cache.configured.mb} MiB</span>
              {cache.off?.reason === 'shm_not_writable' ? ' configured (0 in force)' : ''}, from <BudgetSource configured={cache.configured} />.
            </p>
          </div>
        </div>
        <p className="muted small">
          A repeated image skips decoding and preprocessing: its tensor is a hard link to the cached file when it goes as it is over SHM, and is read from that
          file otherwise. Counts since the router started (pid {routerPid}){cache.flushes ? `; flushed ${plural(cache.flushes, 'time', 'times')}` : ''}
          {looked ? '' : '; no image looked up yet'}.
        </p>
      </div>
    </Panel>
  );
}
