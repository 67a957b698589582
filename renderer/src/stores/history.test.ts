// The history store as a plain function: the applied revisions as config.history gives them,
// or why they could not be fetched (loaded either way, so the screen stops saying "Loading").
import { beforeEach, describe, expect, it } from 'vitest';
import { ContractError } from '../../../core/console/contract.ts';
import { fakeConsole, type FakeConsole } from '../test/fake-console.ts';
import { routerConfig } from '../test/samples.ts';
import { setClient } from './client.ts';
import { useHistory } from './history.ts';

let fake: FakeConsole;
beforeEach(() => {
  useHistory.setState(useHistory.getInitialState(), true);
  fake = fakeConsole({
    'config.history': () => ({
      entries: [
        {
          revision: 2,
          appliedAt: 1_700_000_100_000,
          client: 'http',
          diff: [{ path: 'policy', kind: 'changed', before: 'round_robin', after: 'least_load' }],
          restorable: true,
          config: routerConfig({ policy: 'least_load' }),
        },
        { revision: 1, appliedAt: 1_700_000_000_000, client: 'start', diff: [], restorable: false },
      ],
    }),
  });
  setClient(fake.client);
});

describe('history store', () => {
  it('load takes the revisions newest first, as the backend lists them', async () => {
    await useHistory.getState().load();
    expect(useHistory.getState().entries.map((e) => [e.revision, e.client, e.restorable])).toEqual([
      [2, 'http', true],
      [1, 'start', false],
    ]);
    expect(useHistory.getState()).toMatchObject({ loaded: true, error: null });
  });

  it('a failed load is loaded too, with why', async () => {
    fake.answer('config.history', () => {
      throw new ContractError('internal', 'cannot read the config history /home/op/.config/mmtc/history.jsonl: EACCES');
    });
    await useHistory.getState().load();
    expect(useHistory.getState()).toMatchObject({
      loaded: true,
      entries: [],
      error: 'cannot read the config history /home/op/.config/mmtc/history.jsonl: EACCES',
    });
  });
});
