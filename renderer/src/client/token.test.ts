import { describe, expect, it } from 'vitest';
import { takeToken, tokenFromHash } from './token.ts';

function fakeWindow(hash: string, stored?: string) {
  const storage = new Map<string, string>(stored ? [['mmtc.console.token', stored]] : []);
  const calls: string[] = [];
  const win = {
    location: { hash, pathname: '/', search: '' },
    history: { replaceState: (_s: unknown, _t: string, url: string) => calls.push(url) },
    sessionStorage: { getItem: (k: string) => storage.get(k) ?? null, setItem: (k: string, v: string) => storage.set(k, v) },
  };
  return { win: win as unknown as Window, calls, storage };
}

describe('console token', () => {
  it('reads the fragment, keeps it for this tab and scrubs it from the address bar', () => {
    expect(tokenFromHash('#token=abc')).toBe('abc');
    expect(tokenFromHash('#/traffic')).toBeUndefined();
    const { win, calls, storage } = fakeWindow('#token=s3cret');
    expect(takeToken(win)).toBe('s3cret');
    expect(calls).toEqual(['/#/overview']);
    expect(calls.join()).not.toContain('s3cret');
    expect(storage.get('mmtc.console.token')).toBe('s3cret');
  });
  it('a screen named next to the token is where the scrubbed address points', () => {
    const { win, calls } = fakeWindow('#token=s3cret&screen=traffic');
    expect(takeToken(win)).toBe('s3cret');
    expect(calls).toEqual(['/#/traffic']);
    const odd = fakeWindow('#token=s3cret&screen=../x');
    takeToken(odd.win);
    expect(odd.calls).toEqual(['/#/overview']);
  });
  it('a reload of the same tab uses the stored token and touches no URL', () => {
    const { win, calls } = fakeWindow('#/traffic', 'kept');
    expect(takeToken(win)).toBe('kept');
    expect(calls).toEqual([]);
    expect(takeToken(fakeWindow('').win)).toBeUndefined();
  });
});
