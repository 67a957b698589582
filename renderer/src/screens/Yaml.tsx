// YAML: import a configuration as text (checked with config.importYaml as you type; every
// error at its line and column, nothing applied), review its diff, apply it with the
// revision check; export the applied configuration (download as router.yaml, or copy); and
// export for the gateway (its own command line plus one POST /workers body per worker).
import { Fragment, useEffect, useMemo, useRef, useState } from 'react';
import type { CommandOutput, ConfigDraft, ConfigIssue } from '../../../core/console/contract.ts';
import { CopyButton, ErrorNote, Panel, Prose, ScreenHeader, Badge } from '../components/ui.tsx';
import { DiffList } from '../components/DiffList.tsx';
import { client, describeError } from '../stores/client.ts';
import { useConfig } from '../stores/config.ts';
import { useUi } from '../stores/ui.ts';
import { DriftPanel } from '../components/DriftPanel.tsx';

type Import = CommandOutput<'config.importYaml'>;

const showRaw = (v: unknown) => (v === undefined ? 'default' : typeof v === 'string' ? v : JSON.stringify(v));

export function downloadText(text: string, filename: string, type = 'application/yaml'): void {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = document.createElement('a');
  a.href = url;
  a.download = filename;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

function YamlEditor({ text, onChange, issues }: { text: string; onChange: (t: string) => void; issues: ConfigIssue[] }) {
  const area = useRef<HTMLTextAreaElement>(null);
  const gutter = useRef<HTMLDivElement>(null);
  const lines = text.split('\n').length;
  const bad = useMemo(() => new Map(issues.filter((i) => i.line).map((i) => [i.line!, i])), [issues]);
  const jump = (line: number, column = 1) => {
    const a = area.current;
    if (!a) return;
    const offsets = text
      .split('\n')
      .slice(0, line - 1)
      .reduce((n, l) => n + l.length + 1, 0);
    a.focus();
    a.setSelectionRange(offsets + column - 1, offsets + (text.split('\n')[line - 1]?.length ?? 0));
    const lh = parseFloat(getComputedStyle(a).lineHeight) || 20;
    a.scrollTop = Math.max(0, (line - 3) * lh);
  };
  return (
    <>
      <div className="editor">
        <div className="gutter" ref={gutter} aria-hidden="true">
          {Array.from({ length: lines }, (_, i) => (
            <div key={i} className={bad.has(i + 1) ? 'gutter-bad' : undefined}>
              {bad.has(i + 1) ? '✕ ' : ''}
              {i + 1}
            </div>
          ))}
        </div>
        <textarea
          ref={area}
          className="editor-text mono"
          aria-label="YAML to import"
          aria-describedby="yaml-issues"
          aria-invalid={issues.length > 0 || undefined}
          spellCheck={false}
          value={text}
          onChange={(e) => onChange(e.target.value)}
          onScroll={(e) => {
            if (gutter.current) gutter.current.scrollTop = e.currentTarget.scrollTop;
          }}
        />
      </div>
      <div id="yaml-issues">
        {issues.length > 0 && (
          <ul className="issues" data-testid="yaml-issues">
            {issues.map((i, k) => (
              <li key={k}>
                <button type="button" className="btn btn-small btn-ghost" onClick={() => i.line && jump(i.line, i.column)} disabled={!i.line}>
                  {i.line ? `line ${i.line}${i.column ? `:${i.column}` : ''}` : 'no line'}
                </button>
                <span>
                  <span aria-hidden="true">✕ </span>
                  {i.path && <code>{i.path}</code>} {i.message}
                </span>
              </li>
            ))}
          </ul>
        )}
      </div>
    </>
  );
}

function ImportPanel() {
  const view = useConfig((s) => s.view);
  const text = useConfig((s) => s.importText);
  const setText = useConfig((s) => s.setImportText);
  const [check, setCheck] = useState<Import | null>(null);
  const [error, setError] = useState<string | null>(null);
  const seq = useRef(0);

  useEffect(() => {
    if (!text.trim()) {
      setCheck(null);
      return;
    }
    const n = ++seq.current;
    const t = setTimeout(() => {
      client()
        .call('config.importYaml', { text })
        .then((r) => {
          if (n === seq.current) {
            setCheck(r);
            setError(null);
          }
        })
        .catch((err: unknown) => n === seq.current && setError(describeError(err)));
    }, 250);
    return () => clearTimeout(t);
  }, [text, view?.revision]);

  const loadCurrent = async () => {
    const r = await client().call('config.exportYaml', {});
    setText(r.yaml);
  };

  // The backend takes an imported YAML as written, except that a setting given by a flag at
  // start which the YAML leaves out keeps its running value. A YAML that writes a setting only
  // a restart changes (host, port, model_path) differently would have the whole apply refused:
  // the running values of those are kept, the apply sends the YAML's configuration with them,
  // and the screen says so.
  const restartChanges = check?.ok && view ? check.diff.filter((d) => view.restartOnly.includes(d.path)) : [];
  const diff = check?.ok ? check.diff.filter((d) => !restartChanges.includes(d)) : [];

  const review = () => {
    if (!view || !check?.ok || !check.draft) return;
    const expectedRevision = view.revision;
    const yaml = text;
    const keep = restartChanges.map((d) => d.path);
    const running: Record<string, unknown> = view.config;
    const draft: ConfigDraft = { ...check.draft, ...Object.fromEntries(keep.map((k) => [k, running[k]])) };
    useUi.getState().requestReview({
      title: 'Apply imported YAML',
      intro: `The imported configuration replaces revision ${expectedRevision} as a whole.${keep.length ? ` The running ${keep.join(', ')} ${keep.length === 1 ? 'is' : 'are'} kept: only a restart changes ${keep.length === 1 ? 'it' : 'them'}.` : ''}`,
      ...(keep.length ? { proposed: draft } : { proposed: { yaml } }),
      confirmLabel: 'Apply YAML',
      run: () => (keep.length ? client().call('config.apply', { draft, expectedRevision }) : client().call('config.apply', { yaml, expectedRevision })),
      undo: { toRevision: expectedRevision, config: view.config },
    });
  };

  return (
    <Panel
      title="Import"
      id="import"
      actions={
        <>
          <label className="btn btn-small file-btn">
            Open file…
            <input
              type="file"
              accept=".yaml,.yml,text/yaml"
              className="sr-only"
              onChange={async (e) => {
                const f = e.target.files?.[0];
                if (f) setText(await f.text());
                e.target.value = '';
              }}
            />
          </label>
          <button type="button" className="btn btn-small" onClick={() => void loadCurrent()}>
            Start from the applied config
          </button>
        </>
      }
    >
      <YamlEditor text={text} onChange={setText} issues={check?.issues ?? []} />
      {error && <ErrorNote>{error}</ErrorNote>}
      <div className="import-status" aria-live="polite" data-testid="import-status">
        {!text.trim() ? (
          <span className="muted">
            Paste YAML, open a file, or start from the applied config. It is checked as you type; nothing is applied before you review it.
          </span>
        ) : !check ? (
          <span className="muted">Checking…</span>
        ) : check.ok ? (
          <>
            <Badge tone="ok">valid</Badge> {diff.length} change{diff.length === 1 ? '' : 's'} against revision {view?.revision}
          </>
        ) : (
          <>
            <Badge tone="bad">
              {check.issues.length} error{check.issues.length === 1 ? '' : 's'}
            </Badge>{' '}
            nothing can be applied until they are fixed
          </>
        )}
      </div>
      {restartChanges.length > 0 && (
        <div className="note note-warn" data-testid="restart-only">
          <span aria-hidden="true">! </span>
          This YAML{' '}
          {restartChanges.map((d, i) => (
            <Fragment key={d.path}>
              {i > 0 && ', '}
              {d.kind === 'removed' || d.after === (view?.defaults as Record<string, unknown> | undefined)?.[d.path] ? 'leaves out ' : 'changes '}
              <code>{d.path}</code> ({showRaw(d.before)} → {showRaw(d.after)})
            </Fragment>
          ))}
          , which only a restart changes: the running value{restartChanges.length === 1 ? ' is' : 's are'} kept (the apply sends{' '}
          {restartChanges.map((d, i) => (
            <Fragment key={d.path}>
              {i > 0 && ', '}
              {d.before === undefined ? (
                <>
                  no <code>{d.path}</code>
                </>
              ) : (
                <code>
                  {d.path}: {showRaw(d.before)}
                </code>
              )}
            </Fragment>
          ))}
          ). To change {restartChanges.length === 1 ? 'it' : 'them'}, restart the router with the new value{restartChanges.length === 1 ? '' : 's'}.
        </div>
      )}
      {check?.ok && <DiffList diff={diff} caption="What applying this YAML would change" empty="Identical to the applied configuration." />}
      <div className="row-actions">
        <button type="button" className="btn btn-primary" disabled={!check?.ok || diff.length === 0} onClick={review}>
          Review and apply…
        </button>
      </div>
    </Panel>
  );
}

function ExportPanel() {
  const revision = useConfig((s) => s.view?.revision);
  const [yaml, setYaml] = useState<{ yaml: string; revision: number } | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    client()
      .call('config.exportYaml', {})
      .then(setYaml)
      .catch((err: unknown) => setError(describeError(err)));
  }, [revision]);
  return (
    <Panel
      title={`Export (revision ${yaml?.revision ?? '…'})`}
      id="export"
      actions={
        yaml && (
          <>
            <CopyButton text={yaml.yaml} what="exported YAML" />
            <button type="button" className="btn btn-small btn-primary" onClick={() => downloadText(yaml.yaml, 'router.yaml')}>
              Download router.yaml
            </button>
          </>
        )
      }
    >
      {error && <ErrorNote>{error}</ErrorNote>}
      <pre className="code" tabIndex={0} aria-label="Exported YAML">
        {yaml?.yaml ?? 'Loading…'}
      </pre>
      <p className="muted small">
        Normalized: schema key order, sorted labels; the embedded reference worker is left out. The same config always gives the same bytes.
      </p>
    </Panel>
  );
}

