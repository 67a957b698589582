// The config store as plain functions over its vanilla API (no React): the draft and the
// revision it is based on, what the pending bar names while the draft has a problem, a
// conflict's rebase, Undo's rollback target, and the order answers land in. The console it
// talks to is fakeConsole: every answer is one the real console could give.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ContractError, issuesFromZod, RouterConfigSchema, type ConfigDraft } from '../../../core/console/contract.ts';
import { patchWorker, setRouterField } from '../lib/draft.ts';
import { fakeConsole, type FakeConsole } from '../test/fake-console.ts';
import { applyResult, configView, decision, resolution, routerConfig, WORKER_A, WORKER_B } from '../test/samples.ts';
import { setClient } from './client.ts';
import { useConfig } from './config.ts';
import { useUi } from './ui.ts';

/** What config.resolve answers for a draft, as the backend does: its issues when it is not a valid configuration, else every worker resolved. */
function resolveAnswer(input: { draft: ConfigDraft } | { yaml: string }) {
  const parsed = RouterConfigSchema.safeParse('draft' in input ? input.draft : {});
  if (!parsed.success) return { ok: false, issues: issuesFromZod(parsed.error, { input: 'draft' in input ? input.draft : {} }), workers: [] };
  return {
    ok: true,
    issues: [],
    workers: parsed.data.workers.map((w) => ({
      url: w.url,
      resolution: resolution(w.url, w.multimodal_tensor_transport ? { worker: w.multimodal_tensor_transport } : {}),
      decision: decision(),
    })),
  };
}

let fake: FakeConsole;
const state = () => useConfig.getState();
/** The derived state (diff, issues, resolution) is refreshed 120 ms after an edit. */
const refreshed = () => vi.advanceTimersByTimeAsync(150);

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
  useConfig.setState(useConfig.getInitialState(), true);
  useUi.setState(useUi.getInitialState(), true);
  fake = fakeConsole({
    'config.get': () => configView({ revision: 5 }),
    'config.resolve': resolveAnswer,
    'config.diff': () => ({
      revision: 5,
      diff: [{ path: `workers["${WORKER_A}"].multimodal_tensor_transport`, kind: 'added', after: 'shm' }],
      untilRestart: [],
      warnings: [],
    }),
    'config.apply': () => applyResult(6),
  });
  setClient(fake.client);
});
afterEach(() => {
  vi.useRealTimers();
});

describe('config store: the draft and the revision it is based on', () => {
  it('an edit creates a draft on the applied revision; inherit again drops it; apply sends that revision', async () => {
    await state().load();
    state().edit((d) => patchWorker(d, WORKER_A, { multimodal_tensor_transport: 'shm' }));
    expect(state().base?.revision).toBe(5);
    expect(state().draft?.workers[0]?.multimodal_tensor_transport).toBe('shm');
    // The applied config is untouched until apply.
    expect(state().view?.config.workers[0]?.multimodal_tensor_transport).toBeUndefined();

    state().reviewDraft();
    const review = useUi.getState().review!;
    expect(review.intro).toBe('These changes apply on top of revision 5. The router uses them from its next request.');
    await review.run();
    expect(fake.inputsOf('config.apply')).toMatchObject([{ expectedRevision: 5, draft: { workers: [{ url: WORKER_A, multimodal_tensor_transport: 'shm' }] } }]);

    state().edit((d) => patchWorker(d, WORKER_A, { multimodal_tensor_transport: undefined }));
    expect(state().draft).toBeNull();
  });

  it("the draft's diff and its per-worker resolution follow an edit shortly after it", async () => {
    await state().load();
    await refreshed();
    expect(state().resolvedFor).toBe('applied');
    state().edit((d) => patchWorker(d, WORKER_A, { multimodal_tensor_transport: 'shm' }));
    await refreshed();
    expect(state().resolvedFor).toBe('draft');
    expect(state().resolved.map((r) => [r.url, r.resolution.multimodal_tensor_transport.value, r.resolution.multimodal_tensor_transport.source])).toEqual([
      [WORKER_A, 'shm', 'worker'],
    ]);
    expect(state().diff.map((d) => d.path)).toEqual([`workers["${WORKER_A}"].multimodal_tensor_transport`]);
    expect(state().issues).toEqual([]);
  });

  it('Discard drops the draft and what was derived from it', async () => {
    await state().load();
    state().edit((d) => setRouterField(d, 'policy', 'least_load'));
    await refreshed();
    state().discard();
    expect([state().draft, state().base, state().diff, state().issues]).toEqual([null, null, [], []]);
  });

  it('a config.get that fails says why, in the backend’s words', async () => {
    fake.answer('config.get', () => {
      throw new ContractError('unauthorized', 'missing or wrong console token: open the URL mmtc serve printed (it ends with #token=…)');
    });
    await state().load();
    expect(state().error).toBe('missing or wrong console token: open the URL mmtc serve printed (it ends with #token=…)');
    expect(state().view).toBeNull();
  });
});

