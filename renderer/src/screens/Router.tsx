// Router settings: the router-level mode and threshold (with "inherit" meaning: not set
// here, so the environment or the built-in default decides), the other live settings, the
// settings only a restart changes, the environment layer as read at start (read-only, with
// deprecated-alias badges and invalid-value warnings), and the built-in defaults. Edits go
// into the draft; nothing reaches the router before Review & apply.
import { useId } from 'react';
import { useTypedText } from '../lib/useTypedText.ts';
import { DisaggregationSettings } from '../components/DisaggregationSettings.tsx';
import { GenericSettings } from '../components/GenericSettings.tsx';
import { Badge, Breakable, ErrorNote, Panel, ScreenHeader } from '../components/ui.tsx';
import { setRouterField, typedNumber } from '../lib/draft.ts';
import { formatBytes } from '../lib/format.ts';
import { TRANSPORT_KNOBS } from '../lib/vocab.ts';
import { ModeChoice, ThresholdChoice } from '../components/TransportChoices.tsx';
import { StartFlagNote } from '../components/StartFlagNote.tsx';
import { useConfig } from '../stores/config.ts';
import { useOverview } from '../stores/overview.ts';
import { fieldProblem, RouterConfigSchema, type ConfigView } from '../../../core/console/contract.ts';

function Origin({ origin, unset = 'built-in default' }: { origin: string | undefined; unset?: string }) {
  return <span className="origin">from {origin ?? unset}</span>;
}

export function showValue(v: unknown): string {
  if (v === undefined || v === null) return 'unset';
  if (Array.isArray(v)) return v.length ? v.join(', ') : 'none';
  if (typeof v === 'object')
    return Object.entries(v as Record<string, unknown>)
      .map(([a, b]) => `${a}=${String(b)}`)
      .join(', ');
  return String(v);
}

/** What the router would use with this knob unset: the env layer, else the default. */
function inheritedValue(view: ConfigView, knob: keyof typeof TRANSPORT_KNOBS): { value: string; from: string } {
  const env = view.env[knob];
  if (env.value !== undefined)
    return { value: String(env.value), from: env.source === 'env_legacy' ? `${env.legacy.name} (deprecated alias)` : env.canonical.name };
  const d = TRANSPORT_KNOBS[knob].defaultValue;
  return { value: String(d), from: 'built-in default' };
}

/** A number of seconds, into the draft as typed (typedNumber's rule), checked by the schema as typed, following Discard. */
function NumberSetting({
  label,
  keyName,
  value,
  onChange,
  origin,
  unit,
}: {
  label: string;
  keyName: 'request_timeout_secs' | 'health_check_interval_secs';
  value: number | string;
  onChange: (n: number | string | undefined) => void;
  origin: string | undefined;
  unit: string;
}) {
  const id = useId();
  const [text, setText] = useTypedText(value);
  const err = fieldProblem(RouterConfigSchema.shape[keyName], keyName, typedNumber(text));
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      <div className="bytefield-row">
        <input
          id={id}
          inputMode="decimal"
          className={`input num ${err ? 'invalid' : ''}`}
          value={text}
          aria-invalid={err ? true : undefined}
          aria-describedby={`${id}-hint`}
          onChange={(e) => {
            setText(e.target.value);
            onChange(typedNumber(e.target.value));
          }}
        />
        <span className="unit-label">{unit}</span>
      </div>
      <div id={`${id}-hint`} className={err ? 'field-error' : 'field-hint'}>
        {err ?? <Origin origin={origin} />}
      </div>
    </div>
  );
}