function GatewayPanel() {
  const revision = useConfig((s) => s.view?.revision);
  const [g, setG] = useState<CommandOutput<'config.exportForGateway'> | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    client()
      .call('config.exportForGateway', {})
      .then(setG)
      .catch((err: unknown) => setError(describeError(err)));
  }, [revision]);
  return (
    <Panel title="Export for the gateway (smg)" id="gateway">
      {error && <ErrorNote>{error}</ErrorNote>}
      {g && (
        <>
          <div className="field-label">Command line</div>
          <div className="codeline">
            <code data-testid="gateway-command">
              {g.command.split(' ').map((word, i) => (
                <Fragment key={i}>
                  {i > 0 && ' '}
                  <span className="nowrap">{word}</span>
                </Fragment>
              ))}
            </code>
            <CopyButton text={g.command} what="gateway command line" />
          </div>
          <p className="note note-info small" data-testid="gateway-usage">
            <strong>Which to use:</strong> {g.usage}
          </p>
          <div className="field-label">POST /workers, one per worker</div>
          {g.workers.length === 0 ? (
            <p className="muted">No worker to register (the embedded reference worker is not part of a real deployment).</p>
          ) : (
            <table className="table compact gateway">
              <thead>
                <tr>
                  <th scope="col">Worker</th>
                  <th scope="col">Body</th>
                  <th scope="col">
                    <span className="sr-only">Copy</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {g.workers.map((w) => (
                  <tr key={w.url}>
                    <td className="mono">{w.url}</td>
                    <td>
                      <dl className="kv">
                        {Object.entries(w.body).map(([k, v]) => (
                          <div key={k}>
                            <dt>{k}</dt>
                            <dd className="mono">
                              {typeof v === 'object' && v !== null
                                ? Object.entries(v)
                                    .map(([a, b]) => `${a}=${String(b)}`)
                                    .join(', ') || '{}'
                                : String(v)}
                            </dd>
                          </div>
                        ))}
                      </dl>
                    </td>
                    <td className="actions">
                      <CopyButton text={w.curl} label="Copy curl" what={`curl for ${w.url}`} />
                      <CopyButton text={JSON.stringify(w.body, null, 2)} label="Copy JSON" what={`JSON body for ${w.url}`} />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
          {g.notes.length > 0 && (
            <>
              <div className="field-label">What the gateway cannot express</div>
              <ul className="notes">
                {g.notes.map((n) => (
                  <li key={n}>
                    <Prose text={n} />
                  </li>
                ))}
              </ul>
            </>
          )}
        </>
      )}
    </Panel>
  );
}

export function YamlScreen() {
  return (
    <>
      <ScreenHeader
        title="YAML"
        lead="Configuration as code: import with positioned errors and a reviewed apply, export the applied revision, or hand it to the gateway."
      />
      <DriftPanel />
      <ImportPanel />
      <ExportPanel />
      <GatewayPanel />
    </>
  );
}