describe('config store: a draft with a problem, as the pending bar names it', () => {
  it('a value typed halfway stands in the draft, named by the backend with its key path, and the ladder says it is from before it', async () => {
    await state().load();
    state().edit((d) => patchWorker(d, WORKER_A, { multimodal_tensor_transport: 'shm' }));
    await refreshed();
    const before = state().resolved;
    state().edit((d) => setRouterField(d, 'port', 70000));
    await refreshed();
    expect(state().draft?.port).toBe(70000);
    expect(state().resolvedFor).toBe('invalid');
    expect(state().issues.map((i) => i.path)).toEqual(['port']);
    expect(state().issues[0]!.message).toMatch(/^invalid value 70000 for port: expected an integer port 0-65535/);
    // What the ladder shows is the last draft that resolved.
    expect(state().resolved).toBe(before);
  });

  it('with the backend out of reach, the draft’s own problems are still named (from the schema, here); a valid draft says the backend is unreachable', async () => {
    await state().load();
    fake.answer('config.resolve', () => {
      throw new Error('the console backend at http://127.0.0.1:30001 cannot be reached (fetch failed); is mmtc serve still running?');
    });
    state().edit((d) => setRouterField(d, 'port', 'eighty'));
    await refreshed();
    expect(state().issues.map((i) => i.path)).toEqual(['port']);
    expect(state().resolvedFor).toBe('invalid');
    state().edit((d) => setRouterField(d, 'port', 8080));
    await refreshed();
    expect(state().issues).toEqual([
      { path: '', message: 'the console backend at http://127.0.0.1:30001 cannot be reached (fetch failed); is mmtc serve still running?' },
    ]);
  });

  it('an answer for an earlier edit that lands after a later one is not shown', async () => {
    await state().load();
    let releaseFirst!: () => void;
    let first = true;
    fake.answer('config.resolve', async (input) => {
      if (first) {
        first = false;
        await new Promise<void>((r) => (releaseFirst = r));
      }
      return resolveAnswer(input);
    });
    state().edit((d) => patchWorker(d, WORKER_A, { multimodal_tensor_transport: 'shm' }));
    await refreshed();
    state().edit((d) => patchWorker(d, WORKER_A, { multimodal_tensor_transport: 'auto' }));
    await refreshed();
    releaseFirst();
    await refreshed();
    expect(state().resolved[0]!.resolution.multimodal_tensor_transport.value).toBe('auto');
  });
});

describe('config store: conflicts, rebase and Undo', () => {
  it('after a conflict, Rebase carries the edits onto the revision someone else applied, keeping their change', async () => {
    await state().load();
    state().edit((d) => patchWorker(d, WORKER_A, { multimodal_tensor_transport: 'shm' }));
    // Someone else applied revision 6 meanwhile: a second worker.
    fake.answer('config.get', () => configView({ revision: 6, config: routerConfig({ workers: [{ url: WORKER_A }, { url: WORKER_B }] }) }));
    await state().load();
    state().rebase();
    expect(state().base?.revision).toBe(6);
    expect(state().draft?.workers.map((w) => [w.url, w.multimodal_tensor_transport])).toEqual([
      [WORKER_A, 'shm'],
      [WORKER_B, undefined],
    ]);
    state().reviewDraft();
    expect(useUi.getState().review?.intro).toBe('These changes apply on top of revision 6. The router uses them from its next request.');
  });

  it('a rebase onto a revision that already has the same edit leaves no draft', async () => {
    await state().load();
    state().edit((d) => setRouterField(d, 'policy', 'least_load'));
    fake.answer('config.get', () => configView({ revision: 6, config: routerConfig({ policy: 'least_load', workers: [{ url: WORKER_A }] }) }));
    await state().load();
    state().rebase();
    expect(state().draft).toBeNull();
  });

  it('Undo of an applied draft rolls back to the revision it was based on, with that configuration to preview', async () => {
    await state().load();
    const applied = state().view!.config;
    state().edit((d) => setRouterField(d, 'policy', 'least_load'));
    state().reviewDraft();
    expect(useUi.getState().review?.undo).toEqual({ toRevision: 5, config: applied });
  });

  it('after our own apply of something else (a worker added), the other pending edits stay on top of the new revision', async () => {
    await state().load();
    state().edit((d) => setRouterField(d, 'policy', 'least_load'));
    fake.answer('config.get', () => configView({ revision: 6, config: routerConfig({ workers: [{ url: WORKER_A }, { url: WORKER_B }] }) }));
    await state().afterApply(applyResult(6));
    expect(state().base?.revision).toBe(6);
    expect(state().draft?.policy).toBe('least_load');
    expect(state().draft?.workers.map((w) => w.url)).toEqual([WORKER_A, WORKER_B]);
  });
});
