import { useUi } from '../stores/ui.ts';

export function Toasts() {
  const toasts = useUi((s) => s.toasts);
  const dismiss = useUi((s) => s.dismiss);
  return (
    <div className="toasts" role="region" aria-label="Notifications" aria-live="polite">
      {toasts.map((t) => (
        <div key={t.id} className={`toast toast-${t.kind}`} role={t.kind === 'error' ? 'alert' : 'status'}>
          <div className="toast-text">
            <strong>
              <span aria-hidden="true">{t.kind === 'success' ? '✓ ' : t.kind === 'error' ? '✕ ' : 'i '}</span>
              {t.title}
            </strong>
            {t.body && <div className="toast-body">{t.body}</div>}
          </div>
          <div className="toast-actions">
            {t.action && (
              <button
                type="button"
                className="btn btn-small"
                onClick={() => {
                  dismiss(t.id);
                  t.action!.run();
                }}
              >
                {t.action.label}
              </button>
            )}
            <button type="button" className="btn btn-small btn-ghost" aria-label={`Dismiss notification: ${t.title}`} onClick={() => dismiss(t.id)}>
              ✕
            </button>
          </div>
        </div>
      ))}
    </div>
  );
}
