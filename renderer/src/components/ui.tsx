// Small building blocks every screen uses: status badges (colour plus an icon and a word,
// never colour alone), quantities with their unit, copy buttons, panels and empty states.
import { Fragment, useState, type ReactNode } from 'react';
import { bytesParts, rateParts } from '../lib/format.ts';

export type Tone = 'ok' | 'warn' | 'bad' | 'info' | 'neutral';

const ICONS: Record<Tone, string> = { ok: '✓', warn: '!', bad: '✕', info: 'i', neutral: '–' };

export function Badge({ tone, children, title }: { tone: Tone; children: ReactNode; title?: string }) {
  return (
    <span className={`badge badge-${tone}`} title={title}>
      <span className="badge-icon" aria-hidden="true">
        {ICONS[tone]}
      </span>
      {children}
    </span>
  );
}

export function PathTag({ path }: { path: 'inline' | 'shm' | 'remote' }) {
  return <span className={`path path-${path}`}>{path === 'shm' ? 'SHM' : path}</span>;
}

export function Bytes({ n }: { n: number | null | undefined }) {
  if (n === null || n === undefined) return <span className="num">–</span>;
  const q = bytesParts(n);
  return (
    <span className="num qty" title={`${n.toLocaleString('en-US')} bytes`}>
      {q.value}
      <span className="unit">{q.unit}</span>
    </span>
  );
}

export function Rate({ n }: { n: number }) {
  const q = rateParts(n);
  return (
    <span className="num qty">
      {q.value}
      <span className="unit">{q.unit}</span>
    </span>
  );
}

export function CopyButton({ text, label = 'Copy', what }: { text: string; label?: string; what: string }) {
  const [state, setState] = useState<'idle' | 'done' | 'failed'>('idle');
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(text);
      setState('done');
    } catch {
      setState('failed');
    }
    setTimeout(() => setState('idle'), 2000);
  };
  return (
    <button type="button" className="btn btn-small" onClick={() => void copy()} aria-label={`${label} ${what}`}>
      {state === 'done' ? 'Copied ✓' : state === 'failed' ? 'Select and copy' : label}
    </button>
  );
}

export function Panel({
  title,
  actions,
  children,
  className,
  id,
}: {
  title?: ReactNode;
  actions?: ReactNode;
  children: ReactNode;
  className?: string;
  id?: string;
}) {
  return (
    <section className={`panel ${className ?? ''}`} aria-labelledby={title && id ? `${id}-title` : undefined}>
      {(title || actions) && (
        <header className="panel-head">
          {title && <h2 id={id ? `${id}-title` : undefined}>{title}</h2>}
          {actions && <div className="panel-actions">{actions}</div>}
        </header>
      )}
      {children}
    </section>
  );
}

export function Empty({ title, children }: { title: string; children?: ReactNode }) {
  return (
    <div className="empty">
      <p className="empty-title">{title}</p>
      {children && <div className="empty-body">{children}</div>}
    </div>
  );
}

export function ErrorNote({ children }: { children: ReactNode }) {
  return (
    <div className="note note-bad" role="alert">
      <span aria-hidden="true">✕ </span>
      {children}
    </div>
  );
}

export function Stat({ label, children, sub }: { label: string; children: ReactNode; sub?: ReactNode }) {
  return (
    <div className="stat">
      <div className="stat-label">{label}</div>
      <div className="stat-value">{children}</div>
      {sub && <div className="stat-sub">{sub}</div>}
    </div>
  );
}

export function ScreenHeader({ title, lead, actions }: { title: string; lead?: ReactNode; actions?: ReactNode }) {
  return (
    <header className="screen-head">
      <div>
        {/* Focusable from script only: where focus goes when the control that had it is gone (after an apply). */}
        <h1 tabIndex={-1}>{title}</h1>
        {lead && <p className="lead">{lead}</p>}
      </div>
      {actions && <div className="screen-actions">{actions}</div>}
    </header>
  );
}

/**
 * A key path, reason or file path that may wrap: break opportunities after `.`, `_`, `/`,
 * `[` and `]` (never inside a word), so `workers[0].multimodal_tensor_transport` wraps as
 * `workers[0].multimodal_` / `tensor_transport`. Copying the text copies it unchanged.
 */
export function Breakable({ text }: { text: string }) {
  const parts = text.split(/(?<=[._/\][])/);
  return (
    <>
      {parts.map((p, i) => (
        <Fragment key={i}>
          {i > 0 && <wbr />}
          {p}
        </Fragment>
      ))}
    </>
  );
}

/**
 * Backend prose (a remedy, an explanation) with its command-line flags kept whole:
 * `--ipc=host` never wraps as `-` / `-ipc=host`.
 */
export function Prose({ text }: { text: string }) {
  const parts = text.split(/(--[a-z][\w-]*(?:=[^\s,;)]+)?)/);
  return (
    <>
      {parts.map((p, i) =>
        i % 2 === 1 ? (
          <span key={i} className="nowrap">
            {p}
          </span>
        ) : (
          <Fragment key={i}>{p}</Fragment>
        ),
      )}
    </>
  );
}

/** A tensor's leg of a disaggregated request (encode, prefill, decode), as Traffic and Doctor tag it. */
export function LegTag({ leg }: { leg: string }) {
  return (
    <span className="tag-leg" data-leg={leg}>
      {leg}
    </span>
  );
}
