// The Router and Precedence screens' states the end-to-end tests do not reach: before the
// configuration arrives, the draft's router-wide problems named by key above the settings
// (workers' problems are the Workers screen's), a configuration without workers, and a worker
// whose ladder is not resolved yet.
import { describe, expect, it } from 'vitest';
import { issuesFromZod, RouterConfigSchema } from '../../../core/console/contract.ts';
import { render, withState } from '../test/render.tsx';
import { configView, routerConfig, WORKER_A } from '../test/samples.ts';
import { useConfig } from '../stores/config.ts';
import { PrecedenceScreen } from './Precedence.tsx';
import { RouterScreen } from './Router.tsx';

/** The problems the config store holds for a draft as typed (stores/config.ts computes them so). */
function issuesOf(draft: Record<string, unknown>) {
  const checked = RouterConfigSchema.safeParse(draft);
  if (checked.success) throw new Error('expected a draft with problems');
  return issuesFromZod(checked.error, { input: draft }).map(({ path, message }) => ({ path, message }));
}

describe('Router screen', () => {
  it('before the configuration arrives: Loading…', () => {
    expect(render(<RouterScreen />).text).toBe('Loading…');
  });

  it("the draft's router-wide problems are named by key; a worker's are left to the Workers screen", () => {
    const { text } = render(
      <RouterScreen />,
      withState(useConfig, {
        view: configView(),
        issues: issuesOf({ multimodal_shm_min_bytes: '30x', workers: [{ url: WORKER_A, worker_type: 'prefill', bootstrap_port: 70000 }] }),
      }),
    );
    expect(text).toContain(
      "✕ multimodal_shm_min_bytes : invalid value '30x' for multimodal_shm_min_bytes: expected a non-negative integer number of bytes (e.g. 65536)",
    );
    expect(text).not.toContain('bootstrap_port');
  });
});

describe('Precedence screen', () => {
  it('a configuration without workers: says where to add one', () => {
    const { text } = render(<PrecedenceScreen worker={undefined} />, withState(useConfig, { view: configView({ config: routerConfig({ workers: [] }) }) }));
    expect(text).toContain('No workers configured Add a worker on the Workers screen; its ladder shows here.');
  });

  it('a worker whose ladder is not resolved yet: Resolving…', () => {
    const { text } = render(<PrecedenceScreen worker={WORKER_A} />, withState(useConfig, { view: configView(), resolved: [] }));
    expect(text).toContain('Resolving…');
  });
});
