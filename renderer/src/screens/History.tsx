// History: every applied revision with its time, the client that applied it and its diff;
// roll back to one as a reviewed apply (config.rollback, recorded as a new revision). The
// preview asks config.diff what the rollback changes against the applied revision, with
// the whole configuration the history keeps for each restorable revision (entry.config).
import { useEffect, useState } from 'react';
import { Badge, Empty, ErrorNote, Panel, ScreenHeader } from '../components/ui.tsx';
import { DiffList } from '../components/DiffList.tsx';
import { formatAgo, formatDateTime } from '../lib/format.ts';
import { client } from '../stores/client.ts';
import { useConfig } from '../stores/config.ts';
import { useHistory, type HistoryEntry } from '../stores/history.ts';
import { useUi } from '../stores/ui.ts';

const CLIENT_WORD: Record<string, string> = { start: 'router start', api: 'router API', ipc: 'desktop console', http: 'browser console', router: 'router' };

function reviewRollback(entry: HistoryEntry) {
  const view = useConfig.getState().view;
  if (!view || !entry.config) return;
  const expectedRevision = view.revision;
  useUi.getState().requestReview({
    title: `Roll back to revision ${entry.revision}`,
    intro: `Revision ${entry.revision}'s settings become revision ${expectedRevision + 1}; nothing is deleted from the history.`,
    proposed: entry.config,
    confirmLabel: `Roll back to revision ${entry.revision}`,
    run: () => client().call('config.rollback', { revision: entry.revision, expectedRevision }),
    undo: { toRevision: expectedRevision, config: view.config },
  });
}

export function HistoryScreen() {
  const entries = useHistory((s) => s.entries);
  const loaded = useHistory((s) => s.loaded);
  const error = useHistory((s) => s.error);
  const current = useConfig((s) => s.view?.revision);
  const [open, setOpen] = useState<number | null>(null);
  useEffect(() => {
    void useHistory.getState().load();
  }, [current]);
  return (
    <>
      <ScreenHeader
        title="History"
        lead="Every applied revision, who applied it and what it changed. A rollback is a new revision with an older revision's settings."
      />
      {error && <ErrorNote>{error}</ErrorNote>}
      <Panel id="history">
        {loaded && entries.length === 0 ? (
          <Empty title="No revisions recorded">Apply a change and it shows here.</Empty>
        ) : (
          <table className="table history" data-testid="history-table">
            <thead>
              <tr>
                <th scope="col" className="r">
                  Revision
                </th>
                <th scope="col">Applied</th>
                <th scope="col">By</th>
                <th scope="col">Changes</th>
                <th scope="col">
                  <span className="sr-only">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {entries.map((e) => (
                <HistoryRow
                  key={e.revision}
                  e={e}
                  current={e.revision === current}
                  open={open === e.revision}
                  onToggle={() => setOpen(open === e.revision ? null : e.revision)}
                  onRollback={() => reviewRollback(e)}
                />
              ))}
            </tbody>
          </table>
        )}
      </Panel>
    </>
  );
}

function HistoryRow({
  e,
  current,
  open,
  onToggle,
  onRollback,
}: {
  e: HistoryEntry;
  current: boolean;
  open: boolean;
  onToggle: () => void;
  onRollback: () => void;
}) {
  const summary =
    e.diff
      .slice(0, 3)
      .map((d) => d.path.replace(/^workers\["(.+?)"\]/, '$1'))
      .join(', ') + (e.diff.length > 3 ? ` and ${e.diff.length - 3} more` : '');
  return (
    <>
      <tr data-revision={e.revision}>
        <td className="r num">
          {e.revision} {current && <Badge tone="ok">applied</Badge>}
        </td>
        <td>
          <span className="num">{formatDateTime(e.appliedAt)}</span> <span className="muted small">{formatAgo(e.appliedAt)}</span>
        </td>
        <td>
          {CLIENT_WORD[e.client] ?? e.client}
          {e.rollbackOf !== undefined && <div className="muted small">rollback to revision {e.rollbackOf}</div>}
        </td>
        <td>
          <button
            type="button"
            className="btn btn-small btn-ghost"
            aria-expanded={open}
            onClick={onToggle}
            aria-label={`${open ? 'Hide' : 'Show'} the ${e.diff.length} changes of revision ${e.revision}`}
          >
            {open ? '▾' : '▸'} {e.diff.length} change{e.diff.length === 1 ? '' : 's'}
          </button>
          <span className="muted small ellipsis-inline">{summary}</span>
        </td>
        <td className="actions">
          {!current && e.restorable && e.config && (
            <button type="button" className="btn btn-small" onClick={onRollback} aria-label={`Roll back to revision ${e.revision}`}>
              Roll back to this…
            </button>
          )}
          {(!e.restorable || !e.config) && (
            <span className="muted small" title="the history no longer holds a valid configuration for this revision">
              not restorable
            </span>
          )}
        </td>
      </tr>
      {open && (
        <tr className="history-diff">
          <td colSpan={5}>
            <DiffList diff={e.diff} caption={`What revision ${e.revision} changed`} />
          </td>
        </tr>
      )}
    </>
  );
}
