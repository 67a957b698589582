// A diff as a table an operator reads before applying: what, the change, before and after.
// Worker entries read as their url and fields, never as raw JSON.
import type { DiffEntry } from '../../../core/console/contract.ts';
import { parseDiffPath } from '../lib/draft.ts';
import { formatBytes } from '../lib/format.ts';
import { Breakable } from './ui.tsx';

function scalar(key: string, v: unknown): string {
  if (v === undefined) return 'unset';
  if (typeof v === 'number' && /shm_min_bytes$/.test(key)) return `${v.toLocaleString('en-US')} B (${formatBytes(v)})`;
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (v === null) return 'null';
  return '';
}

function Value({ path, v }: { path: string; v: unknown }) {
  if (v === undefined) return <span className="muted">unset (inherit)</span>;
  if (v && typeof v === 'object' && !Array.isArray(v)) {
    const entries = Object.entries(v as Record<string, unknown>).filter(([, x]) => !(x && typeof x === 'object' && Object.keys(x).length === 0));
    return (
      <dl className="kv">
        {entries.map(([k, x]) => (
          <div key={k}>
            <dt>
              <Breakable text={k} />
            </dt>
            <dd>
              {x && typeof x === 'object'
                ? Object.entries(x as Record<string, unknown>)
                    .map(([a, b]) => `${a}=${String(b)}`)
                    .join(', ')
                : scalar(k, x)}
            </dd>
          </div>
        ))}
      </dl>
    );
  }
  return <code>{scalar(path, v)}</code>;
}

export function describePath(path: string): { scope: string; key: string } {
  const p = parseDiffPath(path);
  if ('key' in p) return { scope: 'router', key: p.key };
  return { scope: p.url, key: p.rest.length ? p.rest.join('.') : '(whole entry)' };
}

const KIND_WORD = { added: 'set', removed: 'unset', changed: 'changed' } as const;

export function DiffList({ diff, caption, empty = 'No changes.' }: { diff: readonly DiffEntry[]; caption?: string; empty?: string }) {
  if (diff.length === 0) return <p className="muted">{empty}</p>;
  return (
    <table className="table diff">
      {caption && <caption>{caption}</caption>}
      <thead>
        <tr>
          <th scope="col">Scope</th>
          <th scope="col">Setting</th>
          <th scope="col">Change</th>
          <th scope="col">Before</th>
          <th scope="col">After</th>
        </tr>
      </thead>
      <tbody>
        {diff.map((d) => {
          const { scope, key } = describePath(d.path);
          const whole = key === '(whole entry)';
          return (
            <tr key={d.path} className={`diff-${d.kind}`}>
              <td className="mono wrap">{scope}</td>
              <td className="mono">{whole ? (d.kind === 'added' ? 'worker added' : d.kind === 'removed' ? 'worker removed' : 'worker changed') : key}</td>
              <td>
                <span className={`change change-${d.kind}`}>
                  {whole ? (d.kind === 'added' ? 'added' : d.kind === 'removed' ? 'removed' : 'changed') : KIND_WORD[d.kind]}
                </span>
              </td>
              <td className="before">{d.kind === 'added' ? <span className="muted">—</span> : <Value path={key} v={d.before} />}</td>
              <td className="after">{d.kind === 'removed' ? <span className="muted">—</span> : <Value path={key} v={d.after} />}</td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}
