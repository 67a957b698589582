// The client's stop strings, cut by the router as the gateway's stop decoder cuts them: the
// text before the first stop is sent, the stop and what follows are not; a stream holds back
// only what could still begin a stop, so a stop split across chunks is found and never half sent.
import { describe, expect, it } from 'vitest';
import { StopMatcher } from './stop-matcher.ts';

function stream(stops: string[], chunks: string[]): { sent: string[]; done: boolean; matched: string | undefined } {
  const m = new StopMatcher(stops);
  const sent = chunks.map((c) => m.push(c));
  sent.push(m.flush());
  return { sent, done: m.done, matched: m.matched };
}

describe('stop strings', () => {
  it('cut a whole answer at the first stop, and say which', () => {
    const m = new StopMatcher(['END', 'STOP']);
    expect(m.cut('one two STOP three END')).toBe('one two ');
    expect(m.matched).toBe('STOP');
    expect(new StopMatcher(['x']).cut('no match here')).toBe('no match here');
  });

  it('are found when split across chunks, and nothing of them is sent', () => {
    const r = stream(['<END>'], ['hello <E', 'N', 'D> world']);
    expect(r.sent.join('')).toBe('hello ');
    expect(r).toMatchObject({ done: true, matched: '<END>' });
    // Before the stop completes, only text that cannot begin it was sent.
    expect(r.sent[0]).toBe('hello ');
  });

  it('hold back no more than a stop could need, and release it when the text goes elsewhere or ends', () => {
    const r = stream(['abc'], ['xxab', 'd', 'zz']);
    expect(r.sent).toEqual(['xx', 'abd', 'zz', '']);
    expect(r.done).toBe(false);
  });

  it("the one that completes first wins, as the gateway's matcher reports it", () => {
    expect(new StopMatcher(['abcd', 'bc']).cut('xabcdx')).toBe('xa');
    const m = new StopMatcher(['bc', 'abcd']);
    m.cut('xabcdx');
    expect(m.matched).toBe('bc');
  });

  it('never split a surrogate pair when holding back', () => {
    const r = stream(['ZZ'], ['a😀', 'b']);
    expect(r.sent.join('')).toBe('a😀b');
    for (const s of r.sent) expect(/[\uD800-\uDBFF]$/.test(s)).toBe(false);
  });

  it('send nothing more once a stop was found', () => {
    const m = new StopMatcher(['.']);
    expect(m.push('one. two')).toBe('one');
    expect(m.push(' three')).toBe('');
    expect(m.flush()).toBe('');
  });

  it('with no stops pass everything at once', () => {
    expect(stream([], ['a', 'b'])).toMatchObject({ sent: ['a', 'b', ''], done: false });
  });
});
