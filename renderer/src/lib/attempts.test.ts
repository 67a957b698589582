import { describe, expect, it } from 'vitest';
import { splitAttempts } from './attempts.ts';

describe('attempts of one request', () => {
  it('one attempt when every tensor shows once', () => {
    const a = splitAttempts([{ tensor: 'encoder_input' }, { tensor: 'image_grid_thw' }]);
    expect(a).toEqual([{ events: [{ tensor: 'encoder_input' }, { tensor: 'image_grid_thw' }], superseded: false }]);
  });

  it('a retried request: the first attempt is superseded by the inline one', () => {
    const ev = (tensor: string, reason: string) => ({ tensor, reason });
    const a = splitAttempts([ev('encoder_input', 'shm_writable'), ev('image_grid_thw', 'below_threshold'), ev('encoder_input', 'auto_worker_read_failed'), ev('image_grid_thw', 'auto_worker_read_failed')]);
    expect(a.map((x) => [x.superseded, x.events.map((e) => e.reason)])).toEqual([
      [true, ['shm_writable', 'below_threshold']],
      [false, ['auto_worker_read_failed', 'auto_worker_read_failed']],
    ]);
    expect(splitAttempts([])).toEqual([]);
  });
});
