import { describe, expect, it } from 'vitest';
import { retriedRequests, splitAttempts } from './attempts.ts';

describe('attempts of one request', () => {
  it('one attempt when every tensor shows once', () => {
    const a = splitAttempts([{ tensor: 'encoder_input' }, { tensor: 'image_grid_thw' }]);
    expect(a).toEqual([{ events: [{ tensor: 'encoder_input' }, { tensor: 'image_grid_thw' }], superseded: false }]);
  });

  it('a retried request: the first attempt is superseded by the inline one', () => {
    const ev = (tensor: string, reason: string) => ({ tensor, reason });
    const a = splitAttempts([
      ev('encoder_input', 'shm_writable'),
      ev('image_grid_thw', 'below_threshold'),
      ev('encoder_input', 'auto_worker_read_failed'),
      ev('image_grid_thw', 'auto_worker_read_failed'),
    ]);
    expect(a.map((x) => [x.superseded, x.events.map((e) => e.reason)])).toEqual([
      [true, ['shm_writable', 'below_threshold']],
      [false, ['auto_worker_read_failed', 'auto_worker_read_failed']],
    ]);
    expect(splitAttempts([])).toEqual([]);
  });

  it('the router marks the retry attempt 2: it starts the second attempt even when a tensor name is new', () => {
    const a = splitAttempts([{ tensor: 'encoder_input' }, { tensor: 'encoder_input', attempt: 2 }, { tensor: 'image_grid_thw', attempt: 2 }]);
    expect(a.map((x) => [x.superseded, x.events.length])).toEqual([
      [true, 1],
      [false, 2],
    ]);
    expect(
      retriedRequests([
        { requestId: 'a', worker: 'w' },
        { requestId: 'b', worker: 'w', attempt: 2, detail: 'ENOENT' },
      ]),
    ).toEqual(new Map([['b||', 'ENOENT']]));
    // Under EPD the retry is one image's encode call: the other legs of that request were not sent again.
    const epd = retriedRequests([
      { requestId: 'c', leg: 'encode', worker: 'e1' },
      { requestId: 'c', leg: 'encode', worker: 'e2', attempt: 2, detail: 'EACCES' },
      { requestId: 'c', leg: 'prefill', worker: 'p' },
    ]);
    expect([...epd.keys()]).toEqual(['c|encode|e2']);
  });
});
