// The History screen's states the end-to-end tests do not reach (e2e/rollback.spec.ts covers a
// rollback from a listed revision): no revision recorded yet, a history that cannot be read,
// a revision the history can no longer restore, and a long diff summarised.
import { afterEach, describe, expect, it } from 'vitest';
import { render, withState } from '../test/render.tsx';
import { configView, routerConfig } from '../test/samples.ts';
import { useConfig } from '../stores/config.ts';
import { useHistory, type HistoryEntry } from '../stores/history.ts';
import { HistoryScreen } from './History.tsx';

afterEach(() => {
  useHistory.setState(useHistory.getInitialState(), true);
});

const entry = (revision: number, over: Partial<HistoryEntry> = {}): HistoryEntry => ({
  revision,
  appliedAt: 1_700_000_000_000 + revision * 1000,
  client: 'http',
  diff: [{ path: 'policy', kind: 'changed', before: 'round_robin', after: 'least_load' }],
  restorable: true,
  config: routerConfig({ policy: 'least_load' }),
  ...over,
});

describe('History screen', () => {
  it('before the history arrives: no "No revisions recorded" yet', () => {
    const { text } = render(<HistoryScreen />);
    expect(text).not.toContain('No revisions recorded');
  });

  it('loaded and empty: says none is recorded and how one gets there', () => {
    const { text } = render(<HistoryScreen />, withState(useHistory, { loaded: true, entries: [] }));
    expect(text).toContain('No revisions recorded Apply a change and it shows here.');
    // The state was the render's only: the store is as it started.
    expect(useHistory.getInitialState()).toMatchObject({ loaded: false, entries: [], error: null });
  });

  it('a history that cannot be read: the reason, in the backend’s words', () => {
    const error = 'cannot read the config history /home/op/.config/mmtc/history.jsonl: EACCES';
    const { text } = render(<HistoryScreen />, withState(useHistory, { loaded: true, entries: [], error }));
    expect(text).toContain(`✕ ${error}`);
  });

  it('the applied revision is marked and offers no rollback; one no longer restorable says so; a long diff is summarised', () => {
    const many = ['policy', 'multimodal_tensor_transport', 'multimodal_shm_min_bytes', 'request_timeout_secs', 'max_payload_size'].map((path) => ({
      path,
      kind: 'changed' as const,
      before: 1,
      after: 2,
    }));
    const { html, text } = render(
      <HistoryScreen />,
      withState(useHistory, { loaded: true, entries: [entry(3, { diff: many }), entry(2), entry(1, { client: 'start', restorable: false, diff: [] })] }),
      withState(useConfig, { view: configView({ revision: 3 }) }),
    );
    expect(text).toContain('3 ✓ applied');
    expect(text).toContain('5 changes policy, multimodal_tensor_transport, multimodal_shm_min_bytes and 2 more');
    expect(text).toContain('router start');
    expect(text).toContain('not restorable');
    expect(html.match(/Roll back to this…/g)).toHaveLength(1);
    expect(html).toContain('aria-label="Roll back to revision 2"');
  });

  it('a rollback says which revision it applied again; an ordinary change says nothing of the kind', () => {
    const { text } = render(
      <HistoryScreen />,
      withState(useHistory, { loaded: true, entries: [entry(3, { rollbackOf: 1 }), entry(2)] }),
      withState(useConfig, { view: configView({ revision: 3 }) }),
    );
    expect(text).toContain('browser console rollback to revision 1');
    expect(text.match(/rollback to revision/g)).toHaveLength(1);
  });
});
