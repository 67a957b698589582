// A worker's verdict for its next request, the same on every screen: the outcome the backend
// computed (core/console/decision-view.ts) as a badge, never inferred here from a flag, and the
// reason in plain words. "SHM attempted, then inline" is what mode shm does to a worker known
// not to share /dev/shm: the read fails and the request is sent again inline. "no request
// reaches it": the worker is not healthy (or a role its requests need has no healthy worker),
// so no transport is promised for it.
import type { WorkerView } from '../../../core/console/contract.ts';
import { formatBytes } from '../lib/format.ts';
import { Badge, Prose } from './ui.tsx';

export type Decision = WorkerView['decision'];

/** The class of a verdict's panel (Doctor, Precedence): its outcome's colour. */
export function verdictClass(outcome: Decision['outcome']): string {
  return `verdict verdict-${outcome === 'shm' ? 'shm' : outcome === 'shm_then_inline' ? 'warn' : outcome === 'no_request' ? 'bad' : 'inline'}`;
}

/** `compact` for table cells: the same outcome in fewer words. */
export function VerdictBadge({
  decision,
  threshold,
  compact = false,
  readsPixels = true,
}: {
  decision: Decision;
  threshold: number;
  compact?: boolean;
  /** false: a prefill or decode worker under disaggregation, whose own tensors are the images' metadata (readsPixelTensors). */
  readsPixels?: boolean;
}) {
  // A worker no request reaches now (not healthy, or a role its requests need has none): no verdict of a transport it will not use.
  if (decision.outcome === 'no_request')
    return (
      <Badge tone="bad" title={decision.explanation}>
        {compact ? 'no requests' : 'no request reaches it'}
      </Badge>
    );
  // No green "SHM ≥" for a worker that never gets a pixel tensor: its few bytes of metadata go inline below the threshold.
  if (!readsPixels && decision.outcome === 'shm')
    return (
      <Badge tone="neutral" title={`its own tensors, the images' metadata: ${decision.explanation}`}>
        no pixel tensors
      </Badge>
    );
  if (decision.outcome === 'shm')
    return (
      <Badge tone="ok">
        {compact ? 'SHM' : 'SHM for tensors'} ≥ {formatBytes(threshold)}
      </Badge>
    );
  if (decision.outcome === 'shm_then_inline')
    return (
      <Badge tone="warn" title={decision.explanation}>
        {compact ? 'SHM, then inline' : 'SHM attempted, then inline'}
      </Badge>
    );
  return <Badge tone="neutral">inline</Badge>;
}

/** The badge, the reason's sentence, and (with `advice`) what to do: the verdict spelled out. */
export function VerdictText({ decision, threshold, advice = false }: { decision: Decision; threshold: number; advice?: boolean }) {
  return (
    <div className="verdict-text" data-outcome={decision.outcome} data-reason={decision.reason}>
      <div>
        <VerdictBadge decision={decision} threshold={threshold} />
      </div>
      <div className="small">{decision.explanation}</div>
      {advice && decision.advice && (
        <div className="remedy small">
          <span className="remedy-label">What to do:</span> <Prose text={decision.advice} />
        </div>
      )}
    </div>
  );
}

/** Next to the verdict of a worker that gets no pixel tensor under disaggregation (a decode worker; a prefill next to encode workers): what its verdict can apply to. */
export function NoPixelTensorsNote() {
  return (
    <span className="small muted note-line" data-testid="no-pixels">
      no pixel tensors: its own are the images' metadata, a few bytes (inline below the threshold)
    </span>
  );
}
