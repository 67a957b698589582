// The Traffic screen's counts the end-to-end tests do not reach (e2e/workers.spec.ts pauses
// and resumes the table and sees "0 dropped"): events the server dropped for this page, the
// console's own test traffic hidden and counted, the rows a filter keeps of those held, and
// while paused how many new events are not shown.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { render, withState } from '../test/render.tsx';
import { tensorEvent } from '../test/samples.ts';
import { useTraffic } from '../stores/traffic.ts';
import { TrafficScreen } from './Traffic.tsx';

beforeEach(() => {
  vi.useFakeTimers();
  vi.setSystemTime(1_700_000_001_000);
});
afterEach(() => {
  vi.useRealTimers();
});

const rows = [
  tensorEvent({ requestId: 'chatcmpl-3' }),
  tensorEvent({ requestId: 'mmtc-test-2', source: 'console' }),
  tensorEvent({ requestId: 'chatcmpl-1', path: 'shm', reason: 'auto_tokens_equal', writeMicros: 310 }),
];

describe('Traffic screen', () => {
  it('events the server dropped for this page are counted as a warning', () => {
    const { text } = render(<TrafficScreen />, withState(useTraffic, { rows, dropped: 1_234 }));
    expect(text).toContain('1,234 dropped');
  });

  it("the console's own test traffic is hidden unless asked for, and counted", () => {
    const { text } = render(<TrafficScreen />, withState(useTraffic, { rows }));
    expect(text).toContain('show console traffic (1)');
    expect(text).toContain('2 of 3 events kept (newest 10,000 at most)');
    const shown = render(<TrafficScreen />, withState(useTraffic, { rows, filters: { ...useTraffic.getInitialState().filters, showConsole: true } })).text;
    expect(shown).toContain('3 of 3 events kept');
  });

  it('a filter keeps the rows it matches of those held', () => {
    const filters = { ...useTraffic.getInitialState().filters, path: 'shm' as const };
    const { text } = render(<TrafficScreen />, withState(useTraffic, { rows, filters }));
    expect(text).toContain('1 of 3 events kept');
  });

  it('paused: how many new events are not shown, and how to catch up', () => {
    const { text } = render(<TrafficScreen />, withState(useTraffic, { rows, paused: true, skipped: 57 }));
    expect(text).toContain('paused 57 new events not shown; resume to catch up');
  });
});