export function RouterScreen() {
  const view = useConfig((s) => s.view);
  const draft = useConfig((s) => s.draft);
  const issues = useConfig((s) => s.issues);
  const edit = useConfig((s) => s.edit);
  const overview = useOverview((s) => s.data);
  if (!view) return <p className="muted">Loading…</p>;
  const cfg = draft ?? view.config;
  const inhMode = inheritedValue(view, 'multimodal_tensor_transport');
  const inhThr = inheritedValue(view, 'multimodal_shm_min_bytes');
  const routerIssues = issues.filter((i) => !i.path.startsWith('workers'));

  return (
    <>
      <ScreenHeader
        title="Router settings"
        lead="The router-level transport settings apply to every worker without its own override. Changes go into a draft; review and apply them from the bar above."
      />
      {routerIssues.length > 0 && (
        <ErrorNote>
          {routerIssues.map((i) => (
            <div key={i.path}>
              <code>{i.path}</code>: {i.message}
            </div>
          ))}
        </ErrorNote>
      )}
      <div className="grid grid-2">
        <Panel
          title="Transport mode"
          id="mode"
          actions={
            <Origin
              unset="nowhere: inherits"
              origin={
                cfg.multimodal_tensor_transport === view.config.multimodal_tensor_transport ? view.origins.multimodal_tensor_transport : 'draft (not applied)'
              }
            />
          }
        >
          <ModeChoice
            name="router-mode"
            legend="multimodal_tensor_transport"
            value={cfg.multimodal_tensor_transport}
            inherit={`not set here: ${inhMode.value} from ${inhMode.from}`}
            onChange={(m) => edit((d) => setRouterField(d, 'multimodal_tensor_transport', m))}
          />
          <StartFlagNote view={view} setting="multimodal_tensor_transport" />
        </Panel>
        <Panel
          title="SHM threshold"
          id="threshold"
          actions={
            <Origin
              unset="nowhere: inherits"
              origin={cfg.multimodal_shm_min_bytes === view.config.multimodal_shm_min_bytes ? view.origins.multimodal_shm_min_bytes : 'draft (not applied)'}
            />
          }
        >
          <ThresholdChoice
            label="multimodal_shm_min_bytes"
            value={cfg.multimodal_shm_min_bytes}
            inherit={`not set here: ${Number(inhThr.value).toLocaleString('en-US')} bytes (${formatBytes(Number(inhThr.value))}) from ${inhThr.from}`}
            onChange={(n) => edit((d) => setRouterField(d, 'multimodal_shm_min_bytes', n))}
          />
          <p className="muted small">
            A tensor strictly smaller than the threshold stays inline. The gateway ships 64 KiB; Doctor → Calibrate measures this box's crossover.
          </p>
          <StartFlagNote view={view} setting="multimodal_shm_min_bytes" />
        </Panel>
      </div>

      <div className="grid grid-2">
        <Panel title="Routing" id="routing">
          <div className="field">
            <label htmlFor="policy">Worker selection policy</label>
            <select id="policy" className="select" value={cfg.policy} onChange={(e) => edit((d) => ({ ...d, policy: e.target.value as typeof d.policy }))}>
              <option value="round_robin">round_robin: each request to the next worker</option>
              <option value="least_load">least_load: the worker with the fewest requests in flight</option>
            </select>
            <div className="field-hint">
              <Origin origin={view.origins.policy} />
            </div>
            <StartFlagNote view={view} setting="policy" />
          </div>
          <NumberSetting
            label="Request timeout"
            keyName="request_timeout_secs"
            unit="s"
            value={cfg.request_timeout_secs}
            origin={view.origins.request_timeout_secs}
            onChange={(n) => edit((d) => setRouterField(d, 'request_timeout_secs', n))}
          />
          <StartFlagNote view={view} setting="request_timeout_secs" />
          <NumberSetting
            label="Health-check interval"
            keyName="health_check_interval_secs"
            unit="s"
            value={cfg.health_check_interval_secs}
            origin={view.origins.health_check_interval_secs}
            onChange={(n) => edit((d) => setRouterField(d, 'health_check_interval_secs', n))}
          />
          <StartFlagNote view={view} setting="health_check_interval_secs" />
        </Panel>
        <Panel title="Only a restart changes these" id="restart">
          <table className="table">
            <thead>
              <tr>
                <th scope="col">Setting</th>
                <th scope="col">Value</th>
                <th scope="col">From</th>
              </tr>
            </thead>
            <tbody>
              {view.restartOnly.map((k) => (
                <tr key={k}>
                  <td className="mono">{k}</td>
                  <td className="mono">{String((view.config as Record<string, unknown>)[k] ?? '(bundled demo model)')}</td>
                  <td className="muted">{view.origins[k] ?? 'default'}</td>
                </tr>
              ))}
            </tbody>
          </table>
          <p className="muted small">An apply that changes them is refused; restart the router with the new value.</p>
        </Panel>
      </div>

      <Panel title="Serving mode" id="disaggregation">
        <DisaggregationSettings view={view} cfg={cfg} edit={edit} />
      </Panel>

      <Panel title="Limits and other live settings" id="other">
        <GenericSettings
          view={view}
          config={cfg}
          edit={edit}
          effective={{
            multimodal_shm_max_outstanding_bytes: overview?.files.maxOutstandingBytes,
            multimodal_pixel_cache_mb: overview?.pixelCache?.budgetBytes,
          }}
        />
      </Panel>

      <Panel title="Environment layer (read once at start, read-only)" id="env">
        <table className="table" data-testid="env-table">
          <thead>
            <tr>
              <th scope="col">Setting</th>
              <th scope="col">Variable</th>
              <th scope="col">Raw value</th>
              <th scope="col">State</th>
              <th scope="col">Contributes</th>
            </tr>
          </thead>
          <tbody>
            {(['multimodal_tensor_transport', 'multimodal_shm_min_bytes'] as const).flatMap((knob) => {
              const r = view.env[knob];
              return [r.canonical, r.legacy].map((v, i) => {
                const legacy = i === 1;
                const used = r.source === (legacy ? 'env_legacy' : 'env');
                return (
                  <tr key={v.name}>
                    <td className="mono">{i === 0 ? <Breakable text={knob} /> : ''}</td>
                    <td className="mono">
                      <Breakable text={v.name} /> {legacy && <Badge tone="warn">deprecated alias</Badge>}
                    </td>
                    <td className="mono">{v.raw === undefined ? <span className="muted">unset</span> : JSON.stringify(v.raw)}</td>
                    <td>
                      {v.state === 'invalid' ? (
                        <Badge tone="bad">invalid, ignored</Badge>
                      ) : v.state === 'valid' ? (
                        <Badge tone="ok">valid</Badge>
                      ) : v.state === 'not_consulted' ? (
                        <Badge tone="neutral">not consulted</Badge>
                      ) : (
                        <span className="muted">{v.state}</span>
                      )}
                    </td>
                    <td className="mono">{used ? <strong>{String(r.value)}</strong> : <span className="muted">—</span>}</td>
                  </tr>
                );
              });
            })}
          </tbody>
        </table>
        {view.env.warnings.length > 0 && (
          <ul className="warnings compact">
            {view.env.warnings.map((w) => (
              <li key={w}>
                <Badge tone="warn">warning</Badge> <span>{w}</span>
              </li>
            ))}
          </ul>
        )}
        <p className="muted small">
          Environment values rank below the router config and above the built-in defaults. A canonical variable that is set (even invalid) means its deprecated
          alias is not consulted.
        </p>
      </Panel>

      <Panel title="Built-in defaults of the transport" id="defaults">
        <dl className="kv kv-wide">
          <div>
            <dt className="mono">multimodal_tensor_transport</dt>
            <dd className="mono">{TRANSPORT_KNOBS.multimodal_tensor_transport.defaultValue}</dd>
          </div>
          <div>
            <dt className="mono">multimodal_shm_min_bytes</dt>
            <dd className="mono">
              {TRANSPORT_KNOBS.multimodal_shm_min_bytes.defaultValue.toLocaleString('en-US')} B (
              {formatBytes(TRANSPORT_KNOBS.multimodal_shm_min_bytes.defaultValue)})
            </dd>
          </div>
          <div>
            <dt className="mono">policy</dt>
            <dd className="mono">{showValue(view.defaults.policy)}</dd>
          </div>
          <div>
            <dt className="mono">request_timeout_secs</dt>
            <dd className="mono">{showValue(view.defaults.request_timeout_secs)} s</dd>
          </div>
          <div>
            <dt className="mono">health_check_interval_secs</dt>
            <dd className="mono">{showValue(view.defaults.health_check_interval_secs)} s</dd>
          </div>
        </dl>
        <p className="muted small">Used when no layer above sets a value. The defaults of the other settings are in the table above.</p>
      </Panel>
    </>
  );
}
