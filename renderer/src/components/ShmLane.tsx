// A worker's broken SHM lane (it could not read the router's /dev/shm files): why, since when,
// what to do, and the reset. The reset asks the router, which runs the auto checklist first:
// while a check still fails the next request would break the lane again, so the reset is
// refused with the failing checks named here, and "Reset anyway" is the operator's explicit
// choice (workers.resetShmLane with force).
import { useState } from 'react';
import { ContractError, type CommandOutput, type WorkerView } from '../../../core/console/contract.ts';
import { formatAgo, formatDateTime } from '../lib/format.ts';
import { describeError } from '../stores/client.ts';
import { resetShmLane } from '../stores/workers.ts';
import { Prose } from './ui.tsx';

type Step = CommandOutput<'workers.diagnose'>['steps'][number];
type ResetState = { kind: 'idle' | 'resetting' } | { kind: 'refused'; failing: Step[]; message: string } | { kind: 'failed'; error: string };

/** The reset button with the refusal it may get: the checks that still fail, and "Reset anyway". */
export function ResetLaneButton({ url, onReset, primary = false }: { url: string; onReset?: () => void; primary?: boolean }) {
  const [state, setState] = useState<ResetState>({ kind: 'idle' });
  const reset = async (force: boolean) => {
    setState({ kind: 'resetting' });
    try {
      await resetShmLane(url, force);
      setState({ kind: 'idle' });
      onReset?.();
    } catch (err) {
      if (err instanceof ContractError && err.code === 'checks_failed') setState({ kind: 'refused', failing: err.details.failing, message: err.message });
      else setState({ kind: 'failed', error: describeError(err) });
    }
  };
  return (
    <div className="reset-lane" data-testid="reset-lane">
      <div className="row-actions start">
        <button
          type="button"
          className={`btn btn-small ${primary ? 'btn-primary' : ''}`}
          disabled={state.kind === 'resetting'}
          onClick={() => void reset(false)}
        >
          {state.kind === 'resetting' ? 'Checking…' : 'Reset the SHM lane'}
        </button>
        {state.kind === 'idle' && (
          <span className="muted small">The checks run first; the lane is reset only if the worker can read the router's files now.</span>
        )}
      </div>
      {state.kind === 'failed' && <div className="field-error">Reset failed: {state.error}</div>}
      {state.kind === 'refused' && (
        <div className="note note-warn" role="alert" data-testid="reset-refused">
          <strong>Not reset: these checks still fail, so the next request would break the lane again.</strong>
          <ul>
            {state.failing.map((st) => (
              <li key={st.id} data-step={st.id}>
                {st.label}: <span className="mono wrap">{st.detail}</span>
                {st.remedy && (
                  <div className="remedy small">
                    <span className="remedy-label">What to do:</span> <Prose text={st.remedy} />
                  </div>
                )}
              </li>
            ))}
          </ul>
          <div className="row-actions start">
            <button type="button" className="btn btn-small btn-danger" onClick={() => void reset(true)}>
              Reset anyway
            </button>
            <button type="button" className="btn btn-small" onClick={() => setState({ kind: 'idle' })}>
              Keep it broken
            </button>
          </div>
        </div>
      )}
    </div>
  );
}

/** Why a worker's SHM lane is broken, since when, what to do, and the reset once the cause is fixed. */
export function ShmLaneNote({
  url,
  lane,
  advice,
  onReset,
}: {
  url: string;
  lane: NonNullable<WorkerView['shmLane']>;
  advice?: string | undefined;
  onReset?: () => void;
}) {
  return (
    <div className="note note-bad lane-note" data-testid="shm-lane-note">
      <div>
        <strong>SHM lane broken</strong> since <span className="num">{formatDateTime(lane.since)}</span>{' '}
        <span className="muted small">({formatAgo(lane.since)})</span>: the worker could not read the router's /dev/shm files, so its requests go inline.
      </div>
      <div className="mono small wrap lane-error">{lane.error}</div>
      {advice && (
        <div className="remedy">
          <span className="remedy-label">What to do:</span> <Prose text={advice} />
        </div>
      )}
      <ResetLaneButton url={url} {...(onReset ? { onReset } : {})} />
    </div>
  );
}
