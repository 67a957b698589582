// The critical-states banner: above every screen while the backend reports a critical state,
// in the backend's words with what to do; absent once the state clears.
import { describe, expect, it } from 'vitest';
import { App } from '../App.tsx';
import { render, withState } from '../test/render.tsx';
import { overview } from '../test/samples.ts';
import { useOverview } from '../stores/overview.ts';
import { useUi } from '../stores/ui.ts';

const ENCODE = 'grpc://127.0.0.1:50061';
const encodeDown = overview({
  health: 'degraded',
  critical: [
    {
      kind: 'no_healthy_worker',
      role: 'encode',
      fails: 'image_requests',
      workers: [{ url: ENCODE, error: 'HealthCheck failed: 14 UNAVAILABLE: No connection established' }],
      message: `no healthy encode worker: every request with an image fails with 503 (${ENCODE}: HealthCheck failed: 14 UNAVAILABLE: No connection established)`,
      remedy: "restart or bring back the encode worker (Doctor shows each one's checks); requests succeed again as soon as one answers its health check",
    },
  ],
});

describe('critical-states banner', () => {
  for (const screen of ['overview', 'traffic', 'doctor', 'history'] as const) {
    it(`on ${screen}: the state in the backend's words and what to do`, () => {
      const { text, html } = render(<App />, withState(useOverview, { data: encodeDown }), withState(useUi, { route: { screen, params: {} } }));
      expect(html).toContain('data-testid="critical-banner"');
      expect(text).toContain(
        `✕ Degraded: requests are failing no healthy encode worker: every request with an image fails with 503 (${ENCODE}: HealthCheck failed: 14 UNAVAILABLE: No connection established) What to do: restart or bring back the encode worker (Doctor shows each one's checks); requests succeed again as soon as one answers its health check`,
      );
    });
  }

  it('no request can succeed: says so', () => {
    const { text } = render(
      <App />,
      withState(useOverview, {
        data: overview({
          health: 'unavailable',
          critical: [
            {
              ...encodeDown.critical[0]!,
              role: 'decode',
              fails: 'every_request',
              message: 'no healthy decode worker: every request fails with 503 (grpc://d:1: unreachable)',
            },
          ],
        }),
      }),
    );
    expect(text).toContain('✕ Unavailable: no request can succeed no healthy decode worker: every request fails with 503 (grpc://d:1: unreachable)');
  });

  it('gone when the state clears', () => {
    const { html, text } = render(<App />, withState(useOverview, { data: overview() }));
    expect(html).not.toContain('critical-banner');
    expect(text).not.toContain('Degraded');
  });
});
