// The Requests screen as the operator first sees it (server-rendered, stores set by the test):
// a failed request marked with its error, the counts, only the rows in view rendered of
// thousands, the waterfall of an EPD request with every leg (its worker and how it ended), and
// Traffic's request ids linking here.
import { describe, expect, it } from 'vitest';
import type { RequestRow, RequestSummaryView } from '../../../core/console/contract.ts';
import { render, withState } from '../test/render.tsx';
import { tensorEvent } from '../test/samples.ts';
import { useRequests } from '../stores/requests.ts';
import { useTraffic } from '../stores/traffic.ts';
import { RequestsScreen, Waterfall } from './Requests.tsx';
import { TrafficScreen } from './Traffic.tsx';

const W1 = 'grpc://127.0.0.1:50051';
const row = (over: Partial<RequestRow>): RequestRow => ({
  id: 'chatcmpl-1',
  time: 1_700_000_000_000,
  status: 200,
  durationMs: 12,
  model: 'demo',
  worker: W1,
  legs: [{ leg: 'regular', worker: W1, startMs: 2, durationMs: 10, firstTokenMs: 5 }],
  tensorCount: 2,
  cacheHits: 0,
  ...over,
});
const timeout = `worker ${W1} did not answer within 1 s (request_timeout_secs)`;
const rows = [row({ id: 'chatcmpl-2', status: 504, error: timeout }), row({})];

describe('Requests screen', () => {
  it('a failed request is marked failed with its status and its error; the counts say what is shown of what is kept', () => {
    const { text, html } = render(<RequestsScreen />, withState(useRequests, { rows, matched: 2, kept: 7, capacity: 10_000 }));
    expect(text).toContain('failed 504');
    expect(text).toContain(timeout);
    expect(text).toContain('1 failed shown');
    expect(text).toContain('2 shown of 2 matching · the router keeps 7 (the last 10,000 at most)');
    expect(html).toContain('data-request="chatcmpl-2"');
  });

  it('with no request yet, it says how to get one', () => {
    const { text } = render(<RequestsScreen />);
    expect(text).toContain('No request yet. Send a chat request through the router.');
  });

  it('thousands of requests: only the rows in view are rendered', () => {
    const many = Array.from({ length: 5_000 }, (_, i) => row({ id: `chatcmpl-${i}` }));
    const { html } = render(<RequestsScreen />, withState(useRequests, { rows: many, matched: 5_000, kept: 5_000 }));
    const rendered = (html.match(/data-request=/g) ?? []).length;
    expect(rendered).toBeGreaterThan(10);
    expect(rendered).toBeLessThan(60);
    expect(html).toContain('aria-rowcount="5001"');
  });

  it('the waterfall of an EPD request shows every leg with its worker and how it ended, a failed leg in its words, the legs it stopped saying so', () => {
    const r: RequestSummaryView = {
      id: 'chatcmpl-3',
      time: 1_700_000_000_000,
      status: 502,
      durationMs: 40,
      error: `encode worker ${W1} (image 1) did not accept the image (EncodeResponse.accepted is false)`,
      phases: [
        { name: 'body', startMs: 0, durationMs: 1 },
        { name: 'fetch', startMs: 1, durationMs: 2 },
        { name: 'preprocess', startMs: 3, durationMs: 5 },
      ],
      legs: [
        { leg: 'encode', worker: W1, startMs: 8, durationMs: 3, image: 0, placeMs: 1 },
        {
          leg: 'encode',
          worker: W1,
          startMs: 8,
          durationMs: 4,
          image: 1,
          error: `encode worker ${W1} (image 1) did not accept the image (EncodeResponse.accepted is false)`,
        },
        { leg: 'prefill', worker: 'grpc://127.0.0.1:50061', startMs: 8, durationMs: 5, stopped: 'another leg of the request failed' },
        { leg: 'decode', worker: 'grpc://127.0.0.1:50071', startMs: 9, durationMs: 5, stopped: 'another leg of the request failed' },
      ],
    };
    const { html, text } = render(<Waterfall r={r} />);
    expect((html.match(/data-testid="waterfall-leg"/g) ?? []).length).toBe(4);
    expect(text).toContain('encode (image 0) 127.0.0.1:50051');
    expect(text).toContain('encode (image 1) 127.0.0.1:50051');
    expect(text).toContain('prefill 127.0.0.1:50061');
    expect(text).toContain('decode 127.0.0.1:50071');
    expect(text).toContain(`failed: encode worker ${W1} (image 1) did not accept the image`);
    expect(text.match(/stopped: another leg of the request failed/g)).toHaveLength(2);
    expect(text).toContain('body 1.00 ms · fetch 2.00 ms · preprocess 5.00 ms');
    // One time axis: the decode bar starts at 9 of 40 ms.
    expect(html).toContain('left:22.500%');
  });

  it("Traffic's request ids open that request in Requests", () => {
    const { html } = render(<TrafficScreen />, withState(useTraffic, { rows: [tensorEvent({ requestId: 'chatcmpl-7' })] }));
    expect(html).toContain('href="#/requests?id=chatcmpl-7"');
  });
});
