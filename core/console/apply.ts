// Every change the console makes to the running configuration goes through one apply: config.apply,
// rollback, reloadFile and workers.add/update/remove. They run one at a time and in this order:
// revision check, validation, start-only settings, file drift — any of them refuses and nothing
// changes — then the file is written atomically, then the store swaps, so the running router
// uses the new revision for its next request. A failed write applies nothing; a file changed by
// hand is never overwritten (file_drift: reload it or edit on), and a reload is the one apply
// that takes the drifted text, exactly the text it reviewed. A stale revision is a conflict that
// names what changed meanwhile, whichever command sent it.
//
// What the file gets and what a restart would set back follow restart.ts.
import { ConfigError } from '../config/errors.ts';
import type { ConfigFlags } from '../config/load.ts';
import { RouterConfigSchema, type RouterConfig } from '../config/schema.ts';
import { ConfigConflictError, type ConfigStore } from '../config/store.ts';
import type { RunningRouter } from '../router/server.ts';
import type { ConfigFile, ConfigHistory } from './config-file.ts';
import { ContractError, settingOf, type DiffEntry } from './contract.ts';
import { diffConfigs } from './diff.ts';
import { configForFile, restartChanges, restartConfig, type StartFlag } from './restart.ts';
import { originLabel, type ConsoleState } from './state.ts';

type Applier = Pick<ConsoleState, 'apply' | 'untilRestart' | 'restartChangesNow' | 'asReloaded' | 'keepEmbedded' | 'embeddedUrls'> & {
  /** Settles when every apply queued so far has finished. */
  idle(): Promise<void>;
};

const nextTask = () => new Promise<void>((resolve) => setImmediate(resolve));

export function createApplier(deps: {
  store: ConfigStore;
  file: ConfigFile;
  history: ConfigHistory;
  running: RunningRouter;
  flags: ConfigFlags;
  startFlags: readonly StartFlag[];
}): Applier {
  const { store, file, history, running, flags, startFlags } = deps;
  /** Settings the operator changed since the start or the last reload (restart.ts: they are written as they run). */
  const operatorKeys = new Set<string>();
  const changedKeys = (from: RouterConfig, to: RouterConfig) => new Set(diffConfigs(from, to).map((d) => settingOf(d.path)));
  let queue: Promise<unknown> = Promise.resolve();

  // This launch's embedded worker, whether or not the configuration lists it now: its URL is
  // never written, also by the apply that brings it back.
  const embeddedUrls = () => {
    const embedded = store.embeddedWorker();
    return new Set(embedded ? [embedded.url] : []);
  };

  const onDisk = async (): Promise<RouterConfig | undefined> => {
    const { text } = await file.drift();
    try {
      return text === undefined ? undefined : file.parse(text).config;
    } catch {
      return undefined; // a drifted, invalid file: the apply is refused anyway
    }
  };

  /** A conflict says what changed between the revision the client edited and the current one. */
  const conflictWithDiff = (err: unknown): unknown => {
    if (!(err instanceof ConfigConflictError)) return err;
    const edited = history.get(err.expectedRevision);
    const base = edited ? RouterConfigSchema.safeParse(edited.config).data : undefined;
    const current = store.current();
    return new ContractError('conflict', err.message, undefined, [], {
      currentRevision: current.revision,
      expectedRevision: err.expectedRevision,
      changedMeanwhile: base ? diffConfigs(base, current.config) : [],
    });
  };

  const applier: Applier = {
    embeddedUrls,
    keepEmbedded(config) {
      // With no worker configured, the embedded reference worker of this launch serves (it is
      // never written out), also after a change had replaced it.
      const embedded = store.embeddedWorker();
      return config.workers.length > 0 || embedded === undefined ? config : { ...config, workers: [embedded] };
    },
    asReloaded(fromFile) {
      return applier.keepEmbedded(restartConfig(fromFile, flags));
    },
    async untilRestart(config) {
      const embedded = embeddedUrls();
      const keys = new Set([...operatorKeys, ...changedKeys(store.current().config, config)]);
      return restartChanges(config, configForFile(config, startFlags, await onDisk(), embedded, keys), flags, embedded);
    },
    async restartChangesNow() {
      const { text } = await file.drift();
      try {
        return restartChanges(store.current().config, file.parse(text).config, flags, embeddedUrls());
      } catch (err) {
        if (err instanceof ConfigError) return null;
        throw err;
      }
    },
    apply(next, expectedRevision, client, options = {}) {
      const run = async () => {
        // Each step below parses or writes a configuration of up to 32 KiB: between them the
        // event loop answers what waits (/health), so no apply holds it for their sum.
        await nextTask();
        const current = store.current();
        // No worker configured: the embedded worker stands in, as at start (a removal of the last worker, a rollback).
        const config = applier.keepEmbedded(store.check(next, expectedRevision));
        const drift = await file.drift();
        const reload = options.reloadOf !== undefined && drift.text === options.reloadOf.text;
        if (drift.drifted && !reload) throw driftError(file, drift.text, current.config, applier.asReloaded);
        const fileConfig = drift.text === undefined ? undefined : file.parse(drift.text).config;
        // A reload runs the file as a restart would: nothing of this run is the operator's any more.
        const keys = reload ? new Set<string>() : new Set([...operatorKeys, ...changedKeys(current.config, config)]);
        const embedded = embeddedUrls();
        const written = configForFile(config, startFlags, fileConfig, embedded, keys);
        await nextTask();
        await file.save(written, reload ? { over: drift.text } : undefined);
        await nextTask();
        const applied = store.apply(config, expectedRevision, {
          origin: originLabel(client),
          client,
          ...(options.rollbackOf !== undefined ? { rollbackOf: options.rollbackOf } : {}),
        });
        operatorKeys.clear();
        for (const k of keys) operatorKeys.add(k);
        return {
          revision: applied.revision,
          diff: diffConfigs(current.config, applied.config),
          file: file.path,
          untilRestart: restartChanges(config, written, flags, embedded),
        };
      };
      const result = queue.then(run, run);
      queue = result.catch(() => {}); // the queue only orders applies: a failed one is answered to its caller (result)
      // Answer once the workers this revision added have been discovered, so the reply (and
      // the next workers.list) shows whether they are healthy; other applies need not wait.
      return result.then(
        async (r) => {
          await running.reconciled();
          return r;
        },
        (err: unknown) => {
          throw conflictWithDiff(err);
        },
      );
    },
    idle: () => queue.then(() => undefined),
  };
  return applier;
}

/** The refusal of an apply over a file changed by hand: what a reload of it would change, or why it cannot be loaded. */
function driftError(file: ConfigFile, text: string | undefined, running: RouterConfig, asReloaded: (fromFile: RouterConfig) => RouterConfig): ContractError {
  let diff: DiffEntry[] = [];
  let issues: ConfigError['issues'] = [];
  try {
    diff = diffConfigs(running, asReloaded(file.parse(text).config));
  } catch (err) {
    if (err instanceof ConfigError) issues = err.issues;
  }
  return new ContractError(
    'file_drift',
    `${file.path} was changed on disk since the console last read or wrote it; it was not overwritten. Review the change and reload the file, then apply again`,
    undefined,
    issues,
    { diff, file: file.path },
  );
}
