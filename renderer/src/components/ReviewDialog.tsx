// The one dialog every change to the router passes through: it shows the diff first (asking
// config.diff for the proposed config, or using the diff the caller has), applies only when
// the operator confirms, and reports the outcome: a toast with the new revision and an Undo
// (a reviewed rollback to the revision the change was based on), or the error in place —
// a conflict shows what someone else changed meanwhile (details.changedMeanwhile) and can
// carry the change onto the current revision.
import { useEffect, useRef, useState } from 'react';
import { ContractError, restartChangeText, startFlagFor, type CommandOutput, type DiffEntry } from '../../../core/console/contract.ts';
import { client, describeError } from '../stores/client.ts';
import { useConfig } from '../stores/config.ts';
import { useUi, type ReviewRequest } from '../stores/ui.ts';
import { DiffList } from './DiffList.tsx';
import { Prose } from './ui.tsx';

/** What an apply would do beyond the diff: what a restart with the start flags would undo, and workers sent where they cannot read. */
interface Consequences {
  untilRestart: DiffEntry[];
  warnings: CommandOutput<'config.diff'>['warnings'];
}
const NONE: Consequences = { untilRestart: [], warnings: [] };

type Phase =
  | { kind: 'loading' }
  | { kind: 'ready'; diff: DiffEntry[]; consequences: Consequences }
  | { kind: 'applying'; diff: DiffEntry[]; consequences: Consequences }
  | { kind: 'failed'; diff: DiffEntry[] | null; consequences: Consequences; error: ContractError | Error };

export function ReviewDialog() {
  const review = useUi((s) => s.review);
  const close = useUi((s) => s.closeReview);
  const ref = useRef<HTMLDialogElement>(null);
  // The review on screen: the dialog's close event arrives a task later, and must not close
  // a review requested meanwhile (a rebase closes one review and opens the next at once).
  const shown = useRef<ReviewRequest | null>(null);

  useEffect(() => {
    const d = ref.current;
    if (!d) return;
    shown.current = review;
    if (review && !d.open) d.showModal();
    if (!review && d.open) d.close();
  }, [review]);

  const onClose = () => {
    const current = useUi.getState().review;
    // Closed by the operator (Esc) while this review is still the current one.
    if (current && current === shown.current && !ref.current?.open) close();
  };

  return (
    <dialog ref={ref} className="dialog" aria-labelledby="review-title" onClose={onClose}>
      {review && <ReviewBody key={review.title + review.intro} review={review} onClose={close} />}
    </dialog>
  );
}

