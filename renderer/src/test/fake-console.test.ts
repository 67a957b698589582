// The renderer tests' console refuses what the real one could not answer: the answers the
// config store's old fake gave (a config.get without startFlags, a config.diff without
// untilRestart) are internal errors naming the missing key, as the backend's own output check
// words them; an input the contract refuses is invalid_input; errors cross as on the wire.
import { describe, expect, it } from 'vitest';
import { ContractError, type CommandOutput } from '../../../core/console/contract.ts';
import { fakeConsole } from './fake-console.ts';
import { configView, routerConfig } from './samples.ts';

describe("the renderer tests' console", () => {
  it('an answer the real console could not give is refused, naming where it is wrong', async () => {
    const config = routerConfig();
    const fake = fakeConsole({
      // What the config store's test answered before its fake was held to the contract.
      'config.get': () =>
        ({
          revision: 5,
          config,
          origins: {},
          env: {},
          file: { path: null, drifted: false, driftDiff: [], driftIssues: [] },
          restartOnly: [],
          defaults: config,
          appliedAt: 0,
          client: 'http',
        }) as unknown as CommandOutput<'config.get'>,
      'config.diff': () => ({ revision: 5, diff: [] }) as unknown as CommandOutput<'config.diff'>,
    });
    const refused = (await fake.client.call('config.get', {}).catch((e: unknown) => e)) as ContractError;
    expect(refused).toBeInstanceOf(ContractError);
    expect(refused.code).toBe('internal');
    expect(refused.message).toMatch(/^the output of config\.get does not match the contract at env\.multimodal_tensor_transport: /);
    const diff = (await fake.client.call('config.diff', { draft: config }).catch((e: unknown) => e)) as ContractError;
    expect(diff.message).toMatch(/^the output of config\.diff does not match the contract at untilRestart: /);
  });

  it('a valid answer arrives as over the wire (JSON, defaults filled in by the schema)', async () => {
    const fake = fakeConsole({ 'config.get': () => configView({ revision: 7 }) });
    const view = await fake.client.call('config.get', {});
    expect(view.revision).toBe(7);
    expect(view.config.policy).toBe('round_robin');
  });

  it('an input the contract refuses is invalid_input, and a command with no answer is not_found naming it', async () => {
    const fake = fakeConsole({});
    const bad = (await fake.client.call('workers.diagnose', { url: 'http://nowhere' }).catch((e: unknown) => e)) as ContractError;
    expect([bad.code, bad.path]).toEqual(['invalid_input', 'url']);
    const none = (await fake.client.call('overview', {}).catch((e: unknown) => e)) as ContractError;
    expect([none.code, none.message]).toEqual(['not_found', "the test's console has no answer for overview"]);
  });

  it('a stream payload the real console could not send is refused before any listener sees it', () => {
    const fake = fakeConsole();
    const seen: unknown[] = [];
    fake.client.subscribe('config', (p) => seen.push(p));
    expect(() => fake.emit('config', { revision: 0, client: 'http', appliedAt: 1 })).toThrow();
    fake.emit('config', { revision: 3, client: 'http', appliedAt: 1 });
    expect(seen).toEqual([{ revision: 3, client: 'http', appliedAt: 1 }]);
  });
});
