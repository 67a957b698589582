import { describe, expect, it } from 'vitest';
import { TENSOR_REASONS, WarningSchema } from '../../../core/console/contract.ts';
import { FALLBACK_REASONS, warningTone, warningWord } from './vocab.ts';

describe('the words the screens use', () => {
  it('every warning kind of the contract has a word and a tone; an unknown kind still reads', () => {
    for (const kind of WarningSchema.shape.kind.options) expect(warningWord(kind)).not.toBe(kind.replaceAll('_', ' '));
    expect(warningWord('shm_read_failed')).toBe('SHM lane broken');
    expect(warningTone('shm_read_failed')).toBe('bad');
    expect(warningTone('shm_budget')).toBe('warn');
    expect(warningWord('some_new_kind')).toBe('some new kind');
    expect(warningTone('some_new_kind')).toBe('warn');
  });

  it('the fallback reasons are real reasons', () => {
    expect(Object.keys(TENSOR_REASONS)).toContain('shm_budget_exceeded');
    expect(FALLBACK_REASONS.has('shm_budget_exceeded')).toBe(true);
    expect(FALLBACK_REASONS.has('auto_worker_read_failed')).toBe(true);
  });
});