function ReviewBody({ review, onClose }: { review: ReviewRequest; onClose: () => void }) {
  const [phase, setPhase] = useState<Phase>(
    review.diff && !review.proposed ? { kind: 'ready', diff: review.diff, consequences: review.consequences ?? NONE } : { kind: 'loading' },
  );

  useEffect(() => {
    if (!review.proposed) return;
    let live = true;
    const input = 'yaml' in review.proposed ? { yaml: review.proposed.yaml } : { draft: review.proposed };
    client()
      .call('config.diff', input)
      .then((r) => live && setPhase({ kind: 'ready', diff: review.diff ?? r.diff, consequences: { untilRestart: r.untilRestart, warnings: r.warnings } }))
      .catch((err: unknown) => live && setPhase({ kind: 'failed', diff: null, consequences: NONE, error: err as Error }));
    return () => {
      live = false;
    };
  }, [review]);

  const apply = async () => {
    const diff = phase.kind === 'ready' ? phase.diff : [];
    const consequences = phase.kind === 'ready' ? phase.consequences : NONE;
    setPhase({ kind: 'applying', diff, consequences });
    try {
      const result = await review.run();
      review.onApplied?.(result);
      await useConfig.getState().afterApply(result);
      onClose();
      returnFocus(review);
      const ui = useUi.getState();
      const undo = review.undo;
      const restart =
        result.untilRestart.length > 0
          ? ` Until the next restart only (the change is in the file; the flags the router started with win at start): ${result.untilRestart.map(restartChangeText).join('; ')}.`
          : '';
      ui.toast(
        {
          kind: result.untilRestart.length > 0 ? 'info' : 'success',
          title: `Applied revision ${result.revision}`,
          body: `${result.diff.length} change${result.diff.length === 1 ? '' : 's'}${result.file ? `, written to ${result.file}` : ''}. The next request uses it.${restart}`,
          ...(undo
            ? {
                action: {
                  label: `Undo (roll back to ${undo.toRevision})`,
                  run: () =>
                    ui.requestReview({
                      title: `Undo revision ${result.revision}`,
                      intro: `Roll back to revision ${undo.toRevision}: a new revision with its settings.`,
                      ...(undo.config ? { proposed: undo.config } : { diff: result.diff.map(invert) }),
                      confirmLabel: `Roll back to revision ${undo.toRevision}`,
                      run: () => client().call('config.rollback', { revision: undo.toRevision, expectedRevision: result.revision }),
                    }),
                },
              }
            : {}),
        },
        12_000,
      );
    } catch (err) {
      setPhase({ kind: 'failed', diff, consequences, error: err as Error });
    }
  };

  const err = phase.kind === 'failed' ? phase.error : null;
  const conflict = err instanceof ContractError && err.code === 'conflict' ? err : null;
  const changedMeanwhile = conflict?.details.changedMeanwhile ?? [];
  const diff = phase.kind === 'loading' ? null : phase.diff;
  const nothing = phase.kind === 'ready' && phase.diff.length === 0;

  return (
    <div className="dialog-body">
      <h2 id="review-title">{review.title}</h2>
      <p>{review.intro}</p>
      {phase.kind === 'loading' && (
        <p className="muted" aria-live="polite">
          Computing what will change…
        </p>
      )}
      {diff && <DiffList diff={diff} caption="What this will change" empty="This changes nothing: the router already runs these settings." />}
      {phase.kind !== 'loading' && phase.consequences.warnings.length > 0 && (
        <div className="note note-warn" role="alert" data-testid="review-warnings">
          <strong>Known not to work as asked:</strong>
          <ul>
            {phase.consequences.warnings.map((w) => (
              <li key={w.url} data-worker={w.url} data-reason={w.decision.reason}>
                <span className="mono">{w.url}</span>: {w.decision.explanation}
                {w.decision.advice && (
                  <div className="remedy small">
                    <span className="remedy-label">What to do:</span> <Prose text={w.decision.advice} />
                  </div>
                )}
              </li>
            ))}
          </ul>
        </div>
      )}
      {phase.kind !== 'loading' && phase.consequences.untilRestart.length > 0 && (
        <div className="note note-warn" role="alert" data-testid="review-until-restart">
          <strong>Until the next restart only.</strong> The change is written to the file, but the router was started with{' '}
          {flagsOf(phase.consequences.untilRestart)}, and a restart with the same flags sets these back:
          <DiffList
            diff={phase.consequences.untilRestart.map((d) => ({ ...d, path: d.path }))}
            caption="What a restart with the same flags would set again"
            empty=""
          />
          To keep the change across restarts, start the router without {phase.consequences.untilRestart.length === 1 ? 'that flag' : 'those flags'}.
        </div>
      )}
      {err && !conflict && (
        <div className="note note-bad" role="alert">
          <strong>Not applied.</strong> {describeError(err)}
          {err instanceof ContractError && err.issues.length > 0 && (
            <ul>
              {err.issues.map((i) => (
                <li key={i.path + i.message}>
                  <code>{i.path || '(root)'}</code>
                  {i.line ? ` line ${i.line}${i.column ? `:${i.column}` : ''}` : ''}: {i.message}
                </li>
              ))}
            </ul>
          )}
        </div>
      )}
      {conflict && (
        <div className="note note-warn" role="alert" data-testid="conflict">
          <strong>Conflict: nothing was applied.</strong> Someone applied revision {conflict.details.currentRevision} while you edited revision{' '}
          {conflict.details.expectedRevision}. What changed meanwhile:
          <DiffList diff={changedMeanwhile} caption="Changed meanwhile by someone else" empty="(the history no longer has the revision you edited)" />
          {review.onRebase && (
            <p>Rebasing carries your edits onto revision {conflict.details.currentRevision} and keeps their change; review again before applying.</p>
          )}
        </div>
      )}
      <div className="dialog-actions">
        <button type="button" className="btn" onClick={onClose}>
          {conflict || err ? 'Close' : 'Cancel'}
        </button>
        {conflict && review.onRebase && (
          <button
            type="button"
            className="btn btn-primary"
            onClick={async () => {
              await useConfig.getState().load();
              review.onRebase!();
              onClose();
              setTimeout(() => useConfig.getState().reviewDraft(), 0);
            }}
          >
            Rebase my edits onto revision {conflict.details.currentRevision}
          </button>
        )}
        {!conflict && !err && (
          <button type="button" className="btn btn-primary" disabled={phase.kind !== 'ready' || nothing} onClick={() => void apply()}>
            {phase.kind === 'applying' ? 'Applying…' : review.confirmLabel}
          </button>
        )}
      </div>
    </div>
  );
}

/** The start flags behind changes a restart would undo, as the operator typed them (from config.get's startFlags). */
function flagsOf(changes: readonly DiffEntry[]): string {
  const flags = useConfig.getState().view?.startFlags ?? [];
  const named = flags.filter((f) => changes.some((d) => startFlagFor([f], d.path)));
  return named.length ? named.map((f) => f.flag).join(' ') : 'flags that set them';
}

/**
 * After an apply the dialog closes and the control that opened it may be gone (the pending
 * bar disappears with its draft): focus goes back to it when it is still on the page, else to
 * the screen's heading, never to the page body.
 */
function returnFocus(review: ReviewRequest): void {
  const opener = review.opener;
  requestAnimationFrame(() => {
    // The modal dialog gives focus back to what was focused before it when it closes: close it
    // first, so that does not undo the focus given here.
    document.querySelector<HTMLDialogElement>('dialog.dialog[open]')?.close();
    if (opener && opener.isConnected && !(opener as HTMLButtonElement).disabled) opener.focus();
    else (document.querySelector<HTMLElement>('#main h1') ?? document.getElementById('main'))?.focus();
  });
}

function invert(d: DiffEntry): DiffEntry {
  if (d.kind === 'added') return { path: d.path, kind: 'removed', before: d.after };
  if (d.kind === 'removed') return { path: d.path, kind: 'added', after: d.before };
  return { path: d.path, kind: 'changed', before: d.after, after: d.before };
}
