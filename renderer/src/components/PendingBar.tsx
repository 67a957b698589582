// The draft's standing: how many changes, on which revision, whether it is still valid and
// still based on the applied revision; Review & apply or Discard. Shown on every screen
// while a draft exists, so an edit is never forgotten half-way.
import { useConfig } from '../stores/config.ts';

export function PendingBar() {
  const draft = useConfig((s) => s.draft);
  const base = useConfig((s) => s.base);
  const diff = useConfig((s) => s.diff);
  const issues = useConfig((s) => s.issues);
  const view = useConfig((s) => s.view);
  if (!draft || !base) return null;
  const stale = view && view.revision !== base.revision;
  return (
    <div className="pending" role="region" aria-label="Unapplied changes">
      <div className="pending-text">
        <strong>
          {/* An invalid draft has no diff to count (config.diff needs a valid one). */}
          {issues.length > 0 && diff.length === 0 ? 'Unapplied changes' : `${diff.length} unapplied change${diff.length === 1 ? '' : 's'}`}
        </strong>{' '}
        <span className="muted">based on revision {base.revision}</span>
        {issues.length > 0 && (
          // Every problem the count counts is named (each message names its field and value):
          // "2 problems" over one sentence left the other to be guessed.
          <div className="pending-issue">
            <span aria-hidden="true">✕ </span>
            {issues.length} problem{issues.length === 1 ? '' : 's'}:
            <ul className="pending-issues" data-testid="pending-issues">
              {issues.map((issue, i) => (
                <li key={`${i}-${issue.path}`}>{issue.message}</li>
              ))}
            </ul>
          </div>
        )}
        {stale && (
          <span className="pending-issue warn">
            <span aria-hidden="true">! </span>
            revision {view.revision} was applied meanwhile ({view.client})
          </span>
        )}
      </div>
      <div className="pending-actions">
        {stale && (
          <button type="button" className="btn" onClick={() => useConfig.getState().rebase()}>
            Rebase onto {view.revision}
          </button>
        )}
        <button type="button" className="btn" onClick={() => useConfig.getState().discard()}>
          Discard
        </button>
        <button type="button" className="btn btn-primary" disabled={issues.length > 0} onClick={() => useConfig.getState().reviewDraft()}>
          Review &amp; apply
        </button>
      </div>
    </div>
  );
}
