import { describe, expect, it } from 'vitest';
import { toApiError } from '../router/errors.ts';
import { ImageDecodeError } from './decode.ts';
import { ImageSizeError } from './qwen-vl.ts';
import { errorFromThread, InternalThreadError, threadErrorOf } from './thread-error.ts';

/** What the pool's side gets for `err` thrown in a thread: posted (structured clone, as postMessage does) and rebuilt. */
const acrossThreads = (err: unknown) => errorFromThread(structuredClone(threadErrorOf(err)));

describe('errors across threads', () => {
  it('a decode error arrives as an ImageDecodeError with its message: the 400 naming the image', () => {
    const err = acrossThreads(new ImageDecodeError('not a decodable image (expected JPEG, PNG, WebP or GIF)'));
    expect(err).toBeInstanceOf(ImageDecodeError);
    expect(err.name).toBe('ImageDecodeError');
    const api = toApiError(err, { image: 2 });
    expect([api.status, api.message]).toEqual([400, 'image 2: not a decodable image (expected JPEG, PNG, WebP or GIF)']);
  });

  it('a size error arrives as an ImageSizeError with its message', () => {
    const err = acrossThreads(new ImageSizeError('image of 0x10 pixels: height and width must be positive'));
    expect(err).toBeInstanceOf(ImageSizeError);
    expect(err.message).toBe('image of 0x10 pixels: height and width must be positive');
    expect(toApiError(err, { image: 0 }).status).toBe(400);
  });

  it('anything else keeps its name, message and stack, and is a 500 with its message', () => {
    const thrown = new TypeError('cannot read properties of undefined');
    const err = acrossThreads(thrown);
    expect(err).toBeInstanceOf(InternalThreadError);
    expect([err.name, err.message, err.stack]).toEqual(['TypeError', 'cannot read properties of undefined', thrown.stack]);
    expect(String(err)).toBe('TypeError: cannot read properties of undefined');
    const api = toApiError(err);
    expect([api.status, api.message]).toEqual([500, 'internal error: cannot read properties of undefined']);
  });

  it('a thrown value that is not an Error is named Error, its text the message (as before the union)', () => {
    expect(threadErrorOf('out of bands')).toEqual({ kind: 'internal', name: 'Error', message: 'out of bands' });
    expect(threadErrorOf(undefined)).toEqual({ kind: 'internal', name: 'Error', message: 'undefined' });
    const err = acrossThreads(42);
    expect([err.name, err.message]).toEqual(['Error', '42']);
  });

  it('a name-alike is not taken for the class: only instances of the router-handled classes get their kinds', () => {
    const impostor = Object.assign(new Error('looks like one'), { name: 'ImageDecodeError' });
    const err = acrossThreads(impostor);
    expect(err).not.toBeInstanceOf(ImageDecodeError);
    expect(toApiError(err).status).toBe(500);
  });
});
