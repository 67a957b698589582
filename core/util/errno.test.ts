import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { errnoText } from './errno.ts';

describe('errnoText', () => {
  it("says a Node system call's code once (its message starts with it)", () => {
    let err: unknown;
    try {
      readFileSync('/nonexistent/mmtc-errno-test');
    } catch (e) {
      err = e;
    }
    expect(errnoText(err)).toBe("ENOENT: no such file or directory, open '/nonexistent/mmtc-errno-test'");
  });

  it('puts the code before a message that lacks it', () => {
    expect(errnoText(Object.assign(new Error('wrote 0 of 4 bytes'), { code: 'EIO' }))).toBe('EIO: wrote 0 of 4 bytes');
  });

  it('says a plain error, or anything thrown, as its message', () => {
    expect(errnoText(new Error('short'))).toBe('short');
    expect(errnoText('a string')).toBe('a string');
  });
});
