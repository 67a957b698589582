// A draft is what the operator is editing: a configuration as data (the forms) or as YAML (the
// YAML screen, an imported file). Every command that takes one reads it here, so a YAML text
// means the same thing to validate, diff, resolve, import and apply:
//   - with no worker in it, the embedded reference worker stays (it is never written out, so
//     an exported file has none);
//   - a setting a start flag gave that the YAML leaves out keeps its running value (an
//     exported file has them all; a hand-written one need not restate `--port`).
import { ConfigError } from '../config/errors.ts';
import { carryOrigins } from '../config/origins.ts';
import type { RouterConfig } from '../config/schema.ts';
import type { ConfigSnapshot } from '../config/store.ts';
import { checkRouterConfig } from '../config/validate.ts';
import { parseConfigYaml } from '../config/yaml.ts';
import { ContractError, type ConfigIssue, type Draft } from './contract.ts';
import type { ConsoleState } from './state.ts';

/** A draft as a config, or every issue (YAML issues carry line:column). */
export function readDraft(draft: Draft): { ok: true; config: RouterConfig } | { ok: false; issues: ConfigIssue[] } {
  if ('yaml' in draft) {
    try {
      return { ok: true, config: parseConfigYaml(draft.yaml, 'draft.yaml').config };
    } catch (err) {
      if (err instanceof ConfigError) return { ok: false, issues: err.issues };
      throw err;
    }
  }
  const checked = checkRouterConfig(draft.draft);
  return checked.ok ? { ok: true, config: checked.config } : { ok: false, issues: checked.issues.map(({ path, message }) => ({ path, message })) };
}

/** A draft as a config, or invalid_config listing every issue. */
export function draftConfig(draft: Draft): RouterConfig {
  const r = readDraft(draft);
  if (!r.ok)
    throw new ContractError(
      'invalid_config',
      `the draft is not a valid configuration: ${r.issues.map((i) => i.message).join('; ')}`,
      r.issues[0]?.path,
      r.issues,
    );
  return r.config;
}

/** A draft's origins: what is unchanged keeps its origin, the rest is the draft's own. */
export function draftOrigins(s: ConfigSnapshot, draft: RouterConfig) {
  return carryOrigins(s.config, s.origins, draft, 'draft (not applied)');
}

/** A YAML text the operator gives, as the running router takes it (see the rules above); undefined when it is not a valid configuration (readDraft says why). */
export function yamlAsDraft(state: ConsoleState, text: string): RouterConfig | undefined {
  let parsed;
  try {
    parsed = parseConfigYaml(text, 'draft.yaml');
  } catch (err) {
    if (err instanceof ConfigError) return undefined;
    throw err;
  }
  const running = state.store.current().config;
  const next: Record<string, unknown> = { ...state.keepEmbedded(parsed.config) };
  for (const f of state.startFlags) {
    if (f.key !== 'workers' && !parsed.positions.has(f.key)) next[f.key] = (running as Record<string, unknown>)[f.key];
  }
  return next as RouterConfig;
}

/** The draft with a YAML text read as the running router takes it (a draft as data is taken as it is). */
export function asRunningDraft(state: ConsoleState, draft: Draft): Draft {
  if (!('yaml' in draft)) return draft;
  const config = yamlAsDraft(state, draft.yaml);
  return config ? { draft: config as unknown as Record<string, unknown> } : draft;
}
