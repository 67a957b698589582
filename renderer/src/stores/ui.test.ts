// The UI store as plain functions: the route in the address bar, the toasts (at most five,
// each gone after its time unless dismissed first) and the one review at a time.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { applyResult } from '../test/samples.ts';
import { parseRoute, routeHref, SCREENS, useUi } from './ui.ts';

beforeEach(() => {
  useUi.setState(useUi.getInitialState(), true);
});
afterEach(() => {
  vi.useRealTimers();
});

describe('routes', () => {
  it('a screen and its parameters round-trip through the address bar; anything else is the Overview', () => {
    for (const screen of SCREENS) expect(parseRoute(routeHref(screen))).toEqual({ screen, params: {} });
    expect(routeHref('precedence', { worker: 'grpc://127.0.0.1:50051' })).toBe('#/precedence?worker=grpc%3A%2F%2F127.0.0.1%3A50051');
    expect(parseRoute('#/precedence?worker=grpc%3A%2F%2F127.0.0.1%3A50051')).toEqual({ screen: 'precedence', params: { worker: 'grpc://127.0.0.1:50051' } });
    expect(parseRoute('')).toEqual({ screen: 'overview', params: {} });
    expect(parseRoute('#/settings')).toEqual({ screen: 'overview', params: {} });
  });

  it('navigate shows the screen asked for', () => {
    useUi.getState().navigate('doctor', { worker: 'grpc://127.0.0.1:50051' });
    expect(useUi.getState().route).toEqual({ screen: 'doctor', params: { worker: 'grpc://127.0.0.1:50051' } });
  });
});

describe('toasts', () => {
  it('at most the five newest are on screen', () => {
    for (let i = 1; i <= 7; i++) useUi.getState().toast({ kind: 'info', title: `Applied revision ${i}` }, 0);
    expect(useUi.getState().toasts.map((t) => t.title)).toEqual([3, 4, 5, 6, 7].map((i) => `Applied revision ${i}`));
  });

  it('a toast goes after its time; one dismissed earlier is gone at once', () => {
    vi.useFakeTimers();
    const ui = useUi.getState();
    const kept = ui.toast({ kind: 'success', title: 'Applied revision 6' }, 12_000);
    const dismissed = ui.toast({ kind: 'error', title: 'Not applied' });
    useUi.getState().dismiss(dismissed);
    expect(useUi.getState().toasts.map((t) => t.id)).toEqual([kept]);
    vi.advanceTimersByTime(11_999);
    expect(useUi.getState().toasts).toHaveLength(1);
    vi.advanceTimersByTime(1);
    expect(useUi.getState().toasts).toEqual([]);
  });
});

describe('the review', () => {
  it('one review at a time: a new request replaces it, close leaves none', () => {
    const run = () => Promise.resolve(applyResult(7));
    useUi.getState().requestReview({ title: 'Review changes', intro: 'On top of revision 5.', confirmLabel: 'Apply', run });
    useUi.getState().requestReview({ title: 'Undo revision 6', intro: 'Roll back to revision 5.', confirmLabel: 'Roll back to revision 5', run });
    expect(useUi.getState().review).toMatchObject({ title: 'Undo revision 6', opener: null });
    useUi.getState().closeReview();
    expect(useUi.getState().review).toBeNull();
  });
});
