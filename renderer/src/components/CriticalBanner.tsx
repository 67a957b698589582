// The banner every screen shows while requests cannot succeed (docs/console.md, "Critical
// states"): the critical states the backend computed (core/router/critical.ts, the same ones
// /health reports), each in its own words with what to do, from the overview stream; gone
// when they clear. Nothing here decides what is critical.
import type { Overview } from '../../../core/console/contract.ts';
import { useOverview } from '../stores/overview.ts';
import { Prose } from './ui.tsx';

const HEADLINE: Record<Exclude<Overview['health'], 'ok'>, string> = {
  unavailable: 'Unavailable: no request can succeed',
  degraded: 'Degraded: requests are failing',
};

export function CriticalBanner() {
  const data = useOverview((s) => s.data);
  if (!data || data.critical.length === 0 || data.health === 'ok') return null;
  return (
    <section className={`critical critical-${data.health}`} role="alert" aria-label="Critical states" data-testid="critical-banner" data-health={data.health}>
      <div className="critical-head">
        <span aria-hidden="true">✕ </span>
        {HEADLINE[data.health]}
      </div>
      <ul className="critical-list">
        {data.critical.map((c) => (
          <li key={`${c.kind}|${c.role ?? ''}`} data-kind={c.kind} data-role={c.role ?? undefined}>
            <div className="critical-message wrap">{c.message}</div>
            <div className="remedy small">
              <span className="remedy-label">What to do:</span> <Prose text={c.remedy} />
            </div>
          </li>
        ))}
      </ul>
    </section>
  );
}
