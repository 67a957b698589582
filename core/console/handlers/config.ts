// The config commands: read the running configuration and its file, check, compare and resolve
// a draft, apply one (as data or YAML), import and export YAML, the gateway's command line, the
// history and its rollback, and the reload of a file changed by hand. Every change goes through
// state.apply (apply.ts), so each has the same checks, the same file write and the same
// conflict answer.
import { RouterConfigSchema, type RouterConfig } from '../../config/schema.ts';
import { RESTART_ONLY_KEYS } from '../../config/store.ts';
import { exportConfigYaml } from '../../config/yaml.ts';
import type { CallMeta } from '../backend.ts';
import { ContractError, type Draft } from '../contract.ts';
import { diffConfigs } from '../diff.ts';
import { asRunningDraft, draftConfig, readDraft, yamlAsDraft } from '../drafts.ts';
import { exportForGateway } from '../gateway-export.ts';
import type { ConsoleState, HandlerGroup } from '../state.ts';
import { fileView, resolveDraft, shmWillFailWarnings } from '../views.ts';

type ConfigCommand =
  | 'config.get'
  | 'config.validate'
  | 'config.diff'
  | 'config.resolve'
  | 'config.apply'
  | 'config.importYaml'
  | 'config.exportYaml'
  | 'config.exportForGateway'
  | 'config.history'
  | 'config.rollback'
  | 'config.reloadFile';

export function configHandlers(state: ConsoleState): HandlerGroup<ConfigCommand> {
  const { store, history } = state;
  const handlers = {
    async 'config.get'() {
      const s = store.current();
      return {
        revision: s.revision,
        config: s.config,
        origins: { ...s.origins },
        env: s.env,
        appliedAt: s.appliedAt,
        client: s.client,
        file: await fileView(state),
        restartOnly: [...RESTART_ONLY_KEYS],
        startFlags: state.startFlags.map(({ key, flag }) => ({ key, flag })),
        defaults: RouterConfigSchema.parse({}),
      };
    },

    async 'config.validate'(input: Draft) {
      const r = readDraft(input);
      return r.ok ? { ok: true, issues: [], config: r.config } : { ok: false, issues: r.issues };
    },

    async 'config.diff'(input: Draft) {
      const s = store.current();
      const next = state.keepEmbedded(draftConfig(asRunningDraft(state, input)));
      return {
        revision: s.revision,
        diff: diffConfigs(s.config, next),
        untilRestart: await state.untilRestart(next),
        warnings: shmWillFailWarnings(state, next),
      };
    },

    async 'config.resolve'(input: Draft) {
      const r = readDraft(asRunningDraft(state, input));
      if (!r.ok) return { ok: false, issues: r.issues, workers: [] };
      return { ok: true, issues: [], workers: resolveDraft(state, r.config) };
    },

    async 'config.apply'(input: Draft & { expectedRevision: number }, meta: CallMeta) {
      const draft = 'yaml' in input ? { yaml: input.yaml } : { draft: input.draft };
      return state.apply(draftConfig(asRunningDraft(state, draft)), input.expectedRevision, meta.client);
    },

    async 'config.importYaml'(input: { text: string }) {
      const r = readDraft({ yaml: input.text });
      if (!r.ok) return { ok: false, issues: r.issues, diff: [] };
      const draft = yamlAsDraft(state, input.text) ?? r.config;
      return { ok: true, issues: [], draft, diff: diffConfigs(store.current().config, draft) };
    },

    async 'config.exportYaml'() {
      const s = store.current();
      const embedded = state.embeddedUrls();
      return {
        yaml: exportConfigYaml(
          { ...s.config, workers: s.config.workers.filter((w) => !embedded.has(w.url)) },
          { detectedRuntimes: state.running.context.registry.detectedRuntimes() },
        ),
        revision: s.revision,
      };
    },

    async 'config.exportForGateway'() {
      return exportForGateway(store.current().config, {
        excludeUrls: state.embeddedUrls(),
        detectedRuntimes: state.running.context.registry.detectedRuntimes(),
        drainedUrls: new Set(
          state.running.context.registry
            .list()
            .filter((w) => w.drainedAt !== undefined)
            .map((w) => w.spec.url),
        ),
      });
    },

    async 'config.history'() {
      const entries = history.entries().map((r) => {
        const kept = RouterConfigSchema.safeParse(r.config);
        return {
          revision: r.revision,
          appliedAt: r.appliedAt,
          client: r.client,
          // A line of the file edited by hand may carry anything there: only a revision number is one.
          ...(Number.isInteger(r.rollbackOf) && r.rollbackOf! > 0 ? { rollbackOf: r.rollbackOf } : {}),
          diff: r.diff,
          restorable: kept.success,
          // As a rollback would apply it here (the running embedded worker kept), so its preview is the rollback's.
          ...(kept.success ? { config: state.keepEmbedded(kept.data) } : {}),
        };
      });
      return { entries: entries.reverse() };
    },

    async 'config.rollback'(input: { revision: number; expectedRevision: number }, meta: CallMeta) {
      const record = history.get(input.revision);
      if (!record)
        throw new ContractError(
          'not_found',
          `revision ${input.revision} is not in the history (it keeps the last ${history.entries().length} revisions)`,
          'revision',
        );
      const parsed = RouterConfigSchema.safeParse(record.config);
      if (!parsed.success)
        throw new ContractError(
          'invalid_config',
          `revision ${input.revision}'s configuration is no longer valid: ${parsed.error.issues[0]?.message}`,
          'revision',
        );
      return state.apply(parsed.data, input.expectedRevision, meta.client, { rollbackOf: input.revision });
    },

    async 'config.reloadFile'(input: { expectedRevision: number }, meta: CallMeta) {
      const { text } = await state.file.drift();
      const next: RouterConfig = state.asReloaded(state.file.parse(text).config);
      return state.apply(next, input.expectedRevision, meta.client, { reloadOf: { text } });
    },
  };
  return handlers;
}
