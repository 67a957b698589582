import { describe, expect, it } from 'vitest';
import { RouterConfigSchema, type ConsoleClient } from '../../../core/console/contract.ts';
import { patchWorker } from '../lib/draft.ts';
import { setClient } from './client.ts';
import { useConfig } from './config.ts';
import { useUi } from './ui.ts';

const URL = 'grpc://127.0.0.1:50051';
const config = RouterConfigSchema.parse({ port: 0, workers: [{ url: URL }] });

describe('config store: the draft and the revision it is based on', () => {
  it('an edit creates a draft on the applied revision; inherit again drops it; apply sends that revision', async () => {
    const calls: Array<[string, unknown]> = [];
    const fake = {
      async call(command: string, input: unknown) {
        calls.push([command, input]);
        if (command === 'config.get')
          return {
            revision: 5,
            config,
            origins: {},
            env: {},
            file: { path: null, drifted: false, driftDiff: [], driftIssues: [] },
            restartOnly: [],
            defaults: config,
            appliedAt: 0,
            client: 'http',
          };
        if (command === 'config.resolve') return { ok: true, issues: [], workers: [] };
        if (command === 'config.diff') return { revision: 5, diff: [] };
        if (command === 'config.apply') return { revision: 6, diff: [], file: null };
        throw new Error(command);
      },
      subscribe: () => () => {},
    } as unknown as ConsoleClient;
    setClient(fake);
    await useConfig.getState().load();
    useConfig.getState().edit((d) => patchWorker(d, URL, { multimodal_tensor_transport: 'shm' }));
    expect(useConfig.getState().base?.revision).toBe(5);
    expect(useConfig.getState().draft?.workers[0]?.multimodal_tensor_transport).toBe('shm');
    // The applied config is untouched until apply.
    expect(useConfig.getState().view?.config.workers[0]?.multimodal_tensor_transport).toBeUndefined();

    useConfig.getState().reviewDraft();
    const review = useUi.getState().review!;
    expect(review.undo?.toRevision).toBe(5);
    await review.run();
    expect(calls.find(([c]) => c === 'config.apply')?.[1]).toMatchObject({
      expectedRevision: 5,
      draft: { workers: [{ url: URL, multimodal_tensor_transport: 'shm' }] },
    });

    useConfig.getState().edit((d) => patchWorker(d, URL, { multimodal_tensor_transport: undefined }));
    expect(useConfig.getState().draft).toBeNull();
  });
});
