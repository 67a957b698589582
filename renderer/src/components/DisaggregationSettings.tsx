// The router's serving mode (docs/router.md, "Disaggregated serving"): none, pd or epd, and
// the policy each role's workers are picked by. The roles themselves are the workers'
// (worker_type, bootstrap_port: Workers → Edit); this panel counts them in the draft so an
// operator sees what the mode needs before applying, and the validation's own message
// (the contract's, with the key it names) shows in the screen's error note above.
import { useId } from 'react';
import { DISAGGREGATION_MODES, ENCODE_POLICIES, POLICIES, ROLES_ROUTED, type ConfigView, type RouterConfig } from '../../../core/console/contract.ts';
import { setRouterField } from '../lib/draft.ts';
import { StartFlagNote } from './StartFlagNote.tsx';

const MODE_WORDS: Record<RouterConfig['disaggregation'], string> = {
  none: 'none: each request to one regular worker',
  pd: 'pd: a prefill and a decode worker per request',
  epd: 'epd: every image to an encode worker, then prefill and decode',
};

const POLICY_WORDS: Record<string, string> = {
  round_robin: 'round_robin: each request to the next worker',
  least_load: 'least_load: the worker with the fewest requests in flight',
};
const ENCODE_POLICY_WORDS: Record<string, string> = {
  consistent_hashing: 'consistent_hashing: an image always to the same encode worker (by its content hash)',
  round_robin: 'round_robin: each image to the next encode worker',
  random: 'random: each image to any encode worker',
};

function origin(view: ConfigView, cfg: RouterConfig, key: Key): string {
  if (cfg[key] !== view.config[key]) return 'draft (not applied)';
  return view.origins[key] ?? (cfg[key] === undefined ? 'nowhere: not set' : 'built-in default');
}

type Key = 'disaggregation' | 'prefill_policy' | 'decode_policy' | 'encode_policy';

/** One of the panel's settings: a select of its choices (with an unset choice when given), where its value came from, and whether the mode uses it. */
function SettingSelect({
  view,
  cfg,
  edit,
  setting,
  label,
  choices,
  unset,
  unusedUnder,
}: {
  view: ConfigView;
  cfg: RouterConfig;
  edit: (f: (d: RouterConfig) => RouterConfig) => void;
  setting: Key;
  label: string;
  choices: ReadonlyArray<readonly [string, string]>;
  unset?: string;
  unusedUnder?: string;
}) {
  const id = useId();
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      <select
        id={id}
        className="select"
        value={cfg[setting] ?? ''}
        onChange={(e) => edit((d) => setRouterField(d, setting, (e.target.value || undefined) as never))}
      >
        {unset !== undefined && <option value="">{unset}</option>}
        {choices.map(([value, words]) => (
          <option key={value} value={value}>
            {words}
          </option>
        ))}
      </select>
      <div className="field-hint">
        <span className="origin">from {origin(view, cfg, setting)}</span>
        {unusedUnder ? <> · not used under {unusedUnder}</> : null}
      </div>
      <StartFlagNote view={view} setting={setting} />
    </div>
  );
}

export function DisaggregationSettings({ view, cfg, edit }: { view: ConfigView; cfg: RouterConfig; edit: (f: (d: RouterConfig) => RouterConfig) => void }) {
  const mode = cfg.disaggregation;
  const counts = ROLES_ROUTED[mode].map((role) => ({ role, n: cfg.workers.filter((w) => w.worker_type === role).length }));
  const others = cfg.workers.filter((w) => !ROLES_ROUTED[mode].includes(w.worker_type)).length;
  const common = { view, cfg, edit };
  const policies = POLICIES.map((p) => [p, POLICY_WORDS[p] ?? p] as const);
  const unsetPolicy = `unset: as the worker selection policy (${cfg.policy})`;
  return (
    <>
      <SettingSelect
        {...common}
        setting="disaggregation"
        label="Serving mode (disaggregation)"
        choices={DISAGGREGATION_MODES.map((m) => [m, MODE_WORDS[m]] as const)}
      />
      <p className="small" data-testid="role-counts">
        Workers for {mode}:{' '}
        {counts.map((c, i) => (
          <span key={c.role}>
            {i > 0 && ', '}
            <span className={c.n === 0 && mode !== 'none' ? 'field-error' : undefined}>
              <span className="num">{c.n}</span> {c.role}
            </span>
          </span>
        ))}
        {others > 0 && (
          <>
            {' '}
            ·{' '}
            <span className={mode === 'none' ? 'muted' : 'field-error'}>
              <span className="num">{others}</span> of another role, which {mode} does not route to
            </span>
          </>
        )}
        . Roles and bootstrap ports are set per worker (Workers → Edit).
      </p>
      <SettingSelect
        {...common}
        setting="prefill_policy"
        label="Prefill worker policy"
        choices={policies}
        unset={unsetPolicy}
        unusedUnder={mode === 'none' ? mode : undefined}
      />
      <SettingSelect
        {...common}
        setting="decode_policy"
        label="Decode worker policy"
        choices={policies}
        unset={unsetPolicy}
        unusedUnder={mode === 'none' ? mode : undefined}
      />
      <SettingSelect
        {...common}
        setting="encode_policy"
        label="Encode worker policy"
        choices={ENCODE_POLICIES.map((p) => [p, ENCODE_POLICY_WORDS[p] ?? p] as const)}
        unusedUnder={mode === 'epd' ? undefined : mode}
      />
    </>
  );
}
