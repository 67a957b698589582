// The applied configuration (config.get) and the operator's draft. The draft is a whole
// RouterConfig plus the revision and config it was based on; every apply sends that revision
// as expectedRevision, so an apply over someone else's newer revision is a conflict the
// operator sees (with what changed meanwhile), never a silent overwrite. While a draft
// exists its diff, validation and per-worker resolution (config.resolve: the precedence
// ladder before apply) are refreshed shortly after each edit.
import { create } from 'zustand';
import {
  issuesFromZod,
  RouterConfigSchema,
  type ApplyResult,
  type CommandOutput,
  type ConfigIssue,
  type ConfigView,
  type DiffEntry,
  type RouterConfig,
} from '../../../core/console/contract.ts';
import { configsDiffer, rebaseDraft } from '../lib/draft.ts';
import { client, describeError } from './client.ts';
import { useUi } from './ui.ts';

export type Resolution = CommandOutput<'config.resolve'>['workers'][number];

interface ConfigState {
  view: ConfigView | null;
  error: string | null;
  /**
   * The draft and what it was based on; null when the operator has no pending edit. The draft is
   * the applied configuration with the operator's edits, every setting present: a ConfigDraft,
   * which the config.* commands take as it is (they name what is wrong with it).
   */
  draft: RouterConfig | null;
  base: { revision: number; config: RouterConfig } | null;
  diff: DiffEntry[];
  issues: ConfigIssue[];
  /** Per-worker resolution of the draft (or of the applied config when there is no draft); while the draft is invalid, the last one that resolved. */
  resolved: Resolution[];
  /** `invalid`: the draft has a problem (issues), so nothing resolves it and `resolved` is from before it; screens say so. */
  resolvedFor: 'draft' | 'applied' | 'invalid';
  /** YAML the operator is importing (kept across screens until applied or cleared). */
  importText: string;
  setImportText(text: string): void;
  load(): Promise<void>;
  /** Change the draft (created from the applied config on first edit). */
  edit(change: (draft: RouterConfig) => RouterConfig): void;
  discard(): void;
  /** Carry the draft onto the current applied revision. */
  rebase(): void;
  /** Open the review of the draft. */
  reviewDraft(): void;
  /** After an apply of ours: take the new view, keep any other pending edit on top of it. */
  afterApply(result: ApplyResult): Promise<void>;
}

let refreshTimer: ReturnType<typeof setTimeout> | undefined;
let refreshSeq = 0;

export const useConfig = create<ConfigState>((set, get) => {
  const refreshDerived = () => {
    if (refreshTimer) clearTimeout(refreshTimer);
    refreshTimer = setTimeout(() => void derive(), 120);
  };

  const derive = async () => {
    const seq = ++refreshSeq;
    const { draft, view } = get();
    const subject = draft ?? view?.config;
    if (!subject) return;
    const local = RouterConfigSchema.safeParse(subject);
    const localIssues: ConfigIssue[] = local.success ? [] : issuesFromZod(local.error, { input: subject }).map(({ path, message }) => ({ path, message }));
    try {
      const [resolved, diff] = await Promise.all([
        client().call('config.resolve', { draft: subject }),
        draft && local.success
          ? client()
              .call('config.diff', { draft })
              .then((d) => d.diff)
              // No diff to show: config.diff refuses a draft whose problems config.resolve names
              // (its issues are shown instead), and fails with resolve when the console cannot
              // be reached (the catch below says so).
              .catch(() => [] as DiffEntry[])
          : Promise.resolve([] as DiffEntry[]),
      ]);
      if (seq !== refreshSeq) return;
      set(
        resolved.ok
          ? { resolved: resolved.workers, issues: localIssues, diff, resolvedFor: draft ? 'draft' : 'applied' }
          : { issues: resolved.issues, diff, resolvedFor: 'invalid' },
      );
    } catch (err) {
      if (seq !== refreshSeq) return;
      set({
        issues: localIssues.length ? localIssues : [{ path: '', message: describeError(err) }],
        ...(localIssues.length ? { resolvedFor: 'invalid' as const } : {}),
      });
    }
  };

  return {
    view: null,
    error: null,
    draft: null,
    base: null,
    diff: [],
    issues: [],
    resolved: [],
    resolvedFor: 'applied',
    importText: '',
    setImportText: (importText) => set({ importText }),

    async load() {
      try {
        const view = await client().call('config.get', {});
        set({ view, error: null });
        refreshDerived();
      } catch (err) {
        set({ error: describeError(err) });
      }
    },

    edit(change) {
      const { view, draft, base } = get();
      if (!view) return;
      const start = draft ?? structuredClone(view.config);
      const next = change(start);
      if (!configsDiffer(next, base?.config ?? view.config)) {
        set({ draft: null, base: null, diff: [], issues: [] });
      } else {
        set({ draft: next, base: base ?? { revision: view.revision, config: structuredClone(view.config) } });
      }
      refreshDerived();
    },

    discard() {
      set({ draft: null, base: null, diff: [], issues: [] });
      refreshDerived();
    },

    rebase() {
      const { view, draft, base } = get();
      if (!view || !draft || !base) return;
      const next = rebaseDraft(base.config, draft, view.config);
      set(
        configsDiffer(next, view.config)
          ? { draft: next, base: { revision: view.revision, config: structuredClone(view.config) } }
          : { draft: null, base: null, diff: [] },
      );
      refreshDerived();
    },

    reviewDraft() {
      const { draft, base } = get();
      if (!draft || !base) return;
      const expectedRevision = base.revision;
      useUi.getState().requestReview({
        title: 'Review changes',
        intro: `These changes apply on top of revision ${expectedRevision}. The router uses them from its next request.`,
        proposed: draft,
        confirmLabel: 'Apply',
        run: () => client().call('config.apply', { draft, expectedRevision }),
        onApplied: () => set({ draft: null, base: null, diff: [] }),
        onRebase: () => get().rebase(),
        undo: { toRevision: expectedRevision, config: base.config },
      });
    },

    async afterApply() {
      const { draft, base } = get();
      const view = await client().call('config.get', {});
      if (draft && base && base.revision < view.revision) {
        // Our own discrete apply (add/remove a worker): keep the other pending edits on top.
        const next = rebaseDraft(base.config, draft, view.config);
        set(
          configsDiffer(next, view.config)
            ? { view, draft: next, base: { revision: view.revision, config: structuredClone(view.config) } }
            : { view, draft: null, base: null },
        );
      } else set({ view });
      refreshDerived();
    },
  };
});

/** Refresh what depends on the applied config (the config stream says a revision landed). */
export function refreshAfterRevision(): void {
  void useConfig.getState().load();
}
