// The configuration file changed on disk: what a reload would change (the file as a restart runs
// it: flags given at start over it), why it cannot be loaded, and the reviewed reload. Shown on
// Overview and YAML; applies are refused until the file is reloaded.
import { client } from '../stores/client.ts';
import { useConfig } from '../stores/config.ts';
import { useUi } from '../stores/ui.ts';
import { DiffList } from './DiffList.tsx';
import { Badge, ErrorNote, Panel } from './ui.tsx';

export function reviewReloadFile() {
  const view = useConfig.getState().view;
  if (!view) return;
  useUi.getState().requestReview({
    title: 'Reload the configuration file',
    intro: `${view.file.path} was changed on disk. Reloading makes it revision ${view.revision + 1}, as a restart would run it: flags given at start still override it.`,
    diff: view.file.driftDiff,
    consequences: { untilRestart: [], warnings: view.file.driftWarnings },
    confirmLabel: 'Reload file',
    run: () => client().call('config.reloadFile', { expectedRevision: view.revision }),
    undo: { toRevision: view.revision, config: view.config },
  });
}

export function DriftPanel() {
  const view = useConfig((s) => s.view);
  const file = view?.file;
  if (!view || !file?.drifted) return null;
  const kept = view.startFlags;
  return (
    <Panel
      title={
        <>
          <Badge tone="warn">Drift</Badge> The configuration file changed on disk
        </>
      }
      className="panel-warn"
      id="drift"
    >
      <p>
        <code>{file.path}</code> differs from what the console last read or wrote. It is never overwritten silently: applies are refused until you reload it.
      </p>
      {file.driftIssues.length > 0 ? (
        <ErrorNote>
          The file cannot be reloaded as it is:
          <ul>
            {file.driftIssues.map((i) => (
              <li key={i.path + i.message}>
                {i.line ? `line ${i.line}${i.column ? `:${i.column}` : ''}: ` : ''}
                <code>{i.path}</code> {i.message}
              </li>
            ))}
          </ul>
        </ErrorNote>
      ) : (
        <>
          <DiffList
            diff={file.driftDiff}
            caption="What reloading the file would change"
            empty="Only comments or formatting changed: reloading changes no setting."
          />
          {kept.length > 0 && (
            <p className="muted small">
              Given by flags at start, so a reload (like a restart) keeps the flag's value whatever the file says:{' '}
              {kept.map((k) => `${k.key} (${k.flag})`).join(', ')}.
            </p>
          )}
          {file.driftWarnings.map((w) => (
            <p key={w.url} className="note note-warn small" data-testid="drift-warning">
              {w.message}
            </p>
          ))}
          <div className="row-actions">
            <button type="button" className="btn btn-primary" onClick={reviewReloadFile}>
              Review and reload file…
            </button>
          </div>
        </>
      )}
    </Panel>
  );
}
