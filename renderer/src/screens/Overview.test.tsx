// The Overview's states the end-to-end tests do not reach (e2e/two-workers.spec.ts watches a
// live overview turn from "All clear" to a warning): before the first overview, a first load
// that failed, a refresh that failed over an overview on screen, and an overview gone old
// while the connection is down, which says "Not live" and "Checking…", never "All clear".
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { render, withState } from '../test/render.tsx';
import { decision, overview, verdict, WORKER_A, WORKER_B } from '../test/samples.ts';
import { useOverview } from '../stores/overview.ts';
import { useUi } from '../stores/ui.ts';
import { OverviewScreen } from './Overview.tsx';

const NOW = 1_700_000_000_000;
beforeEach(() => {
  vi.useFakeTimers();
  vi.setSystemTime(NOW);
});
afterEach(() => {
  vi.useRealTimers();
});

describe('Overview screen', () => {
  it('before the first overview: Loading…', () => {
    expect(render(<OverviewScreen />).text).toBe('Loading…');
  });

  it('a first load that failed: the reason alone, in the backend’s words', () => {
    const { text } = render(<OverviewScreen />, withState(useOverview, { error: 'the console client is not connected yet' }));
    expect(text).toBe('✕ the console client is not connected yet');
  });

  it('fresh and without warnings: All clear', () => {
    const { text } = render(<OverviewScreen />, withState(useOverview, { data: overview(), loadedAt: NOW - 500 }), withState(useUi, { connection: 'open' }));
    expect(text).toContain('All clear no deprecated or invalid environment values');
    expect(text).not.toContain('Not live');
    // The model directory and the vision family it was detected as.
    expect(text).toContain('model demo-vl (Qwen2-VL, Qwen2.5-VL)');
  });

  it('every recent request failing, with no warning: never "All clear" under the critical banner', () => {
    const failing = overview({
      health: 'degraded',
      critical: [
        {
          kind: 'requests_failing',
          role: null,
          fails: 'every_request',
          workers: [],
          message: 'every recent request failed: the last 5, within 60 s; the latest with 502: worker grpc://a:1 failed: INTERNAL',
          remedy: "see the latest request's error",
        },
      ],
    });
    const { text } = render(<OverviewScreen />, withState(useOverview, { data: failing, loadedAt: NOW - 500 }), withState(useUi, { connection: 'open' }));
    expect(text).not.toContain('All clear');
    expect(text).toContain('Warnings (0) No warning here, but requests are failing: the critical states are in the banner above.');
  });

  it('a refresh that failed over an overview on screen says so above it', () => {
    const { text } = render(<OverviewScreen />, withState(useOverview, { data: overview(), loadedAt: NOW - 500, error: 'socket closed' }));
    expect(text).toContain('✕ Refresh failed: socket closed');
    expect(text).toContain('Router http://127.0.0.1:30000 · model demo-vl (Qwen2-VL, Qwen2.5-VL) · pid 4242 · revision 1');
  });

  it('an old overview while the connection is down: Not live, with its age, and Checking… instead of All clear', () => {
    const { text } = render(
      <OverviewScreen />,
      withState(useOverview, { data: overview(), loadedAt: NOW - 7000 }),
      withState(useUi, { connection: 'reconnecting' }),
    );
    expect(text).toContain('Not live: this overview is 7 s old (the connection to the console is down; reconnecting). What it shows may have changed since.');
    expect(text).toContain('Checking… (the last overview is 7 s old)');
    expect(text).not.toContain('All clear');
  });

  it('what a restart would change, each in words: a worker the start flags lack is dropped, an optional setting left out is unset, never "undefined"', () => {
    const restartChanges = [
      { path: 'multimodal_tensor_transport', kind: 'changed' as const, before: 'inline', after: 'auto' },
      { path: 'workers["grpc://127.0.0.1:9"]', kind: 'removed' as const, before: { url: 'grpc://127.0.0.1:9', priority: 50 } },
      { path: 'workers["grpc://10.0.0.2:7"]', kind: 'added' as const, after: { url: 'grpc://10.0.0.2:7', priority: 50 } },
      { path: 'multimodal_pixel_cache_mb', kind: 'removed' as const, before: 512 },
    ];
    const { text } = render(
      <OverviewScreen />,
      withState(useOverview, {
        data: overview({ config: { file: '/home/op/.config/mmtc/router.yaml', revision: 2, drifted: false, restartChanges } }),
        loadedAt: NOW - 500,
      }),
      withState(useUi, { connection: 'open' }),
    );
    expect(text).toContain(
      'a restart changes 4 settings multimodal_tensor_transport: "inline" now, "auto" after a restart; worker grpc://127.0.0.1:9: configured now, dropped by a restart; worker grpc://10.0.0.2:7: not configured now, back after a restart; multimodal_pixel_cache_mb: 512 now, unset after a restart',
    );
    expect(text).not.toContain('undefined');
  });

  it('an old overview while connected: waiting for the next update', () => {
    const { text } = render(<OverviewScreen />, withState(useOverview, { data: overview(), loadedAt: NOW - 4000 }), withState(useUi, { connection: 'open' }));
    expect(text).toContain('Not live: this overview is 4 s old (waiting for the next update).');
  });

  it('under EPD a prefill worker that shares /dev/shm gets no green SHM badge: it never gets a pixel tensor', () => {
    const shm = decision('auto_tokens_equal', 'shm');
    const data = overview({
      verdicts: [
        verdict(WORKER_A, { role: 'encode', readsPixels: true, mode: 'auto', decision: shm }),
        verdict(WORKER_B, { role: 'prefill', readsPixels: false, mode: 'auto', decision: shm }),
      ],
    });
    const { text } = render(<OverviewScreen />, withState(useOverview, { data, loadedAt: NOW - 500 }), withState(useUi, { connection: 'open' }));
    expect(text.match(/SHM ≥/g)).toHaveLength(1); // the encode worker's
    expect(text).toContain('no pixel tensors no pixel tensors: its own are the images');
  });

  it("Our tensor files: another router's files in the directory are named apart, not counted as ours", () => {
    const base = overview();
    const data = overview({ files: { ...base.files, count: 1, bytes: 2048, otherFiles: 3, otherBytes: 3 * 1024 * 1024 } });
    const { text } = render(<OverviewScreen />, withState(useOverview, { data, loadedAt: NOW - 500 }), withState(useUi, { connection: 'open' }));
    expect(text).toContain('Not ours: 3 files (3.00 MiB) of other routers under the same names (Doctor lists them by process).');
  });
});
